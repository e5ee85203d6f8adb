"""1. Validation against the emulation: its mixes on its dumbbell at its bottleneck, held against the
emulation's measured figures."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from mlfc.policy.mltcp import MltcpParams
from mlfc.sim import metrics
from mlfc.sim.experiments.common import (
    Context,
    col,
    fmt_range,
    its,
    md_table,
    run_saved,
    seeds_text,
    solo_stats,
    summary,
    write_table,
)
from mlfc.sim.jobs import from_lab_job
from mlfc.sim.lab import (
    BOTTLENECK_PPS,
    MIXES,
    dumbbell,
    ideal_iteration_times,
    interleaving_iteration,
    plot_timeline,
    share_of_ideal_gain,
    summarise,
)
from mlfc.sim.network import TcpSettings
from mlfc.sim.simulation import SimConfig
from mlfc.sim.topology import from_lab

# The emulation's figures (docs/results.md, 2026-11-30, BMv2 without logging macros at 1,500 packets/s,
# 16 iterations, MLTCP 2:0.5 vs Reno): the numbers the validation is held against.
EMULATION = {
    "two-compatible": {
        "source": "`make sweep`, 2:0.5, five rounds in two runs",
        "base_avg": (1.215, 1.231),
        "mltcp_avg": (1.032, 1.042),
        "speedup": (1.166, 1.192),
        "ideal": (1.198, 1.228),
        "share": (0.77, 0.89),
        "interleaved": (2, 9),
    },
    "partial": {
        "source": "`make e2e`, one run",
        "speedup": (1.34, 1.34),
        "ideal": (1.45, 1.45),
        "share": (0.76, 0.76),
        "interleaved": (3, 3),
    },
}
# The emulated network: BMv2 queues of 64 packets, Mininet links far faster than the bottleneck,
# mlfc's transport (1,400-byte chunks, 50 ms minimum RTO, an ACK at least every 8 chunks).
EMU_TCP = TcpSettings(mss=1400, min_rto_s=0.05, delayed_ack=2, delayed_ack_timeout_s=0.001)
EMU_EDGE_BPS = 1e9
EMU_DELAY_S = 100e-6


@dataclass(frozen=True)
class ValidationRow:
    """validation.csv: one mix over its seeds."""

    mix: str = col("mix")
    seeds: int = col("seeds")
    base_avg_s: float = col("base avg s")
    mltcp_avg_s: float = col("mltcp avg s")
    avg_speedup: float = col("avg speed-up")
    p99_speedup: float = col("p99 speed-up")
    ideal_speedup: float = col("ideal speed-up")
    share: float = col("share of ideal")
    share_min: float = col("share min")
    share_max: float = col("share max")
    mltcp_interleaved: str = col("mltcp interleaved from")
    base_interleaved: str = col("baseline interleaved from")


@dataclass(frozen=True)
class ComparisonRow:
    """summary.md: one mix, ns-3 beside the emulation."""

    mix: str = col("mix")
    speedup: str = col("speed-up ns-3 (range)")
    speedup_emulation: str = col("speed-up emulation")
    ideal: str = col("ideal ns-3")
    ideal_emulation: str = col("ideal emulation")
    share: str = col("share of ideal ns-3")
    share_emulation: str = col("share emulation")
    mltcp_interleaved: str = col("MLTCP interleaved from, ns-3 (per seed)")
    interleaved_emulation: str = col("emulation")
    base_interleaved: str = col("baseline interleaved from, ns-3")


def validation(ctx: Context, mixes: Sequence[str] = ("two-compatible", "partial")) -> str:
    """The emulation's mixes on its dumbbell, at its bottleneck of 1,500 packets/s, several seeds."""
    exp = "validation"
    iterations = ctx.iterations or 16
    tcp = EMU_TCP
    bottleneck = BOTTLENECK_PPS * tcp.packet_bytes * 8
    rows: list[ValidationRow] = []
    md_rows: list[ComparisonRow] = []
    plots = []
    for mix_name in mixes:
        mix = MIXES[mix_name]
        topo = from_lab(dumbbell(len(mix.jobs), mix.workers_per_job), EMU_EDGE_BPS, bottleneck, EMU_DELAY_S)
        jobs = tuple(
            from_lab_job(j, tuple(f"j{j.job}w{w}" for w in range(mix.workers_per_job)), f"j{j.job}ps", jitter=0.01)
            for j in mix.jobs
        )
        jobs = tuple(
            replace(j, importance=metrics.importance_pattern(j.push_bytes, tcp.mss, seed=j.job_id)) for j in jobs
        )
        base_avgs, ml_avgs, ml_p99, base_p99, ml_its, base_its, ideals = [], [], [], [], [], [], []
        for seed in ctx.seeds:
            solo_t, solo_c, solo_p = {}, {}, {}
            for j in jobs:
                cfg = SimConfig(f"{mix_name}/solo-{j.job_id}", topo, (j,), iterations, tcp=tcp, seed=seed)
                solo_t[j.job_id], solo_c[j.job_id], solo_p[j.job_id] = solo_stats(run_saved(ctx, exp, cfg).records)
            ideal = ideal_iteration_times(solo_t, solo_c, solo_p)
            ideals.append(statistics.fmean(ideal.values()))
            base = run_saved(ctx, exp, SimConfig(f"{mix_name}/baseline", topo, jobs, iterations, tcp=tcp, seed=seed))
            ml = run_saved(
                ctx, exp, SimConfig(f"{mix_name}/mltcp-reno", topo, jobs, iterations, mltcp=True, tcp=tcp, seed=seed)
            )
            b, m = summarise(base.records)[1], summarise(ml.records)[1]
            base_avgs.append(b.avg)
            base_p99.append(b.p99)
            ml_avgs.append(m.avg)
            ml_p99.append(m.p99)
            base_its.append(interleaving_iteration(base.records))
            ml_its.append(interleaving_iteration(ml.records))
            if seed == ctx.seeds[0]:
                for name, res in (("baseline", base), ("mltcp-reno", ml)):
                    png = ctx.dir(exp) / f"{mix_name}-{name}.png"
                    plot_timeline(png, res.records, f"ns-3: {mix_name}, {name} (seed {seed})")
                    plots.append(png)
        base_avg = statistics.fmean(base_avgs)
        ideal_avg = statistics.fmean(ideals)
        shares = [share_of_ideal_gain(base_avg, a, ideal_avg) for a in ml_avgs]
        speedups = [base_avg / a for a in ml_avgs]
        emu = EMULATION.get(mix_name, {})
        row = ValidationRow(
            mix=mix_name,
            seeds=len(ctx.seeds),
            base_avg_s=base_avg,
            mltcp_avg_s=statistics.fmean(ml_avgs),
            avg_speedup=statistics.fmean(speedups),
            p99_speedup=statistics.fmean(base_p99) / statistics.fmean(ml_p99),
            ideal_speedup=base_avg / ideal_avg,
            share=statistics.fmean(shares),
            share_min=min(shares),
            share_max=max(shares),
            mltcp_interleaved=its(ml_its),
            base_interleaved=its(base_its),
        )
        rows.append(row)
        md_rows.append(
            ComparisonRow(
                mix=mix_name,
                speedup=f"{row.avg_speedup:.3f} ({min(speedups):.3f}..{max(speedups):.3f})",
                speedup_emulation=fmt_range(*emu["speedup"]) if emu else "—",
                ideal=f"{row.ideal_speedup:.3f}",
                ideal_emulation=fmt_range(*emu["ideal"]) if emu else "—",
                share=f"{100 * row.share:.0f} % ({100 * row.share_min:.0f}..{100 * row.share_max:.0f})",
                share_emulation=fmt_range(*emu["share"], pct=True) if emu else "—",
                mltcp_interleaved=row.mltcp_interleaved,
                interleaved_emulation="..".join(str(i) for i in sorted(set(emu["interleaved"]))) if emu else "—",
                base_interleaved=row.base_interleaved,
            )
        )
    write_table(ctx.dir(exp) / "validation.csv", ValidationRow, rows)
    body = [
        f"ns-3, {iterations} iterations, seeds {seeds_text(ctx)}, MLTCP-Reno "
        f"{MltcpParams().slope:g}:{MltcpParams().intercept:g} vs Reno; dumbbell, bottleneck {BOTTLENECK_PPS} "
        f"packets/s of {tcp.packet_bytes} bytes each way, queues of 64 packets; compute jitter 1 %.",
        "",
        md_table(ComparisonRow, md_rows),
        "",
        "Emulation: " + "; ".join(f"{k}: {v['source']}" for k, v in EMULATION.items() if k in mixes) + ".",
        "",
        *[f"![{p.stem}]({p.name})" for p in plots],
    ]
    return summary(ctx, exp, "Validation: ns-3 against the emulation", body)


def small(ctx: Context) -> str:
    """`make sim`: a short run on a fresh machine — two compatible jobs, Reno vs MLTCP-Reno, one seed."""
    return validation(replace(ctx, seeds=ctx.seeds[:1], iterations=ctx.iterations or 10), mixes=("two-compatible",))
