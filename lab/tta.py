"""Time to accuracy: what the real-training experiments measure (hyper-parameter search, approximate flow
control), from the lab's per-iteration records.

* ``accuracy_points``: each job's validation accuracy over time. A point's time is the record's ``end``
  (the iteration's pull done); the evaluation itself runs right after it (tens of ms, the same in every
  treatment), so the accuracy is known a little later than this time says.
* ``a_star``: the converged accuracy A*, the best final validation accuracy among runs trained alone.
* ``time_to_accuracy``: seconds from the start until the best accuracy among the jobs first reaches a
  target (e.g. 0.95 A*); NaN when it never does. The start is the common start of iteration 0
  (``search_start``), not the moment processes were launched.
* ``best_so_far``: the running best accuracy among all jobs, a step curve for the plots.
* ``reached_for``: a run's stop condition once the target is reached (what comes after cannot change it).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from mlfc.lab.results import IterationRecord

# A target counts as reached when the mean of a job's last 3 evaluations reaches it (``smoothed``): one
# hpsearch run crossed 0.95 A* on a spike (0.75, ending at 0.549), which is not a search reaching its target.
SMOOTH_WINDOW = 3


@dataclass(frozen=True)
class AccuracyPoint:
    time: float  # seconds, the records' clock
    iteration: int
    accuracy: float


def accuracy_points(records: Iterable[IterationRecord]) -> dict[int, list[AccuracyPoint]]:
    """job -> its accuracy points in time order (the evaluating worker's records carry them)."""
    out: dict[int, list[AccuracyPoint]] = {}
    for r in records:
        if r.accuracy is not None and math.isfinite(r.accuracy):
            out.setdefault(r.job, []).append(AccuracyPoint(r.end, r.iteration, r.accuracy))
    for pts in out.values():
        pts.sort(key=lambda p: (p.time, p.iteration))
    return out


def search_start(records: Iterable[IterationRecord]) -> float:
    """When the first job began its first iteration (all jobs are told to start together)."""
    starts = [r.start for r in records if r.iteration == 0]
    if not starts:
        raise ValueError("no iteration 0 in the records: cannot tell when the run started")
    return min(starts)


def final_accuracy(points: Sequence[AccuracyPoint]) -> float:
    """The accuracy after the job's last evaluated iteration; NaN without points."""
    return max(points, key=lambda p: p.iteration).accuracy if points else math.nan


def final_mean(points: Sequence[AccuracyPoint], last: int = 5) -> float:
    """The mean accuracy of the job's last ``last`` evaluations (one noisy final point does not decide a
    comparison); NaN without points."""
    if last < 1:
        raise ValueError(f"last={last} must be >= 1")
    tail = sorted(points, key=lambda p: p.iteration)[-last:]
    return sum(p.accuracy for p in tail) / len(tail) if tail else math.nan


def a_star(finals: Mapping[object, float]) -> float:
    """A*: the best final accuracy among configurations trained alone (NaN values ignored)."""
    vals = [v for v in finals.values() if math.isfinite(v)]
    if not vals:
        raise ValueError("no final accuracy to take A* from")
    return max(vals)


def smoothed(points: Sequence[AccuracyPoint], window: int) -> list[AccuracyPoint]:
    """Each evaluation's accuracy replaced by the mean of the last ``window`` evaluations up to it (fewer
    at the start): a target is then crossed by a curve that stays there, not by one spike, and the
    crossing is known at the time of the last evaluation it uses (no look-ahead)."""
    if window < 1:
        raise ValueError(f"window={window} must be >= 1")
    ordered = sorted(points, key=lambda p: p.iteration)
    out = []
    for i, p in enumerate(ordered):
        last = ordered[max(0, i - window + 1) : i + 1]
        out.append(AccuracyPoint(p.time, p.iteration, sum(q.accuracy for q in last) / len(last)))
    return out


def time_to_accuracy(
    points: Mapping[int, Sequence[AccuracyPoint]], target: float, start: float, window: int = 1
) -> float:
    """Seconds after ``start`` at which any job's accuracy (its mean over the last ``window`` evaluations)
    first reached ``target``; NaN if none did. (The best accuracy among the jobs first reaches the target
    exactly when some job's does.)"""
    hits = [p.time for pts in points.values() for p in smoothed(pts, window) if p.accuracy >= target]
    return min(hits) - start if hits else math.nan


def job_time_to_accuracy(points: Sequence[AccuracyPoint], target: float, start: float, window: int = 1) -> float:
    """``time_to_accuracy`` of one job."""
    return time_to_accuracy({0: points}, target, start, window)


def iterations_to_accuracy(points: Sequence[AccuracyPoint], target: float) -> int | None:
    """The first evaluated iteration at which the job reached ``target`` (None: never)."""
    its = [p.iteration for p in points if p.accuracy >= target]
    return min(its) if its else None


def best_so_far(points: Mapping[int, Sequence[AccuracyPoint]], start: float = 0.0) -> list[tuple[float, float]]:
    """The running best accuracy among all jobs: (seconds after ``start``, best) at every improvement."""
    merged = sorted((p.time - start, p.accuracy) for pts in points.values() for p in pts)
    out: list[tuple[float, float]] = []
    best = -math.inf
    for t, acc in merged:
        if acc > best:
            best = acc
            out.append((t, acc))
    return out


def reduction(base: float, value: float) -> float:
    """How much less time ``value`` took than ``base``, as a fraction (0.45 = 45 % less); NaN if unknown."""
    if not (math.isfinite(base) and math.isfinite(value)) or base <= 0:
        return math.nan
    return 1.0 - value / base


def plot_accuracy(
    path,
    curves: Mapping[str, Mapping[int, Sequence[AccuracyPoint]]] | Mapping[int, Sequence[AccuracyPoint]],
    title: str,
    start: float | Mapping[str, float] = 0.0,
    targets: Mapping[str, float] | None = None,
    labels: Mapping[int, str] | None = None,
) -> None:
    """Accuracy vs time: a line per job (``curves`` job -> points), or per series (``curves`` name -> job ->
    points, each series' jobs merged into its running best). ``targets``: horizontal lines (name -> accuracy)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5))
    colours = plt.get_cmap("tab10")
    series = all(isinstance(k, str) for k in curves)
    if series:
        for i, (name, pts) in enumerate(curves.items()):
            t0 = start[name] if isinstance(start, Mapping) else start
            best = best_so_far(pts, t0)  # type: ignore[arg-type]
            if best:
                xs, ys = zip(*best, strict=True)
                ax.step(xs, ys, where="post", color=colours(i % 10), label=name, linewidth=1.8)
    else:
        t0 = start if isinstance(start, float | int) else 0.0
        for job, pts in sorted(curves.items()):  # type: ignore[union-attr]
            if not pts:
                continue
            xs = [p.time - t0 for p in pts]  # type: ignore[union-attr]
            ys = [p.accuracy for p in pts]  # type: ignore[union-attr]
            label = (labels or {}).get(job, f"job {job}")  # type: ignore[arg-type]
            ax.plot(xs, ys, color=colours((int(job) - 1) % 10), label=label, linewidth=1.4, marker=".", markersize=3)
    for name, acc in (targets or {}).items():
        ax.axhline(acc, color="grey", linestyle="--", linewidth=0.8)
        ax.annotate(name, (0, acc), xytext=(2, 2), textcoords="offset points", fontsize="small", color="grey")
    ax.set_xlabel("time since the start (s)")
    ax.set_ylabel("validation accuracy" if not series else "best validation accuracy so far")
    ax.set_ylim(0, 1)
    ax.set_title(title, fontsize="medium")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def reached_for(
    target: float, window: int, grace_s: float = 15.0, clock: Callable[[], float] = time.monotonic
) -> Callable[[Sequence[IterationRecord]], bool]:
    """A run's stop condition: true ``grace_s`` after the records first show some job's smoothed accuracy at
    ``target``. The grace lets another job's earlier crossing, not yet read from its output, arrive; the
    times to accuracy come from the records, so what happens after the crossing cannot change them."""
    seen: list[float] = []

    def until(records: Sequence[IterationRecord]) -> bool:
        if not seen:
            if not any(r.iteration == 0 for r in records):
                return False
            if math.isnan(time_to_accuracy(accuracy_points(records), target, search_start(records), window)):
                return False
            seen.append(clock())
        return clock() - seen[0] >= grace_s

    return until
