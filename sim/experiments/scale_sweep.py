"""7. How small a scale stands for full model bytes (issue 28, item 4): the scale experiment's comparison
(MLTCP against the unmodified controller, against the ideal) repeated at growing fractions of the models'
bytes and compute times. From the smallest scale on which the figures stop changing, a run that fits the
time limits says what the full-size run, ~6 hours at today's event rate, would."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from mlfc.sim.experiments.common import Context, col, md_table, seeds_text, summary, write_table
from mlfc.sim.experiments.scale import ScaleRow, compare, scale_fabric
from mlfc.sim.simulation import SimResult

SCALES = (0.005, 0.01, 0.02, 0.05, 0.1)
# Two scales agree when MLTCP's average and p99 speed-up and the ideal speed-up differ by at most this much:
# about the seed-to-seed spread of the speed-ups in the validation runs (docs/results.md), fixed before the
# sweep ran.
TOLERANCE = 0.03
COMPARED = ("avg_speedup", "p99_speedup", "ideal_speedup")


@dataclass(frozen=True)
class SweepRow:
    """scales.csv: one scale, congestion control, job count and seed."""

    scale: float = col("scale")
    cc: str = col("cc")
    jobs: int = col("jobs")
    seed: int = col("seed")
    iterations: int = col("iterations")
    base_avg_ms: float = col("base avg ms")
    mltcp_avg_ms: float = col("mltcp avg ms")
    avg_speedup: float = col("avg speed-up")
    p99_speedup: float = col("p99 speed-up")
    ideal_speedup: float = col("ideal speed-up")
    share: float = col("share of ideal")
    links_shared: int = col("links shared")
    interleaved_mltcp: int = col("interleaved (mltcp)")
    interleaved_base: int = col("interleaved (base)")
    events: int = col("events (both runs)")
    wall_s: float = col("wall s (both runs)")


def sweep_row(row: ScaleRow, iterations: int, runs: Sequence[SimResult]) -> SweepRow:
    return SweepRow(
        scale=row.scale,
        cc=row.cc,
        jobs=row.jobs,
        seed=row.seed,
        iterations=iterations,
        base_avg_ms=row.base_avg_ms,
        mltcp_avg_ms=row.mltcp_avg_ms,
        avg_speedup=row.avg_speedup,
        p99_speedup=row.p99_speedup,
        ideal_speedup=row.ideal_speedup,
        share=row.share,
        links_shared=row.links_shared,
        interleaved_mltcp=row.interleaved_mltcp,
        interleaved_base=row.interleaved_base,
        events=sum(r.stats.events for r in runs),
        wall_s=sum(r.stats.wall_s for r in runs),
    )


def settled_scale(rows: Sequence[SweepRow], tolerance: float = TOLERANCE) -> float | None:
    """The smallest scale whose seed-mean figures (COMPARED) agree within ``tolerance`` with those of every
    larger scale swept; None when even the two largest disagree (the behaviour still changes)."""
    scales = sorted({r.scale for r in rows})
    mean = {s: {k: statistics.fmean(getattr(r, k) for r in rows if r.scale == s) for k in COMPARED} for s in scales}

    def agree(a: float, b: float) -> bool:
        return all(abs(mean[a][k] - mean[b][k]) <= tolerance for k in COMPARED)

    for i, s in enumerate(scales[:-1]):
        if all(agree(s, t) for t in scales[i + 1 :]):
            return s
    return None


def events_per_unit(rows: Sequence[SweepRow]) -> int | None:
    """Events per job-iteration per unit of scale, over the sweep's runs (two runs a row; None when every
    run was resumed): the events of a run grow with its bytes, so this projects other sizes."""
    per = [r.events / (2 * r.jobs * r.iterations * r.scale) for r in rows if r.events]
    return round(statistics.median(per)) if per else None


def scale_sweep(ctx: Context, scales: Sequence[float] = SCALES, counts: Sequence[int] = (8,),
                ccs: Sequence[str] = ("reno",)) -> str:  # fmt: skip
    exp = "scales"
    counts = ctx.jobs or counts
    ccs = ctx.ccs or ccs
    scales = ctx.scales or scales
    iterations = ctx.iterations or 20
    topo = scale_fabric()
    rows: list[SweepRow] = []
    for s in sorted(scales):
        for cc in ccs:
            for n in counts:
                for seed in ctx.seeds:
                    ctx.log(f"== scales: x{s:g}, {cc}, {n} jobs, seed {seed}")
                    row, base, ml = compare(ctx, f"{exp}/x{s:g}", topo, n, cc, seed, s, iterations)
                    rows.append(sweep_row(row, iterations, (base, ml)))
    write_table(ctx.dir(exp) / "scales.csv", SweepRow, rows)
    plot_sweep(ctx.dir(exp) / "scales.png", rows)
    meta = _publish(ctx, exp, rows) if ctx.publish else conclusion(rows)
    body = [
        f"{topo.description}; the scale experiment's jobs and switch settings; {iterations} iterations; "
        f"scales {', '.join(f'{s:g}' for s in sorted(scales))}; seeds {seeds_text(ctx)}. Two scales agree when "
        f"the seed means of {', '.join(COMPARED)} differ by at most {TOLERANCE}.",
        "",
        md_table(SweepRow, rows),
        "",
        *(
            f"- {k}: figures settled from scale {'-' if v is None else f'{v:g}'}"
            for k, v in meta["settled_from"].items()
        ),
        f"- events per job-iteration per unit of scale: {meta['events_per_job_iteration_per_scale'] or '-'}",
        "",
        "![scales](scales.png)",
    ]
    return summary(ctx, exp, "The smallest scale that stands for full model bytes", body)


KEY = ("scale", "cc", "jobs", "seed", "iterations")


def _publish(ctx: Context, exp: str, rows: Sequence[SweepRow]) -> dict[str, Any]:
    """docs/data/sim-scale/: the rows, each run's iteration records (the solo runs' too: the ideal comes from
    them), and what all published rows conclude; returns that conclusion. A row resumed from records that
    kept no cost keeps the published row's events, wall time and command."""
    from mlfc.lab.figures import load, publish

    def ident(r: Mapping[str, Any]) -> tuple:
        return tuple(r[k] for k in KEY)

    before = {ident(r): r for r in load("sim-scale")["rows"]}
    out = []
    for r in rows:
        row = {**asdict(r), "command": ctx.command}
        old = before.get(ident(row))
        if not r.events and old is not None:
            row.update(events=old["events"], wall_s=old["wall_s"], command=old["command"])
        out.append(row)
    runs = [
        (p, f"x{r.scale:g}_{p.name}")
        for r in rows
        for pattern in (f"{r.cc}-{r.jobs}jobs_*_s{r.seed}.csv", f"solo-{r.cc}-*_s{r.seed}.csv")
        for p in sorted((ctx.dir(f"{exp}/x{r.scale:g}") / "runs").glob(pattern))
    ]
    publish("sim-scale", out, key=KEY, runs=runs)
    names = {f.name for f in fields(SweepRow)}
    every = [SweepRow(**{k: v for k, v in r.items() if k in names}) for r in load("sim-scale")["rows"]]
    meta = conclusion(every)
    publish("sim-scale", [], key=KEY, meta=meta)
    return meta


def conclusion(rows: Sequence[SweepRow]) -> dict[str, Any]:
    """Per (cc, jobs, iterations): the scale the figures settle from; and the events per unit of work."""
    groups = sorted({(r.cc, r.jobs, r.iterations) for r in rows})
    return {
        "tolerance": TOLERANCE,
        "compared": list(COMPARED),
        "settled_from": {
            f"{cc}, {n} jobs, {i} iterations": settled_scale(
                [r for r in rows if (r.cc, r.jobs, r.iterations) == (cc, n, i)]
            )
            for cc, n, i in groups
        },
        "events_per_job_iteration_per_scale": events_per_unit(rows),
    }


def plot_sweep(path: Path, rows: Sequence[SweepRow]) -> None:
    """MLTCP's avg and p99 speed-up and the ideal against the scale (log), one line per cc and job count,
    seeds as points around their mean."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for cc, n in sorted({(r.cc, r.jobs) for r in rows}):
        mine = [r for r in rows if r.cc == cc and r.jobs == n]
        scales = sorted({r.scale for r in mine})
        for what, style in (("avg_speedup", "-o"), ("p99_speedup", "-s"), ("ideal_speedup", "--")):
            ys = [statistics.fmean(getattr(r, what) for r in mine if r.scale == s) for s in scales]
            ax.plot(scales, ys, style, label=f"{cc}, {n} jobs: {what.replace('_', ' ')}")
            ax.scatter([r.scale for r in mine], [getattr(r, what) for r in mine], s=8, alpha=0.4)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("scale (fraction of the models' bytes and compute times)")
    ax.set_ylabel("speed-up over the unmodified controller")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
