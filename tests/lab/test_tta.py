"""Time-to-accuracy analysis of the real-training experiments: exact numbers on hand-made records."""

from __future__ import annotations

import argparse
import math

import pytest

from mlfc.lab.decisions import DecisionSample, describe, top_changes
from mlfc.lab.hpsearch.search import Config, assignment, parse_grid
from mlfc.lab.realjobs import same_curve, start_spread
from mlfc.lab.results import IterationRecord
from mlfc.lab.tta import (
    AccuracyPoint,
    a_star,
    accuracy_points,
    best_so_far,
    final_accuracy,
    iterations_to_accuracy,
    job_time_to_accuracy,
    reached_for,
    reduction,
    search_start,
    time_to_accuracy,
)


def rec(job: int, it: int, start: float, end: float, acc: float | None = None, worker: str = "w0") -> IterationRecord:
    return IterationRecord("s", job, worker, it, start, start, end, end, 100, accuracy=acc)


RECORDS = [
    rec(1, 0, 10.0, 11.0),
    rec(1, 0, 10.2, 11.0, worker="w1"),
    rec(1, 1, 11.0, 12.0, 0.50),
    rec(1, 3, 13.0, 14.0, 0.88),
    rec(2, 0, 10.5, 11.5),
    rec(2, 1, 11.5, 13.0, 0.70),
    rec(2, 3, 14.0, 15.5, 0.93),
    rec(2, 5, 16.0, 17.0, 0.91),
]


def test_points_start_and_finals():
    pts = accuracy_points(RECORDS)
    assert [(p.time, p.iteration, p.accuracy) for p in pts[1]] == [(12.0, 1, 0.50), (14.0, 3, 0.88)]
    assert search_start(RECORDS) == 10.0
    assert final_accuracy(pts[2]) == 0.91  # the last iteration's, not the best
    assert math.isnan(final_accuracy([]))
    assert start_spread(RECORDS) == 0.5  # job 1 began at 10.0, job 2 at 10.5
    with pytest.raises(ValueError, match="iteration 0"):
        search_start([rec(1, 1, 1.0, 2.0)])


def test_time_to_accuracy_is_the_first_time_any_job_reaches_the_target():
    pts = accuracy_points(RECORDS)
    start = search_start(RECORDS)
    assert time_to_accuracy(pts, 0.85, start) == 4.0  # job 1 at 14.0
    assert time_to_accuracy(pts, 0.90, start) == 5.5  # job 2 at 15.5
    assert time_to_accuracy(pts, 0.70, start) == 3.0  # job 2's 0.70 at 13.0
    assert math.isnan(time_to_accuracy(pts, 0.95, start))
    assert job_time_to_accuracy(pts[1], 0.85, start) == 4.0
    assert math.isnan(job_time_to_accuracy(pts[1], 0.90, start))
    assert iterations_to_accuracy(pts[2], 0.9) == 3
    assert iterations_to_accuracy(pts[1], 0.9) is None


def test_a_star_best_so_far_and_reduction():
    assert a_star({"a": 0.9, "b": 0.95, "c": math.nan}) == 0.95
    with pytest.raises(ValueError):
        a_star({"a": math.nan})
    pts = accuracy_points(RECORDS)
    assert best_so_far(pts, 10.0) == [(2.0, 0.50), (3.0, 0.70), (4.0, 0.88), (5.5, 0.93)]
    assert reduction(100.0, 55.0) == pytest.approx(0.45)
    assert reduction(100.0, 120.0) == pytest.approx(-0.2)
    assert math.isnan(reduction(math.nan, 1.0)) and math.isnan(reduction(10.0, math.nan))


def test_same_curve_compares_common_iterations_exactly():
    a = [AccuracyPoint(1.0, 1, 0.5), AccuracyPoint(2.0, 3, 0.8)]
    b = [AccuracyPoint(5.0, 1, 0.5), AccuracyPoint(9.0, 3, 0.8), AccuracyPoint(9.5, 5, 0.9)]
    assert same_curve(a, b)  # different times, same accuracy per iteration
    assert not same_curve(a, [AccuracyPoint(5.0, 1, 0.5), AccuracyPoint(9.0, 3, 0.81)])
    assert not same_curve(a, [])


def test_grid_and_assignment():
    assert parse_grid("8:0.05,16:0.1") == [Config(8, 0.05), Config(16, 0.1)]
    assert Config(16, 0.1).name == "w16 lr0.1"
    for bad in ("8", "x:0.1", "8:0", "8:0.1,8:0.1"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_grid(bad)
    shuffled = assignment(6, 1)
    assert sorted(shuffled) == list(range(6)) and shuffled == assignment(6, 1)  # reproducible permutation
    assert shuffled != assignment(6, 0)  # each round its own (tests/lab/test_hpsearch.py: more)


def s(t: float, d: int, job: int, rank: int, prio: int, model: str = "prior", q: float = 0.0, it: int = 0):
    return DecisionSample(t, d, job, rank, prio, 0.1, 0.01, model, 4, it, q)


def test_decision_timeline_lists_changes_of_order_only():
    samples = [
        s(100.0, 1, 1, 1, 6), s(100.0, 1, 2, 2, 5),
        s(101.0, 2, 1, 1, 6, "exp", 0.3, 4), s(101.0, 2, 2, 2, 5),  # same order: not a change
        s(103.0, 3, 2, 1, 6, "power", 0.5, 6), s(103.0, 3, 1, 2, 5, "exp", 0.4, 6),
    ]  # fmt: skip
    changes = top_changes(samples, 100.0)
    assert changes == [(0.0, 1, [1, 2]), (3.0, 3, [2, 1])]
    lines = describe(samples, 100.0, {1: "w8 lr0.1", 2: "w16 lr0.1"})
    assert len(lines) == 2
    assert lines[1] == "    3.0 s (decision 3): job 2 (w16 lr0.1) c6 power 50%@6 > job 1 (w8 lr0.1) c5 exp 40%@6"


def test_a_spike_does_not_cross_the_target_with_smoothing() -> None:
    from mlfc.lab.tta import AccuracyPoint, smoothed, time_to_accuracy

    spike = [AccuracyPoint(t, i, a) for i, (t, a) in enumerate([(1, 0.3), (2, 0.75), (3, 0.5), (4, 0.55)])]
    steady = [AccuracyPoint(t, i, a) for i, (t, a) in enumerate([(1, 0.5), (2, 0.7), (3, 0.72), (4, 0.74)])]
    assert time_to_accuracy({1: spike}, 0.7, 0.0) == 2  # unsmoothed: the spike counts
    assert math.isnan(time_to_accuracy({1: spike}, 0.7, 0.0, window=3))
    assert time_to_accuracy({1: spike, 2: steady}, 0.7, 0.0, window=3) == 4  # (0.7 + 0.72 + 0.74) / 3 at t=4
    assert [p.accuracy for p in smoothed(steady, 2)] == pytest.approx([0.5, 0.6, 0.71, 0.73])
    with pytest.raises(ValueError, match="window"):
        smoothed(steady, 0)


def test_reached_for_waits_its_grace_after_the_smoothed_crossing():
    now = [0.0]
    until = reached_for(0.85, window=3, grace_s=15.0, clock=lambda: now[0])
    assert not until([])  # nothing has started
    assert not until(RECORDS[:4])  # job 1's mean of 3 evaluations: not yet
    seen = [*RECORDS, rec(1, 5, 15.0, 16.0, 0.90)]  # job 2: (0.70 + 0.93 + 0.91) / 3 = 0.847; job 1: 0.76
    assert not until(seen)
    crossed = [*seen, rec(2, 7, 18.0, 19.0, 0.95)]  # job 2: (0.93 + 0.91 + 0.95) / 3 = 0.93
    assert not until(crossed)  # the crossing is seen now: the grace starts
    now[0] = 14.9
    assert not until(crossed)
    now[0] = 15.0
    assert until(crossed)
    assert time_to_accuracy(accuracy_points(crossed), 0.85, search_start(crossed), 3) == pytest.approx(9.0)
