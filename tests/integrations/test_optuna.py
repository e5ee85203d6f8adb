"""mlfc.integrations.optuna against a real in-process coordinator and real Optuna studies: a trial is a job
with its id, its reports reach the coordinator's store, a pruned, completed or failed trial is finished there
with its reason and leaves the classes the coordinator decides."""

from __future__ import annotations

import math
import socket
import sqlite3
import time
from collections.abc import Callable, Iterator

import pytest

optuna = pytest.importorskip("optuna", reason="optuna not installed (the search extra: make install)")

from mlfc import contract  # noqa: E402
from mlfc.coordinator.api import MAX_REASON  # noqa: E402
from mlfc.coordinator.client import CoordinatorClient  # noqa: E402
from mlfc.coordinator.engine import EngineConfig  # noqa: E402
from mlfc.coordinator.service import Coordinator  # noqa: E402
from mlfc.hosts.agent import Agent, RegistrationRefused  # noqa: E402
from mlfc.integrations.optuna import JOB_ID_ATTR, MaifTrial, trial_job_id  # noqa: E402
from mlfc.proto import coordinator_pb2 as pb  # noqa: E402

TOKEN = "optuna-test-token"
STEPS = 6

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _wait(pred: Callable[[], object], timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.01)
    return bool(pred())


@pytest.fixture
def coordinator(tmp_path) -> Iterator[Coordinator]:  # type: ignore[no-untyped-def]
    coord = Coordinator(str(tmp_path / "coord.sqlite"), token=TOKEN, config=EngineConfig(tick_s=0.05)).start()
    yield coord
    coord.stop(0)


@pytest.fixture
def client(coordinator: Coordinator) -> Iterator[CoordinatorClient]:
    with CoordinatorClient(coordinator.address, token=TOKEN) as c:
        assert c.wait_ready(10)
        yield c


def _jobs(client: CoordinatorClient) -> dict[int, pb.JobInfo]:
    return {j.job_id: j for j in client.jobs()}


def _classed(client: CoordinatorClient) -> set[int]:
    """The jobs holding a class in the coordinator's latest decision."""
    decisions = client.all_decisions()
    return {j.job_id for j in decisions[-1].intent.jobs} if decisions else set()


def _metrics(coordinator: Coordinator, job_id: int) -> list[tuple[int, float]]:
    with sqlite3.connect(coordinator.store.path) as db:
        return db.execute(
            "SELECT iteration, metric FROM reports WHERE job_id=? ORDER BY iteration", (job_id,)
        ).fetchall()


def _curve(quality: float, step: int) -> float:
    return round(quality * (1 - math.exp(-(step + 1) / 2)), 6)


def test_trial_job_id_is_base_plus_number_within_the_shim_range() -> None:
    assert trial_job_id(0) == 1
    assert trial_job_id(4, job_id_base=100) == 104
    assert trial_job_id(contract.MAX_JOB_ID - 1) == contract.MAX_JOB_ID
    with pytest.raises(ValueError, match=rf"job id {contract.MAX_JOB_ID + 1} .*1\.\.{contract.MAX_JOB_ID}"):
        trial_job_id(contract.MAX_JOB_ID)
    with pytest.raises(ValueError, match="job_id_base=0"):
        trial_job_id(3, job_id_base=0)
    with pytest.raises(ValueError, match="trial number -1"):
        trial_job_id(-1)


def test_search_trials_are_jobs_reports_reach_the_coordinator_and_a_pruned_trial_releases_its_class(
    coordinator: Coordinator, client: CoordinatorClient
) -> None:
    seen: dict[int, pb.JobInfo] = {}  # job -> what the coordinator knew of it while its trial ran
    classed: dict[int, bool] = {}  # job -> held a class in a decision while its trial ran

    def objective(trial: optuna.Trial) -> float:
        quality = trial.suggest_float("quality", 0.0, 1.0)
        value = 0.0
        with MaifTrial(trial, coordinator=coordinator.address, token=TOKEN, bytes_per_iteration=1000) as mt:
            for step in range(STEPS):
                value = _curve(quality, step)
                try:
                    mt.report(value, step)
                finally:  # also for the report that prunes: it reached the coordinator first
                    assert _wait(lambda n=step + 1: _jobs(client)[mt.job_id].metric_points == n)
                    seen[mt.job_id] = _jobs(client)[mt.job_id]
                    classed[mt.job_id] = classed.get(mt.job_id, False) or _wait(
                        lambda: mt.job_id in _classed(client), 2
                    )
        return value

    study = optuna.create_study(
        study_name="toy",
        direction="maximize",
        pruner=optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=1),
    )
    for quality in (0.9, 0.8, 0.2):  # the third trial is worse than the median from step 1 on: pruned
        study.enqueue_trial({"quality": quality})
    study.optimize(objective, n_trials=3)

    states = [t.state for t in study.trials]
    assert states == [optuna.trial.TrialState.COMPLETE] * 2 + [optuna.trial.TrialState.PRUNED]
    assert [t.user_attrs[JOB_ID_ATTR] for t in study.trials] == [1, 2, 3]

    # While each trial ran: its job was registered under its id and name, active, with a class.
    assert sorted(seen) == [1, 2, 3]
    for number, job_id in enumerate((1, 2, 3)):
        assert (seen[job_id].state, seen[job_id].name, seen[job_id].metric) == (
            "active",
            f"toy/trial-{number}",
            pb.ACCURACY,
        )
    assert classed == {1: True, 2: True, 3: True}

    # Every intermediate value is in the coordinator's store, at its step.
    for trial in study.trials:
        job_id = trial.user_attrs[JOB_ID_ATTR]
        assert _metrics(coordinator, job_id) == sorted(trial.intermediate_values.items())
    pruned_steps = len(study.trials[2].intermediate_values)
    assert pruned_steps == 2  # pruned at step 1, the first after the warm-up

    # Finished with the reason; none holds a class any more.
    jobs = _jobs(client)
    assert {j: (jobs[j].state, jobs[j].reason) for j in (1, 2, 3)} == {
        1: ("finished", f"trial 0 completed after step {STEPS - 1}"),
        2: ("finished", f"trial 1 completed after step {STEPS - 1}"),
        3: ("finished", "trial 2 pruned by MedianPruner at step 1"),
    }
    assert _wait(lambda: not _classed(client))


def test_successive_halving_prunes_and_the_job_is_finished_as_pruned(
    coordinator: Coordinator, client: CoordinatorClient
) -> None:
    def objective(trial: optuna.Trial) -> float:
        quality = trial.suggest_float("quality", 0.0, 1.0)
        with MaifTrial(trial, coordinator=coordinator.address, token=TOKEN) as mt:
            for step in range(STEPS):
                mt.report(_curve(quality, step), step)
        return _curve(quality, STEPS - 1)

    pruner = optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=2, min_early_stopping_rate=0)
    study = optuna.create_study(direction="maximize", pruner=pruner)
    for quality in (0.9, 0.1):  # the second trial is in the bottom half at the first rung
        study.enqueue_trial({"quality": quality})
    study.optimize(objective, n_trials=2)

    assert [t.state for t in study.trials] == [optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED]
    jobs = _jobs(client)
    assert jobs[2].state == "finished"
    assert jobs[2].reason.startswith("trial 1 pruned by SuccessiveHalvingPruner at step ")
    assert jobs[2].reports == len(study.trials[1].intermediate_values)


def test_an_exception_in_the_objective_still_finishes_the_job(
    coordinator: Coordinator, client: CoordinatorClient
) -> None:
    message = "data loader died " + "x" * 1000  # longer than a Finish reason may be

    def objective(trial: optuna.Trial) -> float:
        with MaifTrial(trial, coordinator=coordinator.address, token=TOKEN) as mt:
            mt.report(0.3, 0)
            mt.report(0.4, 1)
            raise RuntimeError(message)

    study = optuna.create_study(direction="maximize")
    with pytest.raises(RuntimeError, match="data loader died"):
        study.optimize(objective, n_trials=1)

    assert study.trials[0].state == optuna.trial.TrialState.FAIL
    job = _jobs(client)[1]
    assert job.state == "finished"
    assert job.reason.startswith("trial 0 failed: RuntimeError: data loader died xxx")
    assert len(job.reason) == MAX_REASON
    assert _metrics(coordinator, 1) == [(0, 0.3), (1, 0.4)]


def test_a_minimized_study_reports_a_loss(coordinator: Coordinator, client: CoordinatorClient) -> None:
    def objective(trial: optuna.Trial) -> float:
        with MaifTrial(trial, coordinator=coordinator.address, token=TOKEN, job_id_base=50) as mt:
            mt.report(2.5, 0)  # a loss above 1: refused as an accuracy
            assert mt.job_id == 50
        return 2.5

    study = optuna.create_study(direction="minimize")
    study.optimize(objective, n_trials=1)
    job = _jobs(client)[50]
    assert (job.metric, job.state, job.reason) == (pb.LOSS, "finished", "trial 0 completed after step 0")


def test_a_taken_job_id_is_refused_with_the_way_out(coordinator: Coordinator, client: CoordinatorClient) -> None:
    def objective(trial: optuna.Trial) -> float:
        with MaifTrial(trial, coordinator=coordinator.address, token=TOKEN) as mt:
            mt.report(0.5, 0)
        return 0.5

    optuna.create_study(direction="maximize").optimize(objective, n_trials=1)
    assert _jobs(client)[1].state == "finished"

    # A second study with the same job_id_base: trial 0 is job 1 again, which the first study's trial holds.
    study = optuna.create_study(direction="maximize")
    with pytest.raises(RegistrationRefused, match=r"ALREADY_EXISTS.*job_id_base.*replace=True"):
        study.optimize(objective, n_trials=1)
    assert _jobs(client)[1].reason == "trial 0 completed after step 0"  # untouched

    def replacing(trial: optuna.Trial) -> float:
        with MaifTrial(trial, coordinator=coordinator.address, token=TOKEN, replace=True) as mt:
            mt.report(0.7, 0)
        return 0.7

    optuna.create_study(direction="maximize").optimize(replacing, n_trials=1)
    assert _metrics(coordinator, 1) == [(0, 0.7)]  # the earlier history was deleted with the takeover


def test_a_job_id_active_in_another_agent_is_refused(coordinator: Coordinator, client: CoordinatorClient) -> None:
    other = Agent(1, coordinator=coordinator.address, token=TOKEN)
    assert other.wait_registered(10)
    study = optuna.create_study(direction="maximize")
    trial = study.ask()
    with pytest.raises(RegistrationRefused, match="already registered by agent instance"):
        MaifTrial(trial, coordinator=coordinator.address, token=TOKEN).start()
    assert _jobs(client)[1].instance == other.instance
    assert other.finish("done")


def test_bad_values_reach_neither_optuna_nor_the_coordinator(
    coordinator: Coordinator, client: CoordinatorClient
) -> None:
    study = optuna.create_study(direction="maximize")
    trial = study.ask()
    with MaifTrial(trial, coordinator=coordinator.address, token=TOKEN) as mt:
        with pytest.raises(ValueError, match=r"accuracy=42.0 outside \[0, 1\]"):
            mt.report(42.0, 0)
        with pytest.raises(ValueError, match="must be a finite number"):
            mt.report(float("nan"), 0)
        with pytest.raises(ValueError, match="step=-1"):
            mt.report(0.5, -1)
        mt.report(0.5, 3)
        with pytest.raises(ValueError, match=r"step 3 does not increase \(last reported 3\)"):
            mt.report(0.6, 3)
        assert mt.agent.flush(10)
    study.tell(trial, 0.5)
    assert study.trials[0].intermediate_values == {3: 0.5}
    assert _metrics(coordinator, 1) == [(3, 0.5)]
    assert mt.delivered and mt.reason == "trial 0 completed after step 3"

    with pytest.raises(ValueError, match="multi-objective"):
        MaifTrial(optuna.create_study(directions=["maximize", "minimize"]).ask(), token=TOKEN)
    with pytest.raises(TypeError, match=r"optuna\.Trial"):
        MaifTrial(study.trials[0], token=TOKEN)  # a FrozenTrial: not the objective's trial


def test_an_unreachable_coordinator_does_not_stop_the_search() -> None:
    with socket.socket() as s:  # a port where nothing listens
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"

    def objective(trial: optuna.Trial) -> float:
        with MaifTrial(trial, coordinator=address, token=TOKEN, register_timeout_s=0.2, finish_timeout_s=0.3) as mt:
            mt.report(0.5, 0)
        assert not mt.delivered
        return 0.5

    study = optuna.create_study(direction="maximize")
    t0 = time.monotonic()
    study.optimize(objective, n_trials=2)
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.COMPLETE] * 2
    assert time.monotonic() - t0 < 5
