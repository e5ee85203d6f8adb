"""lab/hpsearch/search.py's method (issue 26 items 3, 4, 6): the per-round shuffle, the plateau that A* comes from
and its cache, less time than the same round's FIFO, the top-class job's slowdown, the published row."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from mlfc.lab import astar
from mlfc.lab.decisions import DecisionSample
from mlfc.lab.hpsearch import rows as hrows
from mlfc.lab.hpsearch.cli import main
from mlfc.lab.hpsearch.search import GRIDS, Config, assignment, grid_for
from mlfc.lab.results import IterationRecord


def test_every_round_is_its_own_reproducible_permutation() -> None:
    orders = [assignment(12, r) for r in range(4)]
    for rnd, order in enumerate(orders):
        assert sorted(order) == list(range(12))
        assert order == assignment(12, rnd)  # the same in every treatment of the round, and on a re-run
    assert len({tuple(o) for o in orders}) == 4  # each round its own
    assert orders[0] != list(range(12))  # the first round is shuffled too


def test_the_default_grids_have_twelve_configurations_per_task() -> None:
    for task in ("digits", "synthetic"):
        grid = grid_for(task, None)
        assert len(grid) == len(set(grid)) == 12 and grid == grid_for(task, "default")
    assert grid_for("digits", None) == [Config(w, lr) for w, lr in GRIDS["digits"]]
    assert grid_for("digits", "8:0.05,16:0.1") == [Config(8, 0.05), Config(16, 0.1)]
    with pytest.raises(SystemExit):
        main(["--task", "mine:make_task"])  # no default grid: refused before anything runs


P = astar.Plateau(min_delta=0.002, patience=3, window=1, eval_every=1, max_iterations=100, min_iterations=0)


def test_the_plateau_is_patience_evaluations_without_a_real_rise() -> None:
    assert astar.plateau_at([0.1, 0.5, 0.8, 0.9, 0.95], P) is None  # still climbing
    assert astar.plateau_at([0.1, 0.5, 0.9, 0.901, 0.902, 0.9015], P) == 5  # rises of <= 0.002 do not count
    assert astar.plateau_at([0.1, 0.5, 0.9, 0.901, 0.91, 0.9, 0.9], P) is None  # 0.91 rose: patience restarts
    assert astar.plateau_at([0.1, 0.5, 0.9, 0.901, 0.91, 0.9, 0.9, 0.905], P) == 7
    slow = [0.09] * 6 + [0.3, 0.6]  # sits at chance, then learns: not a plateau before min_iterations
    assert astar.plateau_at(slow, P) == 3
    later = astar.Plateau(patience=3, window=1, eval_every=2, min_iterations=14, max_iterations=100)
    assert astar.plateau_at(slow, later) is None and astar.plateau_at(slow[:6], later) is None
    assert astar.plateau_at([0.09] * 8, later) == 6  # evaluation 6 comes after iteration 14
    smooth = astar.Plateau(patience=2, window=3, eval_every=1, max_iterations=100, min_iterations=0)
    assert astar.plateau_at([0.5, 0.9, 0.5, 0.9, 0.5, 0.9, 0.5], smooth) is not None  # a noisy level
    with pytest.raises(ValueError):
        astar.Plateau(patience=0)
    with pytest.raises(ValueError):
        astar.Plateau(min_iterations=10, max_iterations=5)


def test_the_reference_is_trained_once_then_taken_from_the_cache(tmp_path: Path) -> None:
    p = astar.Plateau(patience=2, eval_every=5, max_iterations=30, min_iterations=0)
    first = astar.reference(tmp_path, "digits", 4, 0.1, 0, 2, plateau=p)
    assert not first.cached and first.iterations[0] == 5 and len(first.iterations) == len(first.accuracies)
    assert first.a_star == max(astar.smooth(first.accuracies, 3))
    again = astar.reference(tmp_path, "digits", 4, 0.1, 0, 2, plateau=p)
    assert again.cached and again.accuracies == first.accuracies and again.path == first.path
    stored = json.loads(Path(first.path).read_text())
    assert stored["key"]["lr"] == 0.1 and "in process" in stored["method"]
    other = astar.reference(tmp_path, "digits", 4, 0.1, 0, 2, plateau=astar.Plateau(patience=3, eval_every=5,
                            max_iterations=30, min_iterations=0))  # fmt: skip
    assert not other.cached  # other settings: trained again, not the stale file
    described = again.describe()
    assert described["configuration"] == "4:0.1" and described["cached"] and described["cache_file"] == again.path


def test_reaching_a_target_on_the_smoothed_curve() -> None:
    key = astar.make_key("digits", 8, 0.05, 0, 2, None, P) | {"window": 2}
    ref = astar.Reference(key, [2, 4, 6, 8], [0.2, 0.9, 0.5, 0.7], True, 1.0)
    assert ref.a_star == pytest.approx(0.7)  # mean of 0.9 and 0.5: the spike alone is not A*
    assert ref.iteration_reaching(0.5) == 4 and ref.iteration_reaching(0.65) == 6
    assert ref.iteration_reaching(0.8) is None


def test_less_than_fifo_is_per_round_against_that_rounds_fifo() -> None:
    fifo = {0: 100.0, 1: 50.0, 2: 80.0}
    got = hrows.less_than_fifo(fifo, {2: 40.0, 0: 60.0, 1: math.nan})
    assert got[0] == pytest.approx(0.4) and math.isnan(got[1]) and got[2] == pytest.approx(0.5)
    assert math.isnan(hrows.less_than_fifo({}, {0: 10.0})[0])  # no FIFO run that round: no figure


def d(t: float, decision: int, job: int, rank: int) -> DecisionSample:
    return DecisionSample(t, decision, job, rank, 7 - rank, 0.0, 0.0, "prior", 0, 0, 0.0)


def r(job: int, it: int, start: float, dur: float) -> IterationRecord:
    return IterationRecord("s", job, "w0", it, start, start, start + dur, start + dur, 100)


def test_top_job_slowdown_is_over_the_iterations_it_held_the_top_class() -> None:
    t0 = 1000.0  # the samples' wall clock minus the records' clock
    samples = [d(1000.0, 1, 1, 1), d(1000.0, 1, 2, 2), d(1003.0, 2, 2, 1), d(1003.0, 2, 1, 2),
               d(1004.0, 3, 2, 1), d(1010.0, 4, 1, 1)]  # fmt: skip
    periods = hrows.top_periods(samples, t0)
    assert periods == [(1, 0.0, 3.0), (2, 3.0, 10.0), (1, 10.0, math.inf)]
    records = [r(1, i, float(i), 1.0) for i in range(12)] + [r(2, i, 2.0 * i, 2.0) for i in range(6)]
    records += [r(2, 1, 3.5, 4.0)]  # a slow iteration of job 2 while it was on top
    records += [r(2, 7, 9.0, 2.5)]  # began on top, ended after job 2 was demoted at 10: not on top
    job, slow = hrows.top_job_slowdown(records, periods, {1: 1.0, 2: 1.0})
    # job 2 held it 7 s (3..10), job 1 3 s + 2 s to the run's end at 12: job 2; iterations run within 3..10
    # other than iteration 0: starts 4, 6, 8 (2 s) and 3.5 (4 s); not the one from 9 to 11.5
    assert job == 2 and slow == pytest.approx((2 + 2 + 2 + 4) / 4)
    assert hrows.job_slowdown(records, 1, 0.5) == pytest.approx(2.0)  # iteration 0 left out, as alone
    none, ratio = hrows.top_job_slowdown(records, [], {1: 1.0})
    assert none is None and math.isnan(ratio)
    assert math.isnan(hrows.top_job_slowdown(records, periods, {})[1])  # no time alone: no ratio


def test_a_published_row_has_the_issue_26_schema() -> None:
    tta = {0: {0.90: 30.0, 0.95: 50.0}, 1: {0.90: 20.0, 0.95: math.nan}}
    fifo = {0: {0.90: 40.0, 0.95: 100.0}, 1: {0.90: 40.0, 0.95: 80.0}}
    cmd = "python -m mlfc.lab.hpsearch --publish"
    row = hrows.make_row(task="digits", dataplane="ref", configurations=12, treatment="maif", tta=tta, fifo=fifo,
                         slowdown={0: 1.1234567}, command=cmd, top_job=["a", "b"])  # fmt: skip
    assert set(hrows.FIELDS) <= set(row) and row["top_job"] == ["a", "b"]
    assert row["treatment"] == "maif-sum" and row["framework"] == "mlfc-ps" and row["rounds"] == 2
    assert row["time_to_095"] == [50.0, None] and row["less_than_fifo_095"] == [0.5, None]
    assert row["top_job_slowdown"] == [1.1235, None]
    json.dumps(row, allow_nan=False)  # NaN never reaches the JSON
    assert all(k in row for k in hrows.KEY)
    with pytest.raises(ValueError, match="top_job_slowdown"):
        hrows.check_row({**row, "top_job_slowdown": [1.0]})
    with pytest.raises(ValueError, match="command"):
        hrows.check_row({k: v for k, v in row.items() if k != "command"})


def test_a_shared_top_class_has_no_top_job() -> None:
    """Under the elimination objective several jobs share the top class: none of them is alone in it, so none
    is the top job (issue 26 item 2 counts a job's iterations alone in the top class)."""

    def s(t: float, job: int, priority: int) -> DecisionSample:
        return DecisionSample(t, 1, job, job, priority, 0.0, 0.0, "prior", 0, 0, 0.0)

    samples = [s(0.0, 1, 6), s(0.0, 2, 6), s(0.0, 3, 5), s(4.0, 1, 6), s(4.0, 2, 5), s(4.0, 3, 4),
               s(9.0, 1, 6), s(9.0, 2, 6), s(9.0, 3, 5)]  # fmt: skip
    assert hrows.top_periods(samples) == [(1, 4.0, 9.0)]
