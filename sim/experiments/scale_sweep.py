"""7. How small a scale stands for full model bytes (issue 28, item 4): the scale experiment's comparison
(MLTCP against the unmodified controller, against the ideal) repeated at growing fractions of the models'
bytes and compute times, up to full size. From the smallest scale on which the figures stop changing, a
small run says what a full-size one (16 jobs x 50 iterations: ~1.5 hours on one core) would."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from mlfc.sim.experiments.common import Context, col, md_table, seeds_text, summary, write_table
from mlfc.sim.experiments.scale import ScaleRow, compare, scale_fabric
from mlfc.sim.simulation import SimResult

SCALES = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)  # the published sweep (~1 hour a seed on one core)
# Two scales agree when MLTCP's average and p99 speed-up and the ideal speed-up differ by at most this much:
# about the seed-to-seed spread of the speed-ups in the validation runs (docs/results.md), fixed before the
# sweep ran.
TOLERANCE = 0.03
COMPARED = ("avg_speedup", "p99_speedup", "ideal_speedup")


@dataclass(frozen=True)
class SweepRow(ScaleRow):
    """scales.csv: the scale experiment's row for one scale, congestion control, job count and seed, with
    the run's length and what its two runs cost."""

    iterations: int = col("iterations")
    events: int = col("events (both runs)")
    wall_s: float = col("wall s (both runs)")
    hosts: str = col("hosts")  # common.HOST_MODELS: how the hosts' TCP sends


def sweep_row(row: ScaleRow, iterations: int, runs: Sequence[SimResult], hosts: str) -> SweepRow:
    return SweepRow(**asdict(row), iterations=iterations, events=sum(r.stats.events for r in runs),
                    wall_s=sum(r.stats.wall_s for r in runs), hosts=hosts)  # fmt: skip


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
                    ctx.log(f"== scales: x{s:g}, {cc}, {n} jobs, seed {seed}, hosts {ctx.hosts}")
                    row, base, ml = compare(ctx, run_dir(exp, s, ctx.hosts), topo, n, cc, seed, s, iterations)
                    rows.append(sweep_row(row, iterations, (base, ml), ctx.hosts))
    write_table(ctx.dir(exp) / "scales.csv", SweepRow, rows)
    plot_sweep(ctx.dir(exp) / "scales.png", rows)
    meta = _publish(ctx, exp, rows) if ctx.publish else conclusion(rows)
    body = [
        f"{topo.description}; the scale experiment's jobs and switch settings, hosts {ctx.hosts}; {iterations} "
        "iterations; "
        f"scales {', '.join(f'{s:g}' for s in sorted(scales))}; seeds {seeds_text(ctx)}. Two scales agree when "
        f"the seed means of {', '.join(COMPARED)} differ by at most {TOLERANCE}.",
        "",
        md_table(SweepRow, rows),
        "",
        *(
            f"- {k}: figures settled from scale {'-' if v is None else f'{v:g}'}"
            for k, v in meta["settled_from"].items()
        ),
        *(
            f"- events per job-iteration per unit of scale, hosts {hosts}: {v or '-'}"
            for hosts, v in meta["events_per_job_iteration_per_scale"].items()
        ),
        "",
        "![scales](scales.png)",
    ]
    return summary(ctx, exp, "The smallest scale that stands for full model bytes", body)


KEY = ("scale", "cc", "jobs", "seed", "iterations", "hosts")


def scale_label(scale: float, hosts: str) -> str:
    """A scale's name in paths: x0.05, or x0.05-tso for another host model (jumbo's where it always was)."""
    return f"x{scale:g}" + ("" if hosts == "jumbo" else f"-{hosts}")


def run_dir(exp: str, scale: float, hosts: str) -> str:
    """Where a scale's runs are saved."""
    return f"{exp}/{scale_label(scale, hosts)}"


def _publish(ctx: Context, exp: str, rows: Sequence[SweepRow]) -> dict[str, Any]:
    """docs/data/sim-scale/: the rows, each run's iteration records (the solo runs' too: the ideal comes from
    them), and what all published rows conclude; returns that conclusion. With --resume a row keeps the
    published row's command (and its events and wall time, if the records kept no cost)."""
    from mlfc.lab.summaries import load, publish

    def ident(r: Mapping[str, Any]) -> tuple:
        return tuple(r[k] for k in KEY)

    before = {ident(r): r for r in load("sim-scale")["rows"]}
    out = []
    for r in rows:
        row = {**asdict(r), "command": ctx.command}
        old = before.get(ident(row))
        if ctx.resume and old is not None:  # the records came from the run the published row names
            row["command"] = old["command"]
            if not r.events:
                row.update(events=old["events"], wall_s=old["wall_s"])
        out.append(row)
    runs = [
        (p, f"{scale_label(r.scale, r.hosts)}_{p.name}")
        for r in rows
        for pattern in (f"{r.cc}-{r.jobs}jobs_*_s{r.seed}.csv", f"solo-{r.cc}-*_s{r.seed}.csv")
        for p in sorted((ctx.dir(run_dir(exp, r.scale, r.hosts)) / "runs").glob(pattern))
    ]
    # the conclusion of every row the summary will hold (publish replaces a row by its key), in one write
    names = {f.name for f in fields(SweepRow)}
    merged = {**before, **{ident(r): r for r in out}}.values()
    meta = conclusion([SweepRow(**{k: v for k, v in r.items() if k in names}) for r in merged])
    publish("sim-scale", out, key=KEY, runs=runs, meta=meta)
    return meta


def conclusion(rows: Sequence[SweepRow]) -> dict[str, Any]:
    """Per (cc, jobs, iterations, host model): the scale the figures settle from; per host model, the
    events per unit of work."""
    groups = sorted({(r.cc, r.jobs, r.iterations, r.hosts) for r in rows})
    models = sorted({r.hosts for r in rows})
    return {
        "tolerance": TOLERANCE,
        "compared": list(COMPARED),
        "settled_from": {
            f"{cc}, {n} jobs, {i} iterations" + ("" if f == "jumbo" else f", hosts {f}"): settled_scale(
                [r for r in rows if (r.cc, r.jobs, r.iterations, r.hosts) == (cc, n, i, f)]
            )
            for cc, n, i, f in groups
        },
        "events_per_job_iteration_per_scale": {f: events_per_unit([r for r in rows if r.hosts == f]) for f in models},
    }


def plot_sweep(path: Path, rows: Sequence[SweepRow]) -> None:
    """The docs' plot of the published sweep (lab/sim_figures.py), for these rows."""
    from mlfc.lab.sim_figures import plot_sim_scale

    plot_sim_scale({"rows": [asdict(r) for r in rows]}, path)
