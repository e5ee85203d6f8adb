"""`make sweep`: MLTCP's F = intercept + slope * g(bytes_ratio), swept on one job mix.

    python -m mlfc.lab.mltcp.sweep [--mix two-compatible] [--cc reno] [--grid 1:0.5,4:0.25:step=0.2 ...]
                                    [--shape linear,power=0.5,step=0.2,sigmoid=0.3]
                                    [--iterations 12] [--repeat 1] [--dataplane auto|bmv2|ref]
                                    [--tune [SLOPE:INTERCEPT]] [--out results/sweep]

A grid point is SLOPE:INTERCEPT, optionally with F's shape (SLOPE:INTERCEPT:SHAPE=ARG,
mlfc.policy.mltcp); --shape crosses every linear grid point with the shapes listed (the shape axis).

The network comes up once; the jobs run alone (the ideal), then under the unmodified controller
(the baseline) and once per (slope, intercept) point with MLTCP on; --repeat N runs that round N
times (rounds, not points, are repeated, so slow drift of the machine hits every point alike). One
row per point, averaged over the rounds: average and p99 iteration time, the speed-up over the
baseline beside the ideal one, the share of the ideal gain (with its spread over the rounds) and the
iteration from which the jobs stay interleaved in each round. --tune adds a row where every sender tunes
slope/intercept online (SenderConfig.mltcp_tune), starting from the given point (default: the
controller's, default_params).
Each run's CSV and timeline PNG, the table (sweep.md) and a plot of the gain per point (sweep.png) go
to OUT/<mix>/.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import textwrap
from dataclasses import dataclass, replace
from pathlib import Path

from mlfc.hosts.cc import ALGORITHMS
from mlfc.lab import dataplanes
from mlfc.lab.cleanup import interrupt_on_sigterm, leftovers
from mlfc.lab.e2e.cli import run_solo, run_treatment, say
from mlfc.lab.rounds import Rounds, rounds_table
from mlfc.lab.scenarios import (
    MIXES,
    Treatment,
    ideal_iteration_times,
    stack_config,
)
from mlfc.lab.stack import StackError, network_with_control
from mlfc.lab.validity import BottleneckNotCarried
from mlfc.policy.mltcp import MltcpParams, default_params, format_params, parse_params, parse_shape
from mlfc.policy.priority import PolicyError

# F ranges from a gentle tilt to nearly strict priority for the job further into its iteration.
DEFAULT_GRID = ((1.0, 0.5), (2.0, 0.5), (4.0, 0.5), (4.0, 0.25), (8.0, 0.25), (16.0, 0.125))


@dataclass
class SweepRow(Rounds):
    """A sweep point: ``params`` None is the baseline (MLTCP off); ``tune``: F tuned online from params."""

    params: MltcpParams | None = None
    tune: bool = False


def sweep_row(params: MltcpParams | None, cc: str, tune: bool = False) -> SweepRow:
    name = f"mltcp-{cc}-tune" if tune else f"mltcp-{cc}" if params else "baseline"
    treatment = Treatment(name, cc, mltcp=params is not None, tune=tune)
    return SweepRow(f"tune@{label(params)}" if tune else label(params), treatment, params=params, tune=tune)


def parse_grid(text: str) -> list[MltcpParams]:
    """'1:0.5,4:0.25:step=0.2' -> [MltcpParams(1, 0.5), MltcpParams(4, 0.25, 'step', knee=0.2)], with the
    policy's own checks."""
    points = []
    for item in text.split(","):
        if ":" not in item:
            raise argparse.ArgumentTypeError(f"grid point {item!r}: expected SLOPE:INTERCEPT, e.g. 4:0.25")
        try:
            points.append(parse_params(item))
        except (ValueError, PolicyError) as exc:
            raise argparse.ArgumentTypeError(f"grid point {item!r}: {exc}") from None
    return points


def parse_shapes(text: str) -> list[dict[str, object]]:
    """'linear,power=0.5,step=0.2' -> MltcpParams keyword arguments per shape."""
    try:
        return [parse_shape(item) for item in text.split(",")]
    except PolicyError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def with_shapes(grid: list[MltcpParams], shapes: list[dict[str, object]] | None) -> list[MltcpParams]:
    """The shape axis: every linear grid point once per shape (in grid order, then shape order); points
    that name a shape of their own stay as they are."""
    if not shapes:
        return list(grid)
    points: list[MltcpParams] = []
    for p in grid:
        variants = [p] if not p.linear else [replace(p, **shape) for shape in shapes]  # type: ignore[arg-type]
        points += [v for v in variants if v not in points]
    return points


def label(params: MltcpParams | None) -> str:
    return "off" if params is None else format_params(params)


def sweep_table(rows: list[SweepRow], ideal_avg: float, ideal_p99: float | None = None) -> str:
    """The rounds table of the points, with each point's range of F."""
    table = rounds_table(rows, ideal_avg, ideal_p99=ideal_p99).splitlines()
    f_ranges = ["F", "-"] + [
        "-"
        if r.params is None
        else "online"
        if r.tune
        else f"{r.params.intercept:g}..{r.params.slope + r.params.intercept:g}"
        for r in rows
    ]
    width = max(len(f) for f in f_ranges)
    return "\n".join(f"{f.ljust(width)}  {line}" for f, line in zip(f_ranges, table, strict=True))


def plot_sweep(path: Path, rows: list[SweepRow], ideal_avg: float, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    base = rows[0]
    points = rows[1:]
    fig, ax = plt.subplots(figsize=(max(5, 1.1 * len(points)), 3.5))
    for i, row in enumerate(points):
        gains = [100 * g for g in row.gains(base.avg, ideal_avg)]
        ax.bar(i, statistics.fmean(gains), color="tab:blue")
        ax.plot([i] * len(gains), gains, "k.", markersize=5)  # each round
    ax.set_xticks(range(len(points)), [r.label for r in points], rotation=20, ha="right", fontsize=8)
    ax.axhline(90, color="tab:red", linestyle="--", linewidth=1, label="target 90 % (issue 14)")
    ax.set_xlabel("F (slope:intercept[:shape])")
    ax.set_ylabel("share of ideal gain (%)")
    ax.set_title(textwrap.fill(title, 70), fontsize=9)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_sweep(
    mix_name: str,
    cc: str,
    grid: list[MltcpParams],
    iterations: int,
    plane: dataplanes.Dataplane,
    out: Path,
    repeat: int = 1,
    tune_from: MltcpParams | None = None,
) -> str:
    mix = MIXES[mix_name]
    topo = mix.build_topology()
    run_dir = out / mix.name
    base_treatment = Treatment("baseline", cc)
    with network_with_control(topo, stack_config(mix, base_treatment, iterations), run_dir / "run", plane) as ctl:
        solo_t, solo_comm, solo_push, acks = run_solo(ctl, topo, mix, iterations)
        ideal = ideal_iteration_times(solo_t, solo_comm, solo_push, acks)
        ideal_avg = sum(ideal.values()) / len(ideal)
        rows = [sweep_row(params, cc) for params in [None, *grid]]
        if tune_from is not None:
            rows.append(sweep_row(tune_from, cc, tune=True))
        runs = len(rows) * repeat
        for rnd in range(repeat):
            for i, row in enumerate(rows):
                name = row.label
                say(f"-- {mix.name} / {cc} MLTCP {name}, round {rnd + 1}/{repeat} ({rnd * len(rows) + i + 1}/{runs})")
                treatment = row.treatment
                cfg = stack_config(mix, treatment, iterations, mltcp_params=row.params)
                suffix = "" if repeat == 1 else f"-r{rnd + 1}"
                stem = run_dir / f"{cc}-{name.replace(':', '_').replace('@', '-').replace('=', '')}{suffix}"
                title = f"{mix.name} / {cc} MLTCP {name} on {plane.label}: communication phases"
                result = run_treatment(ctl, topo, cfg, treatment, stem, title)
                if result.run.errors:
                    raise RuntimeError(f"run {name} failed: {'; '.join(result.run.errors)}")
                row.results.append(result)
            say(sweep_table(rows, ideal_avg, max(ideal.values())))
    title = f"MLTCP sweep: {mix.name}, {cc}, {plane.label}, {iterations} iterations x {repeat}"
    plot_sweep(run_dir / "sweep.png", rows, ideal_avg, title)
    text = "\n".join(
        [
            f"## {title}",
            "",
            f"dataplane: {dataplanes.describe(plane)}; {ctl.probe.describe()}",
            "",
            f"{mix.description}; alone: "
            + ", ".join(f"job {j} {solo_t[j]:.3f} s (a = {solo_comm[j] / solo_t[j]:.2f})" for j in sorted(solo_t)),
            "",
            "```",
            sweep_table(rows, ideal_avg, max(ideal.values())),
            "```",
            "",
        ]
    )
    (run_dir / "sweep.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    interrupt_on_sigterm()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mix", default="two-compatible", choices=sorted(MIXES))
    ap.add_argument("--cc", default="reno", choices=ALGORITHMS)
    ap.add_argument(
        "--grid",
        type=parse_grid,
        default=[MltcpParams(s, i) for s, i in DEFAULT_GRID],
        help=f"SLOPE:INTERCEPT points, comma-separated (default: {','.join(f'{s:g}:{i:g}' for s, i in DEFAULT_GRID)})",
    )
    ap.add_argument(
        "--shape",
        type=parse_shapes,
        default=None,
        help="F's shapes to cross with the grid's linear points, comma-separated: linear, power=E, step=K, "
        "sigmoid=K (default: the grid as given)",
    )
    ap.add_argument(
        "--tune",
        nargs="?",
        const="default",  # the controller's default F (default_params), resolved once --cc is known
        type=lambda text: parse_grid(text)[0],
        metavar="SLOPE:INTERCEPT",
        help="add a row with F tuned online by every sender, starting from this point (default: the controller's)",
    )
    ap.add_argument("--iterations", type=int, default=12)
    ap.add_argument("--repeat", type=int, default=1, help="rounds over the grid (default 1)")
    ap.add_argument("--dataplane", default="auto", choices=("auto", "bmv2", "ref"))
    ap.add_argument("--out", type=Path, default=Path("results/sweep"))
    args = ap.parse_args(argv)
    if args.iterations < 3:
        ap.error("--iterations must be >= 3 (the first iteration is warm-up)")
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")
    if args.tune == "default":
        args.tune = default_params(args.cc)
    if os.geteuid() != 0:
        print("make sweep needs root (Mininet)", file=sys.stderr)
        return 2
    try:
        (plane,) = dataplanes.select(args.dataplane)
    except dataplanes.DataplaneMissing as exc:
        print(f"cannot run: {exc}", file=sys.stderr)
        return 2
    preexisting = set(leftovers())
    say(f"dataplane: {dataplanes.describe(plane)}")
    try:
        grid = with_shapes(args.grid, args.shape)
        text = run_sweep(args.mix, args.cc, grid, args.iterations, plane, args.out, args.repeat, args.tune)
    except (BottleneckNotCarried, StackError) as exc:
        print(f"make sweep stopped: {exc}", file=sys.stderr)
        return 2
    left = sorted(set(leftovers()) - preexisting)
    if left:
        print("left behind: " + "; ".join(left), file=sys.stderr)
        return 1
    print(text)
    print(f"written: {args.out}/{args.mix}/sweep.md, sweep.png and a CSV/PNG per point")
    return 0


if __name__ == "__main__":
    sys.exit(main())
