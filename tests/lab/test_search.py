"""lab/search (issue 47 item 1): time to accuracy from trial histories, the published row and its table, the
pruner/treatment matrix, the sampler's shared proposals and one study step's reporting and pruning."""

from __future__ import annotations

import json
import math
from pathlib import Path

import optuna
import pytest

from mlfc.lab import summaries
from mlfc.lab.jobs import WorkerLog
from mlfc.lab.results import IterationRecord
from mlfc.lab.search import figures, report
from mlfc.lab.search import rows as srows
from mlfc.lab.search.cli import parse
from mlfc.lab.search.study import (
    PRUNER_NAMES,
    SPACES,
    StudyRun,
    TrialHistory,
    make_pruner,
    make_sampler,
)
from mlfc.lab.tta import AccuracyPoint

optuna.logging.set_verbosity(optuna.logging.WARNING)
TARGETS = {0.90: 0.9, 0.95: 0.95}


def history(number: int, accs: list[float], t0: float = 0.0, dt: float = 1.0, state: str = "complete") -> TrialHistory:
    """A trial evaluated every 2 iterations, ``dt`` s apart from ``t0``."""
    pts = [AccuracyPoint(t0 + dt * i, 2 * i + 1, a) for i, a in enumerate(accs)]
    return TrialHistory(number, number + 1, {"width": 8, "lr": 0.05, "batch_size": 32}, t0, state, points=pts)


# ---- time to accuracy from trial histories -----------------------------------------------------------


def test_the_studys_time_is_the_first_trial_whose_smoothed_accuracy_reaches_the_target() -> None:
    slow = history(0, [0.5, 0.8, 0.96, 0.96, 0.96], t0=0.0, dt=10.0)  # smoothed 0.96 at t = 40
    fast = history(1, [0.7, 0.92, 0.92, 0.92], t0=5.0, dt=5.0)  # smoothed 0.92 at t = 20, never 0.95
    tta = srows.study_time_to_accuracy([slow, fast], TARGETS, start=2.0, window=3)
    assert tta[0.90] == pytest.approx(20.0 - 2.0)  # the second trial's, though it started later
    assert tta[0.95] == pytest.approx(40.0 - 2.0)


def test_a_spike_is_not_reaching_the_target_and_never_is_nan() -> None:
    spike = history(0, [0.3, 0.99, 0.3, 0.3])  # one evaluation at 0.99: the mean of 3 never reaches 0.9
    tta = srows.study_time_to_accuracy([spike], TARGETS, start=0.0, window=3)
    assert math.isnan(tta[0.90]) and math.isnan(tta[0.95])
    assert srows.study_time_to_accuracy([spike], TARGETS, start=0.0, window=1)[0.95] == pytest.approx(1.0)


def test_a_pruned_trial_counts_with_what_it_reported() -> None:
    pruned = history(0, [0.9, 0.97, 0.98], dt=2.0, state="pruned")  # means 0.9, 0.935, 0.95
    assert srows.study_time_to_accuracy([pruned], TARGETS, 0.0, 3)[0.95] == pytest.approx(4.0)


def test_best_over_time_rises_only_and_is_smoothed() -> None:
    a = history(0, [0.4, 0.6, 0.8], dt=10.0)
    b = history(1, [0.9, 0.9, 0.1], t0=1.0, dt=10.0)
    curve = srows.best_over_time([a, b], start=0.0, window=3)
    assert [v for _, v in curve] == sorted(v for _, v in curve)
    assert curve[0] == (0.0, pytest.approx(0.4))
    assert curve[1] == (1.0, pytest.approx(0.9))  # b's first evaluation alone is its mean
    assert max(v for _, v in curve) == pytest.approx(0.9)  # b's later mean (0.633) does not lower it
    assert srows.curve_for_json(curve)[1] == [1.0, 0.9]


def test_same_params_counts_trials_proposed_alike_by_number() -> None:
    mine = [history(0, [0.5]), history(1, [0.5]), history(2, [0.5])]
    other = [history(0, [0.1]), history(1, [0.1])]
    other[1].params = {**other[1].params, "lr": 0.2}
    assert srows.same_params(mine, other) == 1  # trial 1 differs, trial 2 has no counterpart


# ---- the row, its publishing and its table -------------------------------------------------------------


def _row(treatment: str, t95: list[float], fifo95: list[float], pruner: str = "asha") -> dict:
    rounds = range(len(t95))
    return srows.make_row(
        task="digits", dataplane="ref", sampler="TPESampler", pruner=PRUNER_NAMES[pruner], trials=24, concurrency=6,
        treatment=treatment, tta={r: {0.90: t95[r] / 2, 0.95: t95[r]} for r in rounds},
        fifo={r: {0.90: math.nan, 0.95: fifo95[r]} for r in rounds}, best_value={r: 0.97 for r in rounds},
        pruned={r: 10 + r for r in rounds}, command="python -m mlfc.lab.search --publish",
        best_over_time=[[[0.0, 0.5], [30.0 + r, 0.96]] for r in rounds], a_star={"a_star": 0.99},
    )  # fmt: skip


def test_the_row_has_the_issues_fields_and_compares_with_the_same_rounds_fifo() -> None:
    row = _row("maif", [60.0, 80.0, math.nan], [100.0, 100.0, 90.0])
    assert row["treatment"] == "maif-sum"  # the published name hpsearch uses for the default objective
    assert row["time_to_095"] == [60.0, 80.0, None]
    assert row["less_than_fifo_095"] == [0.4, 0.2, None]
    assert row["best_value"] == [0.97] * 3 and row["pruned"] == [10, 11, 12] and row["rounds"] == 3
    assert set(srows.KEY) <= set(row) and set(srows.FIELDS) <= set(row)
    json.dumps(row, allow_nan=False)  # null, never NaN, in summary.json


@pytest.mark.parametrize(
    "change",
    [
        {"pruned": [1, 2]},  # a value per round
        {"pruned": [1, 2, 25]},  # more than the trials
        {"best_value": [0.9, "x", 0.9]},
        {"rounds": 0, "time_to_090": [], "time_to_095": [], "less_than_fifo_095": [], "best_value": [], "pruned": []},
        {"trials": True},
        {"concurrency": None},
    ],
)
def test_a_bad_row_is_refused(change: dict) -> None:
    row = _row("baseline", [50.0, 60.0, 70.0], [50.0, 60.0, 70.0])
    srows.check_row(row)
    with pytest.raises(ValueError):
        srows.check_row({**row, **change})


def test_publishing_replaces_only_the_same_key_and_the_table_and_plot_follow(tmp_path: Path) -> None:
    fifo = _row("baseline", [100.0, 90.0], [100.0, 90.0])
    maif = _row("maif", [60.0, 45.0], [100.0, 90.0])
    median = _row("maif", [70.0, 70.0], [100.0, 90.0], pruner="median")
    summaries.publish("search", [fifo, maif, median], key=srows.KEY, data=tmp_path, meta={"schema": srows.SCHEMA})
    newer = _row("maif", [50.0, 45.0], [100.0, 90.0])
    summaries.publish("search", [newer], key=srows.KEY, data=tmp_path)
    summary = summaries.load("search", tmp_path)
    assert len(summary["rows"]) == 3 and summary["schema"] == srows.SCHEMA
    asha_maif = [r for r in summary["rows"] if r["pruner"] == "SuccessiveHalvingPruner" and r["treatment"] != "fifo"]
    assert [r["time_to_095"] for r in asha_maif] == [[50.0, 45.0]]
    table = figures.render_search(summary)
    lines = [line for line in table.splitlines() if line.startswith("| digits")]
    assert len(lines) == 3 and "MedianPruner" in lines[0]
    assert "| fifo |" in lines[1] and "| maif-sum |" in lines[2]  # FIFO first within a pruner
    assert "50 % (50..50)" in lines[2]  # 1 - 50/100 and 1 - 45/90
    assert "python -m mlfc.lab.search --publish" in table
    png = tmp_path / "figures-search.png"
    figures.plot_search(summary, png)
    assert png.stat().st_size > 1000
    figures.plot_search({"rows": []}, tmp_path / "none.png")
    assert not (tmp_path / "none.png").exists()


def test_the_docs_know_the_experiment() -> None:
    from mlfc.lab import figures as lab_figures

    assert lab_figures.RENDERERS["search"] is figures.render_search
    assert lab_figures.PLOTS["search"] is figures.plot_search


# ---- the pruner/treatment matrix -------------------------------------------------------------------------


def test_the_pruners_are_optunas_with_rungs_within_the_iterations() -> None:
    assert isinstance(make_pruner("median", 90), optuna.pruners.MedianPruner)
    asha = make_pruner("asha", 90)
    assert isinstance(asha, optuna.pruners.SuccessiveHalvingPruner) and asha._min_resource == 10
    assert {PRUNER_NAMES[p] for p in ("median", "asha")} == {"MedianPruner", "SuccessiveHalvingPruner"}
    with pytest.raises(ValueError):
        make_pruner("hyperband", 90)


def test_the_defaults_are_the_issues_method_and_bad_options_are_refused() -> None:
    args = parse([])
    assert (args.trials, args.concurrency, args.rounds, args.dataplane) == (24, 6, 3, "ref")
    assert args.pruners == ["median", "asha"] and args.treatments == ["baseline", "maif"]
    assert args.iterations == 90 and args.task == "digits"
    for argv in (["--trials", "4", "--concurrency", "6"], ["--pruners", "hyperband"], ["--treatments", "maif"],
                 ["--iterations", "3"], ["--task", "mnist"], ["--reference-grid", "8"]):  # fmt: skip
        with pytest.raises(SystemExit):
            parse(argv)


def _study(treatment: str, pruner: str, rnd: int, t95: float, pruned: int) -> report.Measured:
    trials = [history(i, [0.5]) for i in range(4)]
    for t in trials[:pruned]:
        t.state = "pruned"
    run = StudyRun(treatment, pruner, rnd, rnd, trials, [], 0.0, best_value=0.9 + rnd / 100)
    return report.Measured(run, {0.90: t95 / 2, 0.95: t95})


def test_one_row_per_pruner_and_treatment_each_against_its_own_pruners_fifo() -> None:
    studies = [_study(t, p, r, t95, pruned) for r in range(2) for p, t, t95, pruned in
               [("median", "baseline", 100.0, 1), ("median", "maif", 80.0, 2),
                ("asha", "baseline", 50.0, 3), ("asha", "maif", 25.0, 0)]]  # fmt: skip
    rows = report.published_rows(studies, task="digits", dataplane="ref", trials=4, concurrency=2,
                                 command="c", extra={})  # fmt: skip
    by = {(r["pruner"], r["treatment"]): r for r in rows}
    assert set(by) == {(p, t) for p in ("MedianPruner", "SuccessiveHalvingPruner") for t in ("fifo", "maif-sum")}
    assert by["MedianPruner", "maif-sum"]["less_than_fifo_095"] == [0.2, 0.2]
    assert by["SuccessiveHalvingPruner", "maif-sum"]["less_than_fifo_095"] == [0.5, 0.5]
    assert by["SuccessiveHalvingPruner", "fifo"]["pruned"] == [3, 3]
    assert by["MedianPruner", "fifo"]["best_value"] == [0.9, 0.91] and by["MedianPruner", "fifo"]["rounds"] == 2


# ---- the sampler and one study step -----------------------------------------------------------------------


def _proposals(seed: int, tell_order: list[int], n: int = 10) -> list[dict]:
    """``n`` trials asked 2 at a time, each pair told in ``tell_order`` (the treatments' differing finishes)."""
    study = optuna.create_study(direction="maximize", sampler=make_sampler(seed))
    out = []
    for _ in range(n // 2):
        pair = [study.ask() for _ in range(2)]
        out += [SPACES["digits"].suggest(t) for t in pair]
        for i in tell_order:
            study.tell(pair[i], 0.1 * pair[i].number)
    return out


def test_the_same_seed_proposes_the_same_startup_trials_whatever_finishes_first() -> None:
    a, b = _proposals(3, [0, 1]), _proposals(3, [1, 0])
    assert a == b  # TPE's 10 startup trials: seeded independent draws
    assert a != _proposals(4, [0, 1])  # another round, another sequence
    assert {p["width"] for p in a} <= set(SPACES["digits"].widths)
    assert all(0.01 <= p["lr"] <= 0.1 for p in a)


class _Proc:
    def __init__(self, code: int | None) -> None:
        self.returncode = code

    def poll(self) -> int | None:
        return self.returncode


class _Job:
    def __init__(self, code: int | None) -> None:
        self.workers = [_Proc(code), _Proc(code)]
        self.stopped = 0

    def stop(self) -> None:
        self.stopped += 1


def _record(job: int, it: int, acc: float | None) -> IterationRecord:
    return IterationRecord("s", job, "w0", it, it, it + 0.5, it + 0.9, it + 1.0, 100, accuracy=acc)


def _runner_step(pruner, accs_by_trial: list[list[float]], code: int | None):  # type: ignore[no-untyped-def]
    """Every trial's evaluations already in the log; one ``_step`` per trial in order."""
    from mlfc.lab.search.study import StudyPlan, StudyRunner, _Active

    plan = StudyPlan("digits", SPACES["digits"], trials=len(accs_by_trial), concurrency=1, iterations=40)
    runner = StudyRunner(None, None, plan, progress=lambda _m: None)  # type: ignore[arg-type]
    study = optuna.create_study(direction="maximize", pruner=pruner)
    log = WorkerLog("s", 0.0)
    out = []
    for number, accs in enumerate(accs_by_trial):
        trial = study.ask()
        log.records += [_record(number + 1, 2 * i + 1, a) for i, a in enumerate(accs)]
        active = _Active(trial, TrialHistory(number, number + 1, {}, 0.0), _Job(code), [])  # type: ignore[arg-type]
        done = runner._step(study, active, log, 0.0, stoppers := [])
        for th in stoppers:
            th.join()
        out.append((done, active))
    return study, out


def test_a_finished_trial_is_told_its_last_accuracy() -> None:
    study, [(done, a)] = _runner_step(optuna.pruners.NopPruner(), [[0.2, 0.5, 0.7]], code=0)
    assert done and a.history.state == "complete" and a.history.value == pytest.approx(0.7)
    assert study.trials[0].state == optuna.trial.TrialState.COMPLETE and study.best_value == pytest.approx(0.7)
    assert study.trials[0].intermediate_values == {1: 0.2, 3: 0.5, 5: 0.7}


def test_a_running_trial_is_reported_but_not_told() -> None:
    study, [(done, a)] = _runner_step(optuna.pruners.NopPruner(), [[0.2, 0.5]], code=None)
    assert not done and a.reported == 3 and a.history.state == "running"
    assert study.trials[0].state == optuna.trial.TrialState.RUNNING


def test_a_failed_job_is_a_failed_trial() -> None:
    study, [(done, a)] = _runner_step(optuna.pruners.NopPruner(), [[0.2]], code=1)
    assert done and a.history.state == "failed" and "exit codes [1, 1]" in a.history.error
    assert study.trials[0].state == optuna.trial.TrialState.FAIL


def test_a_pruned_trial_has_its_job_stopped_and_keeps_what_the_study_saw() -> None:
    good = [0.5, 0.6, 0.7, 0.8, 0.85]
    pruner = optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=2)
    study, steps = _runner_step(pruner, [good, good, [0.1, 0.1, 0.1, 0.9, 0.9]], code=0)
    done, a = steps[2]
    assert done and a.history.state == "pruned" and a.history.pruned_at == 3  # the first step after the warm-up
    assert a.job.stopped == 1  # its processes: the agents then finish the job at the coordinator
    assert [p.iteration for p in a.history.points] == [1, 3]  # not the evaluations after the pruning
    assert study.trials[2].state == optuna.trial.TrialState.PRUNED
    assert [s[1].history.state for s in steps[:2]] == ["complete", "complete"]
