"""Scaling curves for the benchmarks: how a cost grows with a size, where the first limit is, and the
tables (markdown + CSV) and plots (PNG) that show it. Pure helpers, no measurement here.

A curve is a list of (size, value) points. For a cost (seconds, bytes) the growth class comes from the
log-log slope: cost ~ size^k. For a rate (entries/s, reports/s) the question is where adding size stops
adding rate: ``saturation`` finds the first size whose step gains less than a given fraction.
"""

from __future__ import annotations

import csv
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# Slope bands for cost ~ size^k. Measured points carry noise, so "linear" is a band, not k == 1.
FLAT_BELOW = 0.2
SUBLINEAR_BELOW = 0.85
LINEAR_UP_TO = 1.2
SUPERLINEAR_UP_TO = 1.7


def slope(points: Sequence[tuple[float, float]]) -> float:
    """Least-squares slope of log(value) against log(size): k in value ~ size^k."""
    pts = [(x, y) for x, y in points if x > 0 and y > 0]
    if len(pts) < 2:
        raise ValueError(f"a growth slope needs two points with positive size and value, got {list(points)}")
    lx = [math.log(x) for x, _ in pts]
    ly = [math.log(y) for _, y in pts]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    sxx = sum((a - mx) ** 2 for a in lx)
    if sxx == 0:
        raise ValueError("a growth slope needs at least two different sizes")
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True)) / sxx


def growth_class(k: float) -> str:
    """The name of the growth of cost ~ size^k."""
    if k < FLAT_BELOW:
        return "flat"
    if k < SUBLINEAR_BELOW:
        return "sublinear"
    if k <= LINEAR_UP_TO:
        return "linear"
    if k <= SUPERLINEAR_UP_TO:
        return "worse than linear"
    return "quadratic or worse"


MIN_STEP = 1.5  # neighbouring sizes closer than this factor say more about noise than about growth


def spaced(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points sorted by size, keeping one point per step of at least ``MIN_STEP`` in size."""
    out: list[tuple[float, float]] = []
    for x, y in sorted((x, y) for x, y in points if x > 0 and y > 0):
        if not out or x >= out[-1][0] * MIN_STEP:
            out.append((x, y))
    return out


def local_slopes(points: Sequence[tuple[float, float]]) -> list[float]:
    """The slope between each pair of neighbouring (``spaced``) points."""
    return [slope([a, b]) for a, b in itertools.pairwise(spaced(points))]


def growth(points: Sequence[tuple[float, float]]) -> str:
    """A sentence: the overall class and slope, and the step where growth gets worse than linear, if any."""
    k = slope(points)
    text = f"{growth_class(k)} (cost ~ size^{k:.2f})"
    pts = spaced(points)
    steps = local_slopes(points)
    for i, s in enumerate(steps):
        if s > LINEAR_UP_TO:
            if i > 0:  # linear or better before it: say where it turns
                text += f"; worse than linear from {pts[i][0]:g} up (local slope {s:.2f})"
            break
    return text


def saturation(points: Sequence[tuple[float, float]], min_gain: float = 0.1) -> float | None:
    """For a rate against a size: the first size at which the rate rose by less than ``min_gain`` (a fraction
    of the previous rate) over the previous point, i.e. where adding size stopped paying; None if it kept
    paying up to the largest size measured."""
    pts = sorted(points)
    for (_, y0), (x1, y1) in itertools.pairwise(pts):
        if y1 < y0 * (1 + min_gain):
            return x1
    return None


@dataclass(frozen=True, slots=True)
class Curve:
    """One measured curve: ``cost`` says whether the values are a cost (growth class) or a rate (saturation)."""

    name: str
    size_label: str
    value_label: str
    points: tuple[tuple[float, float], ...]
    cost: bool = True

    def verdict(self) -> str:
        if len(self.points) < 2:
            return "one point only: no growth to state"
        if self.cost:
            return growth(self.points)
        k = slope(self.points)
        at = saturation(self.points)
        rate = f"rate ~ size^{k:.2f}"
        if at is None:
            return f"{rate}; still rising at the largest size measured"
        return f"{rate}; stops rising (< 10 % gain) at {self.size_label} = {at:g}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def _cell(value: object) -> str:
    if isinstance(value, float):
        if value != value:  # nan
            return "-"
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def write_csv(path: Path, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def plot_curves(path: Path, curves: Sequence[Curve], title: str) -> None:
    """One log-log panel per curve, a dashed linear reference through the first point of each cost curve."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    curves = [c for c in curves if c.points]
    if not curves:
        return
    cols = min(3, len(curves))
    rows = math.ceil(len(curves) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    for ax, c in zip(axes.flat, curves, strict=False):
        xs, ys = zip(*sorted(c.points), strict=True)
        ax.plot(xs, ys, "o-", color="tab:blue", label="measured")
        if c.cost and xs[0] > 0:
            ax.plot(xs, [ys[0] * x / xs[0] for x in xs], "--", color="grey", label="linear from first point")
            ax.legend(fontsize=7)
        ax.set_xscale("log")
        if c.cost:
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)  # a rate: how far from zero matters more than its ratios
        ax.set_xticks(xs, [f"{x:g}" for x in xs])  # the measured sizes, not powers of ten
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_xlabel(c.size_label)
        ax.set_ylabel(c.value_label)
        ax.set_title(c.name, fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
    for ax in list(axes.flat)[len(curves) :]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def verdicts_table(curves: Sequence[Curve]) -> str:
    return markdown_table(["curve", "growth", "points"], [(c.name, c.verdict(), len(c.points)) for c in curves])
