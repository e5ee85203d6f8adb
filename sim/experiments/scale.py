"""2. MLTCP at scale: tens of parameter-server jobs on a 100 Gb/s leaf-spine, Reno and CUBIC with and
without MLTCP, against each job's ideal on the fabric."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mlfc.sim import metrics
from mlfc.sim.experiments.common import (
    HOST_MODELS,
    Context,
    against_baseline,
    col,
    fabric,
    fabric_solo,
    md_table,
    run_saved,
    seeds_text,
    summary,
    write_table,
)
from mlfc.sim.jobs import MODELS, PS, SimJob, model_job
from mlfc.sim.lab import plot_timeline
from mlfc.sim.simulation import SimConfig, SimResult
from mlfc.sim.topology import GBPS, SimTopology, leaf_spine

SCALE_FABRIC = {"leaves": 4, "spines": 2, "hosts_per_leaf": 8, "oversubscription": 2.0}
SCALE_MODELS = ("resnet50", "bert-base", "vgg16")
SCALE_GROUP = 4  # jobs per parameter-server host


def scale_fabric() -> SimTopology:
    return leaf_spine(**SCALE_FABRIC, host_rate_bps=100 * GBPS)  # type: ignore[arg-type]


def scale_jobs(topo: SimTopology, n: int, scale: float, models: Sequence[str] = SCALE_MODELS) -> tuple[SimJob, ...]:
    """``n`` PS jobs of two workers, in groups of SCALE_GROUP jobs of one model (models cycled group by
    group) whose parameter servers share a host: a group competes on that host's link as the lab's
    dumbbell jobs do on theirs. Group g's PS host is on leaf g, its workers on the other leaves (every
    push and pull crosses the spines, where ECMP spreads the flows), hosts used round-robin per leaf."""
    leaves = SCALE_FABRIC["leaves"]
    hpl = SCALE_FABRIC["hosts_per_leaf"]
    used = [0] * leaves

    def host(leaf: int) -> str:
        leaf %= leaves
        h = used[leaf] % hpl
        used[leaf] += 1
        return f"l{leaf + 1}h{h + 1}"

    jobs = []
    ps = ""
    for k in range(n):
        group, member = divmod(k, SCALE_GROUP)
        if member == 0:
            ps = host(group)
        others = [leaf for leaf in range(leaves) if leaf != group % leaves]
        workers = (host(others[member % len(others)]), host(others[(member + 1) % len(others)]))
        model = models[group % len(models)]
        jobs.append(model_job(k + 1, model, workers, ps, PS, scale=scale, jitter=0.01, tau=8 + 2 * (k % 7)))
    return tuple(jobs)


@dataclass(frozen=True)
class ScaleRow:
    """scale.csv: one congestion control, job count and seed."""

    cc: str = col("cc")
    jobs: int = col("jobs")
    seed: int = col("seed")
    scale: float = col("scale")
    base_avg_ms: float = col("base avg ms")
    mltcp_avg_ms: float = col("mltcp avg ms")
    avg_speedup: float = col("avg speed-up")
    p99_speedup: float = col("p99 speed-up")
    ideal_speedup: float = col("ideal speed-up")
    share: float = col("share of ideal")
    links_shared: int = col("links shared")
    interleaved_mltcp: int = col("interleaved (mltcp)")
    interleaved_base: int = col("interleaved (base)")
    mltcp_from: str = col("mltcp from iter")
    base_from: str = col("base from iter")


def _median(v: float) -> str:
    return "-" if math.isnan(v) else f"{v:g}"


def compare(ctx: Context, exp: str, topo: SimTopology, n: int, cc: str, seed: int, scale: float,
            iterations: int) -> tuple[ScaleRow, SimResult, SimResult]:  # fmt: skip
    """One job count, congestion control and seed at one scale: the unmodified controller against MLTCP,
    both against the jobs' ideal on the fabric; the row and the two runs."""
    jobs = scale_jobs(topo, n, scale)
    groups = metrics.shared_groups(topo, jobs)
    tcp = HOST_MODELS[ctx.hosts]
    solo = fabric_solo(ctx, exp, topo, jobs, min(iterations, 5), cc, seed, tcp)
    ideal = metrics.fabric_ideal(topo, jobs, solo)
    ideal_avg = statistics.fmean(ideal.values())
    base = run_saved(ctx, exp, SimConfig(f"{cc}-{n}jobs/base", topo, jobs, iterations, cc=cc, tcp=tcp, seed=seed,
                                         **fabric(tcp)))  # fmt: skip
    ml = run_saved(ctx, exp, SimConfig(f"{cc}-{n}jobs/mltcp", topo, jobs, iterations, cc=cc, mltcp=True, tcp=tcp,
                                       seed=seed, **fabric(tcp)))  # fmt: skip
    ib = metrics.fabric_interleaving(base.records, groups)
    im = metrics.fabric_interleaving(ml.records, groups)
    row = ScaleRow(
        cc=cc,
        jobs=n,
        seed=seed,
        scale=scale,
        **against_baseline(base, ml, ideal_avg),
        links_shared=im.groups,
        interleaved_mltcp=im.interleaved,
        interleaved_base=ib.interleaved,
        mltcp_from=_median(im.median),
        base_from=_median(ib.median),
    )
    return row, base, ml


def at_scale(ctx: Context, counts: Sequence[int] = (4, 8, 16, 32), ccs: Sequence[str] = ("reno", "cubic")) -> str:
    exp = "scale" if ctx.hosts == "jumbo" else f"scale-{ctx.hosts}"
    counts = ctx.jobs or counts
    ccs = ctx.ccs or ccs
    iterations = ctx.iterations or 30
    scale = ctx.scale or 0.02
    tcp = HOST_MODELS[ctx.hosts]
    topo = scale_fabric()
    rows: list[ScaleRow] = []
    for cc in ccs:
        for n in counts:
            for seed in ctx.seeds:
                row, base, ml = compare(ctx, exp, topo, n, cc, seed, scale, iterations)
                rows.append(row)
                if n == counts[-1] and seed == ctx.seeds[0] and cc == ccs[0]:
                    for name, res in (("base", base), ("mltcp", ml)):
                        few = [r for r in res.records if r.job <= 6]
                        plot_timeline(ctx.dir(exp) / f"scale-{cc}-{n}jobs-{name}.png", few,
                                      f"ns-3 leaf-spine, {n} jobs, {cc} {name}: jobs 1-6 (seed {seed})")  # fmt: skip
    write_table(ctx.dir(exp) / "scale.csv", ScaleRow, rows)
    plot_scale(ctx.dir(exp) / "scale.png", rows)
    a = {m: metrics.comm_fraction(topo, model_job(1, m, ("l1h1", "l2h1"), "l3h1", scale=scale)) for m in MODELS}
    body = [
        f"{topo.description}; hosts {ctx.hosts} (MTU {tcp.mtu}); {iterations} iterations; models cycled "
        f"{', '.join(SCALE_MODELS)} group by group, bytes and compute times x {scale:g} (printed factor; a alone: "
        + ", ".join(f"{k} {v:.2f}" for k, v in a.items())
        + f"); 2 workers + 1 PS per job, groups of {SCALE_GROUP} jobs of one model share their PS host; "
        + "compute jitter 1 %; "
        + f"seeds {seeds_text(ctx)}. "
        "Ideal: solo time scaled by the busiest link's load (docs/sim.md). Interleaving: groups of jobs "
        "sharing a host link, counted when they stayed interleaved to the end; 'from iter' is their median.",
        "",
        md_table(ScaleRow, rows),
        "",
        "![scale](scale.png)",
    ]
    return summary(ctx, exp, "MLTCP at scale on a leaf-spine", body)


def plot_scale(path: Path, rows: Sequence[ScaleRow]) -> None:
    """Left: MLTCP's avg and p99 speed-up and the ideal over job counts; right: the share of the ideal gain."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for cc in sorted({r.cc for r in rows}):
        counts = sorted({r.jobs for r in rows if r.cc == cc})
        at = {n: [r for r in rows if r.cc == cc and r.jobs == n] for n in counts}
        for ax, what, label in ((axes[0], "avg_speedup", "avg"), (axes[0], "p99_speedup", "p99"),
                                (axes[1], "share", "share")):  # fmt: skip
            ys = [statistics.fmean(getattr(r, what) for r in at[n]) for n in counts]
            ax.plot(counts, [100 * y for y in ys] if what == "share" else ys, marker="o", label=f"MLTCP-{cc} {label}")
        ideal = [statistics.fmean(r.ideal_speedup for r in at[n]) for n in counts]
        axes[0].plot(counts, ideal, ls="--", label=f"ideal ({cc})")
    axes[0].set_ylabel("speed-up over unmodified")
    axes[1].set_ylabel("share of ideal gain (%)")
    for ax in axes:
        ax.set_xlabel("jobs")
        ax.set_xscale("log", base=2)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
