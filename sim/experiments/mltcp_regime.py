"""8. MLTCP where data centres run it (issue 45): N compatible jobs on the leaf-spine, MLTCP against the plain
algorithm, at a list of queue regimes (shallow DCTCP-style step by default, the earlier deep buffers for the
curve), on a fabric scaled so a push keeps its length in round trips (``mlfc.sim.regime``). Every row says
its regime: link rate, queue bytes, where marking starts, and the congestion signals a flow saw per
communication phase; with ``--publish`` the rows go to docs/data/mltcp-regime with platform "ns-3", beside
the kernel's and the switches'."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from mlfc.policy.mltcp import default_params, format_params
from mlfc.sim import metrics
from mlfc.sim.experiments.common import (
    Context,
    against_baseline,
    col,
    md_table,
    run_saved,
    seeds_text,
    summary,
    write_table,
)
from mlfc.sim.lab import regime_curve, summarise
from mlfc.sim.regime import (
    QueueRegime,
    RegimeFabric,
    compatible_jobs,
    parse_regime,
    reactions_per_phase,
    signals_per_phase,
)
from mlfc.sim.simulation import SimConfig, SimResult

EXP = "mltcp-regime"
REGIMES = ("shallow", "deep")
COUNTS = (2, 16)


@dataclass(frozen=True)
class RegimeRow:
    """regime.csv: one queue regime, congestion control, job count and seed."""

    regime: str = col("regime")
    cc: str = col("cc")
    f: str = col("F")
    jobs: int = col("jobs")
    seed: int = col("seed")
    link_gbps: float = col("host link Gb/s")
    rtt_us: float = col("base RTT us")
    queue_bytes: int = col("queue bytes")
    mark_bytes: int = col("marks above bytes")
    push_rtts: float = col("push RTTs")
    base_avg_ms: float = col("base avg ms")
    mltcp_avg_ms: float = col("mltcp avg ms")
    ideal_avg_ms: float = col("ideal avg ms")
    share: float = col("share of ideal")
    signals: float = col("signals/phase (mltcp)")
    base_signals: float = col("signals/phase (base)")
    reactions: float = col("reactions/phase (mltcp)")
    base_reactions: float = col("reactions/phase (base)")
    interleaved_from: str = col("interleaved from")
    wall_s: float = col("wall s (3 runs)")


def _mix(n: int) -> str:
    return f"compat-{n}"


def compare(ctx: Context, fabric: RegimeFabric, regime: QueueRegime, n: int, cc: str, seed: int,
            iterations: int) -> tuple[RegimeRow, dict[str, SimResult]]:  # fmt: skip
    """One point: the jobs' solo run, the plain algorithm's and MLTCP's with the family's default F."""
    topo = fabric.topology()
    jobs = compatible_jobs(fabric, topo, n)
    switch = regime.switch_settings(fabric)
    params = default_params(cc)
    where = f"{EXP}/{regime.name}"
    common = {"cc": cc, "tcp": fabric.tcp, "seed": seed, **switch}
    solo = run_saved(ctx, where, SimConfig(f"solo-{cc}-{_mix(n)}", topo, (replace(jobs[0], jitter=0.0),),
                                           min(iterations, 5), **common))  # fmt: skip
    solo_avg = summarise(solo.records)[1].avg
    ideal = metrics.fabric_ideal(topo, jobs, {j.job_id: solo_avg for j in jobs})
    ideal_avg = statistics.fmean(ideal.values())
    base = run_saved(ctx, where, SimConfig(f"{cc}-{_mix(n)}/base", topo, jobs, iterations, **common))
    ml = run_saved(ctx, where, SimConfig(f"{cc}-{_mix(n)}/mltcp", topo, jobs, iterations, mltcp=True,
                                         mltcp_params=params, **common))  # fmt: skip
    fig = against_baseline(base, ml, ideal_avg)
    inter = metrics.fabric_interleaving(ml.records, metrics.shared_groups(topo, jobs))
    row = RegimeRow(
        regime=regime.name,
        cc=cc,
        f=format_params(params),
        jobs=n,
        seed=seed,
        link_gbps=fabric.host_rate_bps / 1e9,
        rtt_us=fabric.rtt_s * 1e6,
        queue_bytes=regime.queue_bytes,
        mark_bytes=regime.mark_threshold_bytes,
        push_rtts=round(fabric.push_rtts(jobs[0]), 1),
        base_avg_ms=fig["base_avg_ms"],
        mltcp_avg_ms=fig["mltcp_avg_ms"],
        ideal_avg_ms=1e3 * ideal_avg,
        share=fig["share"],
        signals=signals_per_phase(ml),
        base_signals=signals_per_phase(base),
        reactions=reactions_per_phase(ml),
        base_reactions=reactions_per_phase(base),
        interleaved_from="-" if inter.iteration is None else str(inter.iteration),
        wall_s=round(solo.stats.wall_s + base.stats.wall_s + ml.stats.wall_s, 1),
    )
    ctx.log(
        f"   {regime.name}, {cc}, {n} jobs, seed {seed}: share of ideal {100 * row.share:.0f} %, signals/phase "
        f"{row.signals:.1f} (plain {row.base_signals:.1f}), reactions/phase {row.reactions:.2f} "
        f"(plain {row.base_reactions:.2f}), {row.wall_s:.0f} wall s"
    )
    return row, {"solo": solo, "base": base, "mltcp": ml}


def mltcp_regime(ctx: Context, regimes: Sequence[str] = REGIMES, counts: Sequence[int] = COUNTS,
                 ccs: Sequence[str] = ("reno",)) -> str:  # fmt: skip
    counts = ctx.jobs or counts
    ccs = ctx.ccs or ccs
    regimes = ctx.regimes or regimes
    iterations = ctx.iterations or 20
    fabric = RegimeFabric(**({"scale": ctx.scale} if ctx.scale else {}),
                          **({"rtt_s": ctx.rtt_us * 1e-6} if ctx.rtt_us else {}))  # fmt: skip
    points = [parse_regime(r, fabric) for r in regimes]
    ctx.log(
        f"== {EXP}: hosts {fabric.host_rate_bps / 1e9:g} Gb/s (scale {fabric.scale:g}), base RTT "
        f"{fabric.rtt_s * 1e6:g} us, BDP {fabric.bdp_bytes} bytes, link delay {fabric.link_delay_s() * 1e6:.2f} us; "
        + "; ".join(f"{p.name}: queue {p.queue_bytes} B, {p.ecn}" for p in points)
    )
    rows: list[RegimeRow] = []
    runs: dict[tuple, dict[str, SimResult]] = {}
    total = len(points) * len(ccs) * len(counts) * len(ctx.seeds)
    for p in points:
        for cc in ccs:
            for n in counts:
                for seed in ctx.seeds:
                    ctx.log(f"== {EXP} [{len(rows) + 1}/{total}]: {p.name}, {cc}, {n} jobs, seed {seed}")
                    row, res = compare(ctx, fabric, p, n, cc, seed, iterations)
                    rows.append(row)
                    runs[(p.name, cc, n, seed)] = res
    write_table(ctx.dir(EXP) / "regime.csv", RegimeRow, rows)
    published = ""
    if ctx.publish:
        published = f"Published {len(publish(ctx, fabric, points, rows))} rows to docs/data/{EXP}/."
    body = [
        f"{fabric.topology().description}; jobs: N identical PS jobs (2 workers) sharing one PS host, pushes "
        f"filling 0.8 of the iteration at its link (compatible); {iterations} iterations; seeds {seeds_text(ctx)}; "
        "F: each family's default (mlfc.policy.mltcp.default_params). Signals/phase: the switches' CE marks "
        "and drops per flow per communication phase (the lab's definition); reactions/phase: the senders' "
        "window reductions (CWR, recovery, timeout).",
        "",
        md_table(RegimeRow, rows),
        "",
        published,
    ]
    return summary(ctx, EXP, "MLTCP where data centres run it (issue 45)", body)


def publish(ctx: Context, fabric: RegimeFabric, points: Sequence[QueueRegime], rows: Sequence[RegimeRow]) -> list:
    """Rows with platform "ns-3" in docs/data/mltcp-regime (seeds are its rounds) and every run's records."""
    from mlfc.lab.summaries import publish as publish_summary

    out = []
    files = []
    for p in points:
        for cc in sorted({r.cc for r in rows}):
            for n in sorted({r.jobs for r in rows}):
                at = [r for r in rows if (r.regime, r.cc, r.jobs) == (p.name, cc, n)]
                if not at:
                    continue
                rec = regime_curve.row(
                    platform="ns-3",
                    mix=_mix(n),
                    cc=cc,
                    treatment=f"mltcp_{cc}",
                    f=at[0].f,
                    queue_bytes=p.queue_bytes,
                    mark_threshold_bytes=p.mark_threshold_bytes,
                    link_bps=fabric.host_rate_bps,
                    shares=[r.share for r in at],
                    avg_over_ideal=[r.mltcp_avg_ms / r.ideal_avg_ms for r in at],
                    baseline_avg_over_ideal=[r.base_avg_ms / r.ideal_avg_ms for r in at],
                    interleaved_from=[None if r.interleaved_from == "-" else int(r.interleaved_from) for r in at],
                    signals=[r.signals for r in at],
                    baseline_signals=[r.base_signals for r in at],
                    command=ctx.command,
                )
                rec.update(
                    reactions_per_phase=round(statistics.fmean(r.reactions for r in at), 3),
                    baseline_reactions_per_phase=round(statistics.fmean(r.base_reactions for r in at), 3),
                    ecn=str(p.ecn),
                    rtt_us=fabric.rtt_s * 1e6,
                    scale=fabric.scale,
                    push_rtts=at[0].push_rtts,
                    seeds=[r.seed for r in at],
                    wall_s=[r.wall_s for r in at],
                )
                out.append(rec)
                for r in at:
                    runs_dir = ctx.dir(f"{EXP}/{p.name}") / "runs"
                    for path in sorted(runs_dir.glob(f"*{cc}-{_mix(n)}*_s{r.seed}.csv")):
                        files.append((path, f"ns-3/x{fabric.scale:g}/{_mix(n)}/{p.name}/{path.name}"))
    publish_summary(EXP, out, key=regime_curve.KEY, runs=files)
    return out
