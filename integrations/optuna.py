"""Optuna trials as mlfc jobs: a search's intermediate values reach the coordinator, whose MAIF ranking
gives the network to the trials that gain most; a pruned, finished or failed trial releases its class.

    from mlfc.integrations.optuna import MaifTrial

    def objective(trial):
        lr = trial.suggest_float("lr", 1e-3, 1e-1, log=True)
        with MaifTrial(trial, coordinator="127.0.0.1:50061", token_file="token") as mt:
            hook = mlfc_comm_hook(ddp, job=mt.job_id, ...)    # the trial's traffic carries its job id
            for step in range(epochs):
                ...
                mt.report(accuracy, step)   # trial.report + the coordinator; TrialPruned when Optuna prunes
            return accuracy

Each trial is the job ``job_id_base + trial.number``: deterministic, so the trial, its traffic and the
coordinator's records name the same job. ``report`` is Optuna's ``trial.report`` plus ``Agent.report`` (which
never blocks: a background thread delivers it). Leaving the ``with`` block finishes the job at the coordinator
with the reason: completed, pruned (by which pruner, at which step) or failed (the exception).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path

try:
    import optuna
except ImportError as e:  # the search extra is optional; say how to get it
    raise ImportError(
        "mlfc.integrations.optuna needs Optuna: `pip install 'mlfc[search]'` (optuna==5.0.0) or `make install`"
    ) from e

from mlfc import contract
from mlfc.coordinator.api import MAX_NAME, MAX_REASON
from mlfc.hosts.agent import DEFAULT_COORDINATOR, Agent, RegistrationRefused, Worker

log = logging.getLogger(__name__)

JOB_ID_ATTR = "mlfc_job_id"  # the trial's user attribute naming its job (visible in the study's storage)


def trial_job_id(trial_number: int, job_id_base: int = 1) -> int:
    """The job id of a trial: ``job_id_base + trial_number``; ValueError if it is not an mlfc job id."""
    if isinstance(trial_number, bool) or not isinstance(trial_number, int) or trial_number < 0:
        raise ValueError(f"trial number {trial_number!r} must be an integer >= 0")
    if isinstance(job_id_base, bool) or not isinstance(job_id_base, int) or job_id_base < 1:
        raise ValueError(f"job_id_base={job_id_base!r} must be an integer >= 1 (job 0 means 'no job')")
    job_id = job_id_base + trial_number
    if job_id > contract.MAX_JOB_ID:
        raise ValueError(
            f"trial {trial_number} maps to job id {job_id} (job_id_base {job_id_base} + trial number), beyond "
            f"mlfc's job ids 1..{contract.MAX_JOB_ID} (the shim's 16-bit job_id): lower job_id_base or start a new "
            "study"
        )
    return job_id


def _metric_of(study: optuna.study.Study) -> str:
    """'loss' for a minimized objective, 'accuracy' for a maximized one (a fraction in [0, 1])."""
    directions = study.directions
    if len(directions) != 1:
        raise ValueError("a multi-objective study cannot report intermediate values (Optuna's trial.report)")
    return "loss" if directions[0] == optuna.study.StudyDirection.MINIMIZE else "accuracy"


class MaifTrial:
    """One Optuna trial registered with the coordinator as one mlfc job (use it as a context manager).

    ``metric``: 'accuracy' (a fraction in [0, 1]) or 'loss'; by default the study's direction decides
    (maximize: accuracy, minimize: loss). ``final_step``: the last step the trial reports, when known (the
    coordinator retires the job once it is reported; 0 = unknown). ``replace=True`` reuses the id of a job that
    is registered already (e.g. a finished trial of an earlier study with the same ``job_id_base``): its
    history at the coordinator is deleted. ``register_timeout_s``: how long entering waits for the coordinator
    to accept the job; an unreachable coordinator only logs a warning (the agent keeps trying, the search goes
    on), a refusal raises RegistrationRefused. The other arguments are ``Agent``'s."""

    def __init__(
        self,
        trial: optuna.Trial,
        *,
        coordinator: str = DEFAULT_COORDINATOR,
        token: str | None = None,
        token_file: str | Path | None = None,
        job_id_base: int = 1,
        metric: str | None = None,
        name: str | None = None,
        workers: Sequence[Worker] = (),
        bytes_per_iteration: int = 0,
        final_step: int = 0,
        replace: bool = False,
        register_timeout_s: float = 5.0,
        finish_timeout_s: float = 5.0,
    ) -> None:
        if not isinstance(trial, optuna.Trial):
            raise TypeError(f"trial must be the optuna.Trial the objective received, not {type(trial).__name__}")
        if not (math.isfinite(register_timeout_s) and register_timeout_s >= 0):
            raise ValueError(f"register_timeout_s={register_timeout_s} must be a finite number >= 0")
        self.trial = trial
        self.job_id = trial_job_id(trial.number, job_id_base)
        metric = _metric_of(trial.study) if metric is None else metric
        self._register_timeout = register_timeout_s
        self._last_step = -1
        self._pruned_at: int | None = None
        self.reason = ""  # the reason the job was finished with ("" until then)
        self.delivered = False  # every report and the finish reached the coordinator
        self.agent = Agent(
            self.job_id,
            coordinator=coordinator,
            token=token,
            token_file=token_file,
            name=(name if name is not None else f"{trial.study.study_name}/trial-{trial.number}")[:MAX_NAME],
            metric=metric,
            workers=workers,
            bytes_per_iteration=bytes_per_iteration,
            final_iteration=final_step,
            replace=replace,
            finish_timeout_s=finish_timeout_s,
        )
        trial.set_user_attr(JOB_ID_ATTR, self.job_id)

    # -- the objective's API --------------------------------------------------------------------
    def start(self) -> MaifTrial:
        """Register the job (``with`` does it); RegistrationRefused if the coordinator refuses it."""
        try:
            registered = self.agent.wait_registered(self._register_timeout)
        except RegistrationRefused as e:
            self.agent.close()
            raise RegistrationRefused(
                f"trial {self.trial.number}: {e}. Give this study its own job_id_base, or replace=True to reuse "
                "the ids of finished jobs"
            ) from e
        if not registered:
            log.warning(
                "trial %d: coordinator did not accept job %d within %gs (%s); the trial goes on, the agent keeps "
                "trying",
                self.trial.number,
                self.job_id,
                self._register_timeout,
                self.agent.stats().last_error or "no answer",
            )
        return self

    def report(
        self,
        value: float,
        step: int,
        *,
        prune: bool = True,
        compute_s: float = 0.0,
        comm_s: float = 0.0,
        bytes: int = 0,
    ) -> None:
        """Optuna's ``trial.report(value, step)`` and the same point to the coordinator (as iteration ``step``).
        With ``prune`` (the default) raise optuna.TrialPruned when the study's pruner says so; the ``with``
        block then finishes the job as pruned. ValueError on a bad value or a step that does not increase."""
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"step={step!r} must be an integer >= 0")
        if step <= self._last_step:
            raise ValueError(f"step {step} does not increase (last reported {self._last_step})")
        # The agent checks the value first (finite; an accuracy in [0, 1]), so a bad one reaches neither side.
        self.agent.report(step, value, compute_s=compute_s, comm_s=comm_s, bytes=bytes)
        self.trial.report(value, step)
        self._last_step = step
        if prune and self.trial.should_prune():
            self._pruned_at = step
            raise optuna.TrialPruned(f"trial {self.trial.number} pruned at step {step} (value {value:g})")

    def finish(self, reason: str = "") -> bool:
        """Finish the job at the coordinator (once; later calls return the first one's result). True if every
        report and the finish were delivered; a coordinator that is down costs a warning, not the trial."""
        if self.reason:
            return self.delivered
        self.reason = (reason or self._completed())[:MAX_REASON]
        self.delivered = self.agent.finish(self.reason)
        if not self.delivered:
            log.warning(
                "trial %d: job %d not finished at the coordinator (%s); it retires the job once silent",
                self.trial.number,
                self.job_id,
                self.agent.stats().last_error or "timeout",
            )
        return self.delivered

    def __enter__(self) -> MaifTrial:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc_type is None:
            self.finish()
        elif issubclass(exc_type, optuna.TrialPruned):
            self.finish(self._pruned())
        else:
            self.finish(f"trial {self.trial.number} failed: {exc_type.__name__}: {exc}")

    # -- reasons --------------------------------------------------------------------------------
    def _completed(self) -> str:
        at = f" after step {self._last_step}" if self._last_step >= 0 else " without reports"
        return f"trial {self.trial.number} completed{at}"

    def _pruned(self) -> str:
        step = self._pruned_at if self._pruned_at is not None else self._last_step
        by = type(self.trial.study.pruner).__name__
        at = f"at step {step}" if step >= 0 else "before any report"
        return f"trial {self.trial.number} pruned by {by} {at}"
