"""The study experiment's figures from its trials' histories and its published rows (docs/data/search).

* ``study_time_to_accuracy``: seconds from the study's start until its best smoothed accuracy (any trial's
  mean of its last 3 evaluations, lab/tta.py) first reaches each fraction of A*; pruned trials count with
  what they reported before they were stopped.
* ``best_over_time``: the study's best smoothed accuracy so far, a step curve (the figure's and the rows').
* ``same_params``: how many trials (by number) proposed the same parameters as in another study (the same
  round's FIFO): with trials finishing in another order the sampler's later proposals can differ.
* ``make_row``: one row of docs/data/search/summary.json; ``check_row`` what the table relies on.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from mlfc.lab.hpsearch.rows import PUBLISHED, check_fields, published_number, time_fields
from mlfc.lab.search.study import TrialHistory
from mlfc.lab.tta import AccuracyPoint, best_so_far, smoothed, time_to_accuracy

FRACTIONS = (0.90, 0.95)
KEY = ("task", "dataplane", "sampler", "pruner", "trials", "concurrency", "treatment")
SCHEMA = (
    "issue 47 item 1: one row per task, dataplane, sampler, pruner, trials, concurrency and treatment; per round "
    "time_to_090/095 (s from the study's first iteration until its best smoothed accuracy reached 0.90/0.95 A*), "
    "less_than_fifo_095 (fraction, against the same round's FIFO study), best_value (Optuna's best), pruned "
    "(trials the pruner stopped), same_params_as_fifo (trials proposed as in that FIFO study), best_over_time "
    "([[s, accuracy], ...] at every rise of the best smoothed accuracy)"
)
FIELDS: dict[str, type | tuple[type, ...]] = {
    "task": str,
    "sampler": str,
    "pruner": str,
    "trials": int,
    "concurrency": int,
    "treatment": str,
    "rounds": int,
    "time_to_090": list,
    "time_to_095": list,
    "less_than_fifo_095": list,
    "best_value": list,
    "pruned": list,
    "dataplane": str,
    "command": str,
}
PER_ROUND = ("time_to_090", "time_to_095", "less_than_fifo_095", "best_value", "pruned")


def smoothed_points(trials: Sequence[TrialHistory], window: int) -> dict[int, list[AccuracyPoint]]:
    """job -> the trial's evaluations, each the mean of its last ``window`` (the study's targets are crossed
    by these)."""
    return {t.job: smoothed(t.points, window) for t in trials if t.points}


def study_time_to_accuracy(
    trials: Sequence[TrialHistory], targets: Mapping[float, float], start: float, window: int
) -> dict[float, float]:
    """fraction of A* -> seconds after ``start`` at which some trial's smoothed accuracy first reached it (NaN:
    never)."""
    pts = {t.job: t.points for t in trials if t.points}
    return {f: time_to_accuracy(pts, target, start, window) for f, target in targets.items()}


def best_over_time(trials: Sequence[TrialHistory], start: float, window: int) -> list[tuple[float, float]]:
    """(seconds after ``start``, the best smoothed accuracy so far) at every rise."""
    return best_so_far(smoothed_points(trials, window), start)


def same_params(mine: Sequence[TrialHistory], other: Sequence[TrialHistory]) -> int:
    """Trials of ``mine`` whose parameters equal those of ``other``'s trial of the same number."""
    theirs = {t.number: t.params for t in other}
    return sum(theirs.get(t.number) == t.params for t in mine)


def curve_for_json(curve: Sequence[tuple[float, float]]) -> list[list[float]]:
    return [[round(t, 2), round(a, 4)] for t, a in curve]


def make_row(
    *,
    task: str,
    dataplane: str,
    sampler: str,
    pruner: str,
    trials: int,
    concurrency: int,
    treatment: str,
    tta: Mapping[int, Mapping[float, float]],
    fifo: Mapping[int, Mapping[float, float]],
    best_value: Mapping[int, float],
    pruned: Mapping[int, int],
    command: str,
    **extra: Any,
) -> dict[str, Any]:
    """One summary.json row: ``tta`` round -> fraction of A* -> seconds (this treatment), ``fifo`` the same of
    the same rounds' FIFO studies; ``best_value`` and ``pruned`` per round. NaN is written as null."""
    rounds = sorted(tta)
    row = {
        "task": task,
        "dataplane": dataplane,
        "sampler": sampler,
        "pruner": pruner,
        "trials": trials,
        "concurrency": concurrency,
        "treatment": PUBLISHED.get(treatment, treatment),
        **time_fields(tta, fifo),
        "best_value": [published_number(best_value.get(r, math.nan)) for r in rounds],
        "pruned": [pruned[r] for r in rounds],
        "command": command,
    }
    row.update(extra)
    check_row(row)
    return row


def check_row(row: Mapping[str, Any]) -> None:
    """Raise ValueError unless ``row`` has the schema's fields, of their types, a value per round."""
    check_fields("search", row, FIELDS, PER_ROUND)
    if row["rounds"] < 1 or row["trials"] < 1 or row["concurrency"] < 1:
        raise ValueError(f"search row: rounds, trials and concurrency must be >= 1: {row}")
    if not all(isinstance(n, int) and 0 <= n <= row["trials"] for n in row["pruned"]):
        raise ValueError(f"search row: pruned must be counts within 0..{row['trials']}: {row['pruned']!r}")
