"""One Optuna study whose trials are real data-parallel jobs on the lab's network (issue 47 item 1).

The study lives in this process and is driven by ``ask``/``tell``: ``concurrency`` trials run at once; when
one ends (completed, pruned or failed) the sampler proposes the next, until ``trials`` were asked. Each
trial is the job ``trial_job_id(trial.number)`` (mlfc.integrations.optuna): a parameter server and its
workers in the dumbbell's hosts of that job, each worker under ``mlfc-agent``, which registers the job and
reports every iteration (timing and, at evaluations, the accuracy) to the run's coordinator. The same
accuracies, read from the workers' output, go to Optuna as ``trial.report(accuracy, iteration)``; when
``trial.should_prune()`` says so, the job's processes are stopped, its agents finish the job at the
coordinator and MAIF's next decision no longer holds a class for it.

Why not ``MaifTrial`` here: in the lab the workers' agents already register the job and report every
iteration with its timing (what MAIF needs to rank per network second); a second registration of the same
id from this process would be refused. ``MaifTrial`` is the same reporting for a user's own objective
(docs/search.md).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import optuna

from mlfc.integrations.optuna import trial_job_id
from mlfc.lab.decisions import DecisionSample, DecisionWatch
from mlfc.lab.jobs import RunningJob, Transport, WorkerLog, start_job
from mlfc.lab.realjobs import say, training_spec
from mlfc.lab.results import IterationRecord
from mlfc.lab.scenarios import Treatment
from mlfc.lab.stack import Control, RunCoordinator, StackConfig, run_coordinator
from mlfc.lab.tta import AccuracyPoint, accuracy_points, final_accuracy, search_start
from mlfc.topologies import Topology


@dataclass(frozen=True)
class Space:
    """The search space: the model's width and the batch size per worker (categorical), the learning rate
    (log-uniform)."""

    widths: tuple[int, ...]
    lr: tuple[float, float]
    batch_sizes: tuple[int, ...]

    def suggest(self, trial: optuna.Trial) -> dict[str, int | float]:
        return {
            "width": trial.suggest_categorical("width", self.widths),
            "lr": trial.suggest_float("lr", self.lr[0], self.lr[1], log=True),
            "batch_size": trial.suggest_categorical("batch_size", self.batch_sizes),
        }


# The hpsearch grids' widths and learning-rate ranges (lab/hpsearch/search.py GRIDS), the batch size around the
# tasks' 32 per worker.
SPACES: dict[str, Space] = {
    "digits": Space((4, 8, 16), (0.01, 0.1), (16, 32, 64)),
    "synthetic": Space((64, 128, 256), (0.05, 0.4), (16, 32, 64)),
}

PRUNERS = ("median", "asha")
PRUNER_NAMES = {"median": "MedianPruner", "asha": "SuccessiveHalvingPruner"}
SAMPLER = "TPESampler"


def make_pruner(name: str, iterations: int) -> optuna.pruners.BasePruner:
    """``median``: prune below the median of earlier trials at the same step, after 5 trials and the first
    fifth of the iterations; ``asha``: asynchronous successive halving with rungs at iterations/9, /3 and the
    end (reduction factor 3: a third goes on at each rung)."""
    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=max(1, iterations // 5))
    if name == "asha":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=max(1, iterations // 9), reduction_factor=3)
    raise ValueError(f"unknown pruner {name!r}: choose from {', '.join(PRUNERS)}")


def make_sampler(seed: int) -> optuna.samplers.TPESampler:
    """TPE seeded by the round. Its first ``n_startup_trials`` proposals are independent seeded draws, the same
    sequence whatever finishes first; the later ones depend on the values told so far, so their order (which
    the network's treatment changes) can change them. ``constant_liar``: running trials count as bad, so k
    trials asked at once are not k copies of one proposal."""
    return optuna.samplers.TPESampler(seed=seed, constant_liar=True, n_startup_trials=10)


@dataclass(frozen=True)
class StudyPlan:
    """What every study of the experiment shares; ``treatment`` and the round's seed vary."""

    task: str
    space: Space
    trials: int
    concurrency: int
    iterations: int
    workers: int = 2
    eval_every: int = 2
    compute_s: float = 0.3
    model_seed: int = 0  # model init and data order, every trial
    bottleneck_pps: int = 800
    timeout_s: float = 3600.0  # a study still running then is stopped, its unfinished trials failed

    def stack(self, treatment: Treatment, name: str, coordinator_args: tuple[str, ...] = ()) -> StackConfig:
        """The run's settings for the coordinator and the jobs' transport (its jobs come from the sampler)."""
        return StackConfig(name=name, jobs=(), iterations=self.iterations, cc=treatment.cc, mltcp=treatment.mltcp,
                           priorities=treatment.priorities, bottleneck_pps=self.bottleneck_pps,
                           coordinator_args=treatment.coordinator_args + coordinator_args)  # fmt: skip


@dataclass
class TrialHistory:
    """One trial as the study saw it. Times are on the run's records' clock (seconds since its t0)."""

    number: int
    job: int
    params: dict[str, int | float]
    launched: float
    state: str = "running"  # running | complete | pruned | failed
    ended: float = math.nan
    points: list[AccuracyPoint] = field(default_factory=list)
    value: float = math.nan  # the value told to Optuna (complete: the last evaluation's accuracy)
    pruned_at: int | None = None  # the iteration whose report made the pruner stop it
    error: str = ""

    @property
    def name(self) -> str:
        p = self.params
        return f"t{self.number} w{p['width']} lr{p['lr']:.3g} b{p['batch_size']}"


@dataclass
class StudyRun:
    treatment: str
    pruner: str
    round: int
    seed: int
    trials: list[TrialHistory]
    records: list[IterationRecord]
    t0_wall: float  # wall clock of the records' zero
    decisions: list[DecisionSample] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    best_value: float = math.nan  # Optuna's best value (the best completed trial's)

    @property
    def start(self) -> float:
        """The study's clock starts when its first trial began iteration 0."""
        return search_start(self.records) if any(r.iteration == 0 for r in self.records) else math.nan

    def points(self) -> dict[int, list[AccuracyPoint]]:
        return {t.job: t.points for t in self.trials}


@dataclass
class _Active:
    """A trial whose job is running."""

    trial: optuna.Trial
    history: TrialHistory
    job: RunningJob
    readers: list[threading.Thread]
    reported: int = -1  # the last iteration told to Optuna


class StudyRunner:
    """Runs one study (``run``): launches, reports, prunes and tells; ``progress`` gets a line every few s."""

    def __init__(self, ctl: Control, topo: Topology, plan: StudyPlan, progress: Callable[[str], None] = say) -> None:
        self.ctl, self.topo, self.plan, self.progress = ctl, topo, plan, progress

    def run(self, treatment: Treatment, pruner: str, rnd: int, seed: int, name: str,
            coordinator_args: tuple[str, ...] = ()) -> StudyRun:  # fmt: skip
        plan = self.plan
        cfg = plan.stack(treatment, name, coordinator_args)
        study = optuna.create_study(direction="maximize", sampler=make_sampler(seed),
                                    pruner=make_pruner(pruner, plan.iterations), study_name=name)  # fmt: skip
        t0 = time.time()
        log = WorkerLog(name, t0)
        histories: list[TrialHistory] = []
        errors: list[str] = []
        active: list[_Active] = []
        stoppers: list[threading.Thread] = []
        decisions: list[DecisionSample] = []
        with run_coordinator(self.ctl, cfg) as coord:
            watch = DecisionWatch(coord.address, coord.token).start() if treatment.priorities == "maif" else None
            try:
                deadline, last_say = time.monotonic() + plan.timeout_s, 0.0
                while len(histories) < plan.trials or active:
                    while len(active) < plan.concurrency and len(histories) < plan.trials:
                        active.append(self._launch(study, log, coord, cfg.transport, t0))
                        histories.append(active[-1].history)
                    for a in list(active):
                        if self._step(study, a, log, t0, stoppers):
                            active.remove(a)
                    coord.process.check()
                    if time.monotonic() > deadline:
                        errors.append(f"study not done within {plan.timeout_s:.0f} s: {len(active)} trial(s) stopped")
                        break
                    if time.monotonic() - last_say > 5.0:
                        last_say = time.monotonic()
                        self.progress(f"[{name}] {time.time() - t0:6.1f} s  " + describe(histories, plan.iterations))
                    time.sleep(0.5)
            finally:
                for a in active:  # only after an error or the timeout
                    a.job.stop()
                    _fail(study, a, "stopped with the study", time.time() - t0)
                for th in stoppers:
                    th.join(timeout=30)
                if watch is not None:
                    decisions = watch.stop()
        errors += [f"trial {h.number}: {h.error}" for h in histories if h.state == "failed"]
        complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
        best = study.best_value if complete else math.nan
        records = sorted(log.records, key=lambda r: (r.job, r.worker, r.iteration))
        return StudyRun(treatment.name, pruner, rnd, seed, histories, records, t0, decisions, errors, best)

    def _launch(self, study: optuna.Study, log: WorkerLog, coord: RunCoordinator, transport: Transport, t0: float
                ) -> _Active:  # fmt: skip
        plan = self.plan
        trial = study.ask()
        params = plan.space.suggest(trial)
        job = trial_job_id(trial.number)
        spec = training_spec(job, task=plan.task, width=int(params["width"]), lr=float(params["lr"]),
                             batch_size=int(params["batch_size"]), compute_s=plan.compute_s, workers=plan.workers,
                             eval_every=plan.eval_every, seed=plan.model_seed,
                             name=f"trial {trial.number}")  # fmt: skip
        # No common start: a trial begins its first iteration as soon as its processes are ready.
        running = start_job(self.ctl.net, self.topo, spec, plan.iterations, transport, coord.address, coord.token,
                            self.ctl.run_dir, start_at=time.time())  # fmt: skip
        readers = [log.reader(proc, job, rank) for rank, proc in enumerate(running.workers)]
        history = TrialHistory(trial.number, job, params, time.time() - t0)
        self.progress(f"   trial {trial.number} (job {job}) launched: {history.name}")
        return _Active(trial, history, running, readers)

    def _step(self, study: optuna.Study, a: _Active, log: WorkerLog, t0: float, stoppers: list[threading.Thread]
              ) -> bool:  # fmt: skip
        """Report the trial's new evaluations to Optuna (pruning it if told to); tell Optuna once its job ended.
        True when the trial is done."""
        h = a.history
        with log.lock:
            mine = [r for r in log.records if r.job == h.job]
        h.points = accuracy_points(mine).get(h.job, [])
        for p in h.points:
            if p.iteration <= a.reported:
                continue
            a.trial.report(p.accuracy, p.iteration)
            a.reported = p.iteration
            if p.iteration < self.plan.iterations - 1 and a.trial.should_prune():
                stopper = threading.Thread(target=a.job.stop, name=f"stop-job{h.job}", daemon=True)
                stopper.start()  # SIGTERM: its agents finish the job at the coordinator, which frees its class
                stoppers.append(stopper)
                h.state, h.pruned_at, h.ended = "pruned", p.iteration, time.time() - t0
                h.value = p.accuracy
                h.points = [q for q in h.points if q.iteration <= p.iteration]  # what the study saw of it
                study.tell(a.trial, state=optuna.trial.TrialState.PRUNED)
                self.progress(f"   trial {h.number} pruned at iteration {p.iteration} (accuracy {p.accuracy:.3f})")
                return True
        if any(proc.poll() is None for proc in a.job.workers):
            return False
        for th in a.readers:  # the last lines of its output
            th.join(timeout=5)
        with log.lock:
            mine = [r for r in log.records if r.job == h.job]
        h.points = accuracy_points(mine).get(h.job, [])
        codes = [proc.returncode for proc in a.job.workers]
        a.job.stop()
        if any(codes) or not h.points:
            _fail(study, a, f"worker exit codes {codes}, {len(h.points)} evaluation(s)", time.time() - t0)
            return True
        h.state, h.ended, h.value = "complete", time.time() - t0, final_accuracy(h.points)
        for p in h.points:  # evaluations that arrived with the exit
            if p.iteration > a.reported:
                a.trial.report(p.accuracy, p.iteration)
                a.reported = p.iteration
        study.tell(a.trial, h.value)
        self.progress(f"   trial {h.number} complete: accuracy {h.value:.3f}")
        return True


def _fail(study: optuna.Study, a: _Active, why: str, now: float) -> None:
    a.history.state, a.history.error, a.history.ended = "failed", why, now
    study.tell(a.trial, state=optuna.trial.TrialState.FAIL)


def describe(histories: list[TrialHistory], iterations: int) -> str:
    """A progress line: how many trials ended how, and where the running ones are."""
    count: Mapping[str, int] = {s: sum(h.state == s for h in histories) for s in ("complete", "pruned", "failed")}
    running = [f"t{h.number}: {1 + max((p.iteration for p in h.points), default=-1)}/{iterations}"
               for h in histories if h.state == "running"]  # fmt: skip
    return ", ".join(f"{n} {s}" for s, n in count.items()) + ("; running " + " ".join(running) if running else "")
