"""MLTCP's shift equation against a run: the offset between two jobs' pushes, iteration by iteration,
as measured and as the model (mlfc.policy.mltcp.shift) predicts from the measured first offset.

    python -m mlfc.lab.mltcp.shift RUN.csv --slope 2 --intercept 0.5 [--jobs 1,2] [--out shift.png]

The offset of iteration i is D_i = (start of job b's push - start of job a's push) mod T, folded to
[0, T/2]; T is the jobs' mean iteration time over the run and a their push fraction once interleaved
(the median push time over the last half of the run, divided by T). Prints both series as a table and
plots them with the interleaved offset aT.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from mlfc.lab.results import IterationRecord, format_table, read_csv
from mlfc.policy.mltcp import MltcpParams, shift


@dataclass(frozen=True)
class ShiftSeries:
    period: float
    push_fraction: float
    iterations: list[int]
    measured: list[float]  # offsets in seconds
    model: list[float]


def _push_starts(records: list[IterationRecord], job: int) -> dict[int, float]:
    starts: dict[int, float] = {}
    for r in records:
        if r.job == job:
            starts[r.iteration] = min(starts.get(r.iteration, r.comm_start), r.comm_start)
    return starts


def shift_series(records: list[IterationRecord], params: MltcpParams, jobs: tuple[int, int] = (1, 2)) -> ShiftSeries:
    a, b = jobs
    mine = [r for r in records if r.job in jobs]
    if not mine:
        raise ValueError(f"no records of jobs {a} and {b}")
    period = statistics.fmean(r.duration for r in mine if r.iteration > 0)
    late = [r for r in mine if r.push_end is not None and r.iteration >= max(r.iteration for r in mine) // 2]
    pushes = [r.push_end - r.comm_start for r in late if r.push_end is not None]
    fraction = statistics.median(pushes) / period if pushes else float("nan")
    sa, sb = _push_starts(mine, a), _push_starts(mine, b)
    its = sorted(set(sa) & set(sb) - {0})
    measured = []
    for i in its:
        d = (sb[i] - sa[i]) % period
        measured.append(min(d, period - d))
    model = [measured[0]] if measured else []
    for _ in its[1:]:
        model.append(model[-1] + shift(model[-1], period, fraction, params))
    return ShiftSeries(period, fraction, its, measured, model)


def plot_shift(path: Path, s: ShiftSeries, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6))
    ax.plot(s.iterations, [d / s.period for d in s.measured], "o-", label="measured offset")
    ax.plot(s.iterations, [d / s.period for d in s.model], "s--", label="shift equation from the first offset")
    ax.axhline(s.push_fraction, color="tab:green", linewidth=1, label=f"interleaved: a = {s.push_fraction:.2f}")
    ax.set_xlabel("iteration")
    ax.set_ylabel("offset / iteration time")
    ax.set_ylim(0, 0.55)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", type=Path)
    ap.add_argument("--slope", type=float, default=MltcpParams().slope)
    ap.add_argument("--intercept", type=float, default=MltcpParams().intercept)
    ap.add_argument("--jobs", default="1,2")
    ap.add_argument("--out", type=Path, default=None, help="PNG (default: next to the CSV)")
    args = ap.parse_args(argv)
    a, b = (int(x) for x in args.jobs.split(","))
    s = shift_series(read_csv(args.csv), MltcpParams(args.slope, args.intercept), (a, b))
    rows = [[i, m / s.period, p / s.period] for i, m, p in zip(s.iterations, s.measured, s.model, strict=True)]
    print(f"T = {s.period:.3f} s, a = {s.push_fraction:.3f}; offsets as a share of T")
    print(format_table(["iteration", "measured", "model"], rows))
    out = args.out or args.csv.with_name(args.csv.stem + "-shift.png")
    plot_shift(out, s, f"{args.csv.stem}: MLTCP shift, model vs measurement (S={args.slope:g}, I={args.intercept:g})")
    print(f"written: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
