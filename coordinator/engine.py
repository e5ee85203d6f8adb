"""The coordinator's state, kept in step with its store: job records (jobs.py) changed only after the
SQLite transaction that records the change committed, learning-curve fits (cached), and decisions
(decision.py, a pure function) persisted before they are handed to the sender.

Threads: gRPC handlers call ``register``/``report``/``finish`` (serialised by one lock, each one SQLite
transaction); the decision loop (loop.py) calls ``decide``; introspection (``explain``, ``status``, ``jobs``,
``decisions``) may run on any thread. Refusals are domain errors (errors.py).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from mlfc.policy import fallback as fb
from mlfc.policy import maif
from mlfc.proto import coordinator_pb2 as pb
from mlfc.proto import intent_pb2

from . import convert, explain
from .api import MAX_BATCH
from .decision import Decision, FitCache, JobView, Memory, decide, fit_job
from .errors import InvalidRequest
from .jobs import ACTIVE, COMM_HISTORY, FINISHED, REACHED_FINAL, SILENT, JobBook, JobRecord, ReportPlan, WorkerTally
from .store import Store
from .validate import check_job_id, metric_kind


@dataclass(frozen=True, slots=True)
class EngineConfig:
    params: maif.MaifParams = field(default_factory=maif.MaifParams)
    silence_s: float = 60.0  # an active job with no report for this long is retired as silent
    tick_s: float = 1.0  # periodic re-evaluation (silence), even without reports
    min_gap_s: float = 0.005  # minimum spacing of decisions: coalesces report bursts
    history: int = 2048  # metric points per job kept in memory (older ones are thinned)
    interleaving: bool = False  # sets Intent.interleaving for jobs without their own class
    # MLTCP's fallback (mlfc/policy/fallback.py): no classes until the agents' timings show MLTCP alone has not
    # interleaved the jobs, then the ranking (or in-network interleaving). None: the ranking always applies.
    fallback: fb.FallbackParams | None = None

    def __post_init__(self) -> None:
        if self.fallback is not None and self.fallback.history > COMM_HISTORY:
            raise ValueError(f"fallback history {self.fallback.history} above the {COMM_HISTORY} iterations kept")


class Engine:
    def __init__(
        self,
        store: Store,
        config: EngineConfig | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self.config = config or EngineConfig()
        self._clock, self._wall = clock, wall
        self._lock = threading.RLock()  # job records + store writes
        self._decide_lock = threading.Lock()  # one evaluation at a time (the fit cache is not shared)
        self.book = JobBook(self.config.history)
        self._fits = FitCache()
        self._memory: dict[int, Memory] = {}  # the ranker's memory from the latest evaluation
        self._evaluated: tuple[Decision, int] | None = None  # the latest evaluation, latest decision number then
        self._last_key: bytes | None = None  # the latest decision's intent (convert.intent_key)
        self._fallback = fb.FallbackState()  # the fallback's state after the latest evaluation
        self.latest_seq = 0
        self.latest_at = 0.0  # wall clock of the latest decision (0: none yet)
        self.applied_seq = 0
        self.reports = 0
        self.sink: Callable[[int, intent_pb2.Intent], None] | None = None  # gets every new decision
        self.on_commit: Callable[[], None] = lambda: None  # after every committed change (the decision loop)
        self.controller_error: Callable[[], str] = lambda: ""
        # Observers (coordinator/metrics.py): committed reports (duplicates included), and every evaluation's
        # duration in seconds with whether it made a new decision.
        self.on_reports: Callable[[ReportPlan], None] = lambda plan: None
        self.on_evaluated: Callable[[float, bool], None] = lambda seconds, changed: None
        self._load()

    # -- recovery -------------------------------------------------------------------------------
    def _load(self) -> None:
        now = self._clock()
        for row in self._store.jobs():
            spec = pb.JobSpec.FromString(row.spec)
            # The silence clock restarts: agents were buffering while we were down.
            job = JobRecord(
                spec,
                metric_kind(spec.metric),
                row.instance,
                row.state,
                row.reason,
                row.registered_at,
                row.changed_at,
                now,
            )
            tallies = self._store.workers(row.job_id)
            job.workers = {w.worker: WorkerTally(w.last_iteration, w.highest_iteration, w.reports) for w in tallies}
            for it, metric in self._store.metric_history(row.job_id, self.config.history):
                job.curve.add(it, metric, self.config.history)
            for iteration, compute_s, comm_s, agent_time in self._store.timing_history(row.job_id, COMM_HISTORY):
                job.timing.add(compute_s, comm_s)
                job.timing.add_comm(iteration, comm_s, agent_time)
            self.book.load(job)
        self.reports = self._store.report_count()
        latest = self._store.latest_decision()
        if latest is not None:
            self.latest_seq, self.latest_at = latest.seq, latest.created_at
            self._memory = convert.memory_from_json(latest.memory)
            self._fallback = convert.fallback_from_json(latest.memory) or fb.FallbackState()
            self._last_key = convert.intent_key(intent_pb2.Intent.FromString(latest.intent))
        applied = self._store.latest_applied()
        self.applied_seq = applied.seq if applied else 0

    def latest_decision(self) -> tuple[int, intent_pb2.Intent] | None:
        row = self._store.latest_decision()
        return (row.seq, intent_pb2.Intent.FromString(row.intent)) if row else None

    # -- requests -------------------------------------------------------------------------------
    def register(self, req: pb.RegisterRequest) -> pb.RegisterReply:
        with self._lock:
            reg = self.book.plan_register(req, self._wall(), self._clock())
            with self._store.transaction() as db:
                if reg.drop_history:
                    Store.delete_reports(db, reg.record.job_id)
                Store.put_job(db, reg.record.row())
            self.book.apply_register(reg)
            if not reg.resumed:
                self._fits.drop(reg.record.job_id)
            reply = pb.RegisterReply(resumed=reg.resumed, workers=convert.worker_progress(reg.record))
        self.on_commit()
        return reply

    def report(self, batch: pb.ReportBatch) -> pb.ReportAck:
        n = len(batch.reports)
        if n == 0:
            return pb.ReportAck()
        if n > MAX_BATCH:
            raise InvalidRequest(f"batch of {n} reports exceeds the limit of {MAX_BATCH}; split it")
        with self._lock:
            wall = self._wall()
            plan = self.book.plan_reports(batch.reports, wall, self._store.report)
            accepted = len(plan.accepted)
            if not accepted:
                self.on_reports(plan)
                return pb.ReportAck(duplicates=plan.duplicates)
            with self._store.transaction() as db:
                Store.insert_reports(db, plan.rows)
                if plan.replacing:
                    Store.replace_reports(db, plan.replaced)
                for jid in plan.reactivated:
                    Store.set_state(db, jid, ACTIVE, "", wall)
                for jid in plan.finished:
                    Store.set_state(db, jid, FINISHED, REACHED_FINAL, wall)
            self.book.apply_reports(plan, wall, self._clock())
            self.reports += len(plan.rows)
        self.on_reports(plan)
        self.on_commit()
        return pb.ReportAck(accepted=accepted, duplicates=plan.duplicates)

    def finish(self, req: pb.FinishRequest) -> pb.FinishReply:
        check_job_id(req.job_id)
        with self._lock:
            reason = self.book.plan_finish(req.job_id, req.reason)
            if reason is None:
                return pb.FinishReply()
            wall = self._wall()
            with self._store.transaction() as db:
                Store.set_state(db, req.job_id, FINISHED, reason, wall)
            self.book.set_state(req.job_id, FINISHED, reason, wall)
        self.on_commit()
        return pb.FinishReply()

    def retire_silent(self) -> None:
        with self._lock:
            silent = self.book.silent(self._clock(), self.config.silence_s)
            if not silent:
                return
            reason, wall = f"no report for {self.config.silence_s:g}s", self._wall()
            with self._store.transaction() as db:
                for jid in silent:
                    Store.set_state(db, jid, SILENT, reason, wall)
            for jid in silent:
                self.book.set_state(jid, SILENT, reason, wall)

    # -- decisions ------------------------------------------------------------------------------
    def evaluate(self) -> Decision:
        """Rank the active jobs (no side effects besides the fit cache). The records are copied under the
        lock; curves are fitted outside it, so reports are not held up by fitting."""
        params = self.config.params
        unfitted = maif.Fit("prior")
        views: list[JobView] = []
        todo: list[tuple[int, int, tuple[str, list[float], list[float], float | None]]] = []
        with self._lock:
            for job in self.book.active():
                curve = job.curve
                fit = self._fits.get(job.job_id, curve.version)
                if fit is None:
                    todo.append((len(views), curve.version, (job.kind, list(curve.t), list(curve.m), curve.ref)))
                iter_s, net_s = job.timing.estimate()
                fb_on = self.config.fallback is not None
                comm = dict(job.timing.comm) if fb_on else {}
                phases = dict(job.timing.phases) if fb_on else {}
                views.append(
                    JobView(
                        job.job_id,
                        job.spec.name,
                        fit or unfitted,
                        iter_s,
                        net_s,
                        job.progress(),
                        job.flows(),
                        comm,
                        phases,
                    )
                )
            memory, fallback_state = dict(self._memory), self._fallback
        for i, version, (kind, t, m, ref) in todo:
            fit = fit_job(kind, t, m, ref, params.min_points)
            self._fits.put(views[i].job_id, version, fit)
            views[i] = dataclasses.replace(views[i], fit=fit)
        return decide(views, memory, params, self.config.interleaving, self.config.fallback, fallback_state)

    def decide(self, persist: bool = True) -> int | None:
        """Evaluate; if the intent changed, persist it as a new decision and hand it to the sink.

        Returns the new decision's sequence number, or None if nothing changed."""
        with self._decide_lock:
            started = time.perf_counter()
            if persist:
                self.retire_silent()
            decision = self.evaluate()
            intent = convert.intent_of(decision)
            key = convert.intent_key(intent)
            state = decision.fallback.state if decision.fallback is not None else None
            with self._lock:
                changed = persist and key != self._last_key
                if changed:
                    wall = self._wall()
                    with self._store.transaction() as db:
                        memory = convert.memory_json(decision.memory(), state)
                        seq = Store.insert_decision(db, wall, intent.SerializeToString(), memory)
                    self._last_key, self.latest_seq, self.latest_at = key, seq, wall
                self._memory = decision.memory()
                if state is not None:
                    self._fallback = state
                self._evaluated = (decision, self.latest_seq)
            self.on_evaluated(time.perf_counter() - started, changed)
            if not changed:
                return None
            if self.sink is not None:
                self.sink(seq, intent)
            return seq

    def on_applied(self, seq: int, generation: int) -> None:
        self._store.mark_applied(seq, generation, self._wall())
        with self._lock:
            self.applied_seq = max(self.applied_seq, seq)

    # -- introspection --------------------------------------------------------------------------
    def explain(self, job_id: int) -> pb.JobExplanation:
        check_job_id(job_id)
        with self._lock:
            job = self.book.require(job_id)
            if job.state == ACTIVE and self._evaluated is not None:
                decision, seq = self._evaluated
                job_decision = decision.jobs.get(job_id)
                if job_decision is not None:
                    return explain.ranked(job_decision, len(decision.jobs), self.config.params, seq, decision.applies)
            return explain.unranked(job, self.latest_seq)

    def status(self) -> pb.StatusReply:
        with self._lock:
            return pb.StatusReply(
                jobs=[self.explain(j) for j in sorted(self.book.jobs)],
                decision=self.latest_seq,
                applied_decision=self.applied_seq,
                controller_error=self.controller_error(),
                reports=self.reports,
                fallback=explain.fallback_status(self._fallback if self.config.fallback is not None else None),
            )

    def latest_evaluation(self) -> Decision | None:
        """The latest evaluation's ranking (applied or, under the fallback, held back); None before the first."""
        with self._lock:
            return self._evaluated[0] if self._evaluated is not None else None

    def job_state(self, job_id: int) -> str | None:
        with self._lock:
            job = self.book.get(job_id)
            return job.state if job else None

    def jobs(self) -> list[pb.JobInfo]:
        with self._lock:
            return [convert.job_info(job) for _, job in sorted(self.book.jobs.items())]

    def decisions(self, after: int = 0, limit: int = 1000) -> list[pb.DecisionRecord]:
        """Decisions with ``seq > after``, oldest first, at most ``limit`` (1..10000)."""
        if not 1 <= limit <= 10_000:
            raise InvalidRequest(f"limit={limit} out of range 1..10000")
        return [convert.decision_record(r) for r in self._store.decisions(after, limit)]
