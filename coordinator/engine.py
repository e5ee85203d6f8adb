"""The coordinator's state machine: validates and commits agent requests, keeps per-job learning curves
in memory, and turns them into MAIF decisions (mlfc/policy/maif.py) sent to the controller.

Threads: gRPC handlers call ``register``/``report``/``finish`` (serialised by one lock, each a single
SQLite transaction); a decision thread runs ``decide`` whenever a commit happened (coalescing bursts)
and every ``tick_s`` to retire silent jobs.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc
import numpy as np

from mlfc.policy import maif
from mlfc.proto import coordinator_pb2 as pb
from mlfc.proto import intent_pb2

from .store import JobRow, Store
from .validate import (
    MAX_BATCH,
    RequestError,
    check_instance,
    check_job_id,
    check_report_numbers,
    check_spec,
    invalid,
    metric_kind,
)

log = logging.getLogger(__name__)

ACTIVE, FINISHED, SILENT = "active", "finished", "silent"
_EWMA = 0.2  # weight of the newest iteration time: reacts within ~5 iterations, smooths jitter


@dataclass(frozen=True, slots=True)
class EngineConfig:
    params: maif.MaifParams = field(default_factory=maif.MaifParams)
    silence_s: float = 60.0  # an active job with no report for this long is retired as silent
    tick_s: float = 1.0  # periodic re-evaluation (silence), even without reports
    min_gap_s: float = 0.005  # minimum spacing of decisions: coalesces report bursts
    history: int = 2048  # metric points per job kept in memory (older ones are thinned)
    interleaving: bool = False  # sets Intent.interleaving for jobs without their own class


@dataclass(slots=True)
class _Job:
    spec: pb.JobSpec
    kind: str
    instance: str
    state: str
    reason: str
    registered_at: float
    last_seen: float  # monotonic
    ranks: frozenset[int] = frozenset()
    last_iter: dict[int, int] = field(default_factory=dict)
    last_stamp: dict[int, tuple[int, float]] = field(default_factory=dict)  # worker -> (iteration, agent time)
    t: list[float] = field(default_factory=list)
    m: list[float] = field(default_factory=list)
    ref: float | None = None  # first metric: the reference loss of to_quality
    iter_s: float = math.nan
    net_s: float = math.nan
    wall_iter_s: float = math.nan
    version: int = 0  # bumps with every metric point: refit only when it changed

    def row(self, now: float) -> JobRow:
        return JobRow(
            self.spec.job_id,
            self.spec.SerializeToString(),
            self.instance,
            self.state,
            self.reason,
            self.registered_at,
            now,
        )

    def add_metric(self, iteration: int, metric: float, cap: int) -> None:
        if self.ref is None:
            self.ref = metric
        self.t.append(float(iteration))
        self.m.append(metric)
        self.version += 1
        if len(self.t) > cap:  # thin the older half, keep the recent half intact
            half = cap // 2
            self.t = self.t[:-half:2] + self.t[-half:]
            self.m = self.m[:-half:2] + self.m[-half:]

    def add_timing(self, compute_s: float, comm_s: float) -> None:
        if compute_s <= 0 and comm_s <= 0:
            return
        it = compute_s + comm_s
        self.iter_s = it if math.isnan(self.iter_s) else (1 - _EWMA) * self.iter_s + _EWMA * it
        self.net_s = comm_s if math.isnan(self.net_s) else (1 - _EWMA) * self.net_s + _EWMA * comm_s

    def add_stamp(self, worker: int, iteration: int, stamp: float) -> None:
        # Wall-clock iteration time from the agents' timestamps, for jobs that report no timings.
        prev = self.last_stamp.get(worker)
        self.last_stamp[worker] = (iteration, stamp)
        if prev is None or stamp <= 0 or prev[1] <= 0 or iteration <= prev[0] or stamp <= prev[1]:
            return
        dt = (stamp - prev[1]) / (iteration - prev[0])
        w = self.wall_iter_s
        self.wall_iter_s = dt if math.isnan(w) else (1 - _EWMA) * w + _EWMA * dt

    def timing(self) -> tuple[float, float]:
        """(iteration seconds, network seconds per iteration); nan when unknown."""
        if not math.isnan(self.iter_s):
            return self.iter_s, self.net_s
        return self.wall_iter_s, math.nan

    def flows(self) -> list[intent_pb2.Flow]:
        return [f for w in self.spec.workers for f in w.flows]


@dataclass(slots=True)
class Evaluation:
    """One MAIF evaluation: the intent it implies and an explanation per job."""

    intent: intent_pb2.Intent
    memory: dict[int, dict]
    explanations: dict[int, pb.JobExplanation]


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
        self._lock = threading.RLock()  # job state + store writes
        self._decide_lock = threading.Lock()
        self._cv = threading.Condition()
        self._dirty = False
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._jobs: dict[int, _Job] = {}
        self._fits: dict[int, tuple[int, maif.Fit]] = {}
        self._memory: dict[int, dict] = {}  # ranker memory: rank, priority, plateau, window per job
        self._explanations: dict[int, pb.JobExplanation] = {}
        self._last_jobs: bytes | None = None  # serialized jobs of the latest decision
        self.latest_seq = 0
        self.applied_seq = 0
        self.reports = 0
        self.sink: Callable[[int, intent_pb2.Intent], None] | None = None
        self.controller_error: Callable[[], str] = lambda: ""
        self._load()

    # -- recovery -------------------------------------------------------------------------------
    def _load(self) -> None:
        now = self._clock()
        for row in self._store.jobs():
            spec = pb.JobSpec.FromString(row.spec)
            job = _Job(
                spec,
                metric_kind(spec.metric),
                row.instance,
                row.state,
                row.reason,
                row.registered_at,
                now,
                frozenset(w.rank for w in spec.workers),
            )
            # The silence clock restarts: agents were buffering while we were down.
            job.last_iter = self._store.worker_progress(row.job_id)
            for it, metric in self._store.metric_history(row.job_id, self.config.history):
                job.add_metric(it, metric, self.config.history)
            for compute_s, comm_s in self._store.timing_history(row.job_id, 64):
                job.add_timing(compute_s, comm_s)
            self._jobs[row.job_id] = job
        self.reports = self._store.report_count()
        latest = self._store.latest_decision()
        if latest is not None:
            self.latest_seq = latest.seq
            self._memory = {int(k): v for k, v in json.loads(latest.memory).items()}
            self._last_jobs = _jobs_key(intent_pb2.Intent.FromString(latest.intent))
        applied = self._store.latest_applied()
        self.applied_seq = applied.seq if applied else 0

    def latest_decision(self) -> tuple[int, intent_pb2.Intent] | None:
        row = self._store.latest_decision()
        return (row.seq, intent_pb2.Intent.FromString(row.intent)) if row else None

    # -- requests -------------------------------------------------------------------------------
    def register(self, req: pb.RegisterRequest) -> pb.RegisterReply:
        if not req.HasField("job"):
            raise invalid("job is missing")
        spec = req.job
        check_spec(spec)
        check_instance(req.instance)
        kind = metric_kind(spec.metric)
        jid = spec.job_id
        with self._lock:
            wall, mono = self._wall(), self._clock()
            job = self._jobs.get(jid)
            resumed = False
            fresh = job is None
            if job is not None and job.state == FINISHED:
                if not req.replace:
                    raise RequestError(
                        grpc.StatusCode.ALREADY_EXISTS,
                        f"job {jid} is already registered and finished ({job.reason}); "
                        "register with replace=true to reuse the id (its history is deleted)",
                    )
                fresh = True
            elif job is not None:
                if job.instance != req.instance and not req.replace:
                    raise RequestError(
                        grpc.StatusCode.ALREADY_EXISTS,
                        f"duplicate registration: job {jid} is already registered by agent instance "
                        f"{job.instance!r}; register with replace=true to take it over",
                    )
                if kind != job.kind and job.t:
                    raise invalid(f"job.metric: job {jid} reports {job.kind}; cannot change it to {kind}")
                resumed = True
            ranks = frozenset(w.rank for w in spec.workers)
            if fresh:
                new = _Job(spec, kind, req.instance, ACTIVE, "", wall, mono, ranks)
            else:
                assert job is not None
                new = _Job(
                    spec,
                    kind,
                    req.instance,
                    ACTIVE,
                    "",
                    job.registered_at,
                    mono,
                    ranks,
                    job.last_iter,
                    job.last_stamp,
                    job.t,
                    job.m,
                    job.ref,
                    job.iter_s,
                    job.net_s,
                    job.wall_iter_s,
                    job.version,
                )
            with self._store.transaction() as db:
                if fresh and job is not None:
                    Store.delete_reports(db, jid)
                Store.put_job(db, new.row(wall))
            self._jobs[jid] = new
            if fresh:
                self._fits.pop(jid, None)
            progress = [
                pb.WorkerProgress(rank=w, has_reports=True, last_iteration=i) for w, i in sorted(new.last_iter.items())
            ]
        self._poke()
        return pb.RegisterReply(resumed=resumed, workers=progress)

    def report(self, batch: pb.ReportBatch) -> pb.ReportAck:
        n = len(batch.reports)
        if n == 0:
            return pb.ReportAck()
        if n > MAX_BATCH:
            raise invalid(f"batch of {n} reports exceeds the limit of {MAX_BATCH}; split it")
        with self._lock:
            wall = self._wall()
            scratch: dict[tuple[int, int], int] = {}
            rows = []
            dups = 0
            for i, r in enumerate(batch.reports):
                where = f"report {i} (job {r.job_id} worker {r.worker} iteration {r.iteration})"
                job = self._jobs.get(r.job_id)
                if job is None:
                    raise RequestError(grpc.StatusCode.NOT_FOUND, f"{where}: unknown job {r.job_id}; register it first")
                if job.state == FINISHED:
                    raise RequestError(
                        grpc.StatusCode.FAILED_PRECONDITION, f"{where}: job {r.job_id} has finished ({job.reason})"
                    )
                if job.ranks and r.worker not in job.ranks:
                    raise invalid(
                        f"{where}: worker {r.worker} is not a registered worker of job {r.job_id} "
                        f"(ranks {sorted(job.ranks)})"
                    )
                metric = check_report_numbers(r, job.kind, where)
                key = (r.job_id, r.worker)
                last = scratch.get(key, job.last_iter.get(r.worker, -1))
                row = (
                    r.job_id,
                    r.worker,
                    r.iteration,
                    metric,
                    r.compute_seconds,
                    r.comm_seconds,
                    r.bytes,
                    r.timestamp,
                    wall,
                )
                if r.iteration <= last:
                    stored = None if key in scratch else self._store.report(*row[:3])
                    if stored is not None and tuple(stored[3:7]) == row[3:7]:
                        dups += 1  # a re-send after a lost acknowledgement
                        continue
                    if stored is not None:
                        raise invalid(f"{where}: iteration {r.iteration} was already reported with different values")
                    raise invalid(f"{where}: iteration goes backwards (worker {r.worker} last reported {last})")
                scratch[key] = r.iteration
                rows.append(row)
            if not rows:
                return pb.ReportAck(duplicates=dups)
            touched = {jid for jid, _ in scratch}
            finished = []
            for jid in touched:
                job = self._jobs[jid]
                final = job.spec.final_iteration
                if final:
                    workers = job.ranks or {w for (j, w) in scratch if j == jid} | set(job.last_iter)
                    if all(scratch.get((jid, w), job.last_iter.get(w, -1)) >= final for w in workers):
                        finished.append(jid)
            with self._store.transaction() as db:
                Store.insert_reports(db, rows)
                for jid in touched:
                    if self._jobs[jid].state == SILENT:
                        Store.set_state(db, jid, ACTIVE, "", wall)
                for jid in finished:
                    Store.set_state(db, jid, FINISHED, "reached final_iteration", wall)
            # Committed: mirror into memory.
            mono = self._clock()
            cap = self.config.history
            for jid, w, it, metric, comp, comm, _b, stamp, _ in rows:
                job = self._jobs[jid]
                job.last_iter[w] = it
                if metric is not None:
                    job.add_metric(it, metric, cap)
                job.add_timing(comp, comm)
                job.add_stamp(w, it, stamp)
            for jid in touched:
                job = self._jobs[jid]
                job.last_seen = mono
                if job.state == SILENT:
                    job.state, job.reason = ACTIVE, ""
            for jid in finished:
                self._jobs[jid].state, self._jobs[jid].reason = FINISHED, "reached final_iteration"
            self.reports += len(rows)
        self._poke()
        return pb.ReportAck(accepted=len(rows), duplicates=dups)

    def finish(self, req: pb.FinishRequest) -> pb.FinishReply:
        check_job_id(req.job_id)
        if len(req.reason) > 256:
            raise invalid(f"reason is {len(req.reason)} characters; at most 256")
        with self._lock:
            job = self._jobs.get(req.job_id)
            if job is None:
                raise RequestError(grpc.StatusCode.NOT_FOUND, f"unknown job {req.job_id}")
            if job.state == FINISHED:
                return pb.FinishReply()
            reason = req.reason or "finished by agent"
            with self._store.transaction() as db:
                Store.set_state(db, req.job_id, FINISHED, reason, self._wall())
            job.state, job.reason = FINISHED, reason
        self._poke()
        return pb.FinishReply()

    # -- decisions ------------------------------------------------------------------------------
    def _retire_silent(self) -> None:
        now = self._clock()
        with self._lock:
            silent = [
                j
                for j, job in self._jobs.items()
                if job.state == ACTIVE and now - job.last_seen > self.config.silence_s
            ]
            if not silent:
                return
            reason = f"no report for {self.config.silence_s:g}s"
            with self._store.transaction() as db:
                for jid in silent:
                    Store.set_state(db, jid, SILENT, reason, self._wall())
            for jid in silent:
                self._jobs[jid].state, self._jobs[jid].reason = SILENT, reason

    def evaluate(self) -> Evaluation:
        """Rank the active jobs and build the intent (no side effects besides the fit cache)."""
        p = self.config.params
        with self._lock:
            snap = []
            for jid, job in sorted(self._jobs.items()):
                if job.state != ACTIVE:
                    continue
                cached = self._fits.get(jid)
                arrays = None if cached and cached[0] == job.version else (np.array(job.t), np.array(job.m))
                it_s, net_s = job.timing()
                snap.append(
                    (
                        jid,
                        job.kind,
                        job.ref,
                        job.version,
                        arrays,
                        it_s,
                        net_s,
                        dict(job.last_iter),
                        job.spec.name,
                        job.flows(),
                    )
                )
        fits: dict[int, maif.Fit] = {}
        scores: dict[int, maif.Score] = {}
        for jid, kind, ref, version, arrays, it_s, net_s, _, _, _ in snap:
            if arrays is None:
                fit = self._fits[jid][1]
            else:
                t, m = arrays
                q = maif.to_quality(kind, m, ref) if len(m) else m
                fit = maif.fit_arrays(t, q, p.min_points)
                self._fits[jid] = (version, fit)
            fits[jid] = fit
            scores[jid] = maif.score_job(fit, it_s, net_s, p)
        previous = {
            j: maif.Previous(m["rank"], m["priority"], m["plateau"]) for j, m in self._memory.items() if j in scores
        }
        ranks = maif.rank_jobs(scores, previous, p)
        intent = intent_pb2.Intent(interleaving=self.config.interleaving)
        memory: dict[int, dict] = {}
        explanations: dict[int, pb.JobExplanation] = {}
        for jid, _kind, _ref, _v, _a, it_s, net_s, workers, name, flows in snap:
            a = ranks[jid]
            prev_w = self._memory.get(jid, {}).get("window")
            window = maif.straggler_window(workers, a.priority, maif.Window(*prev_w) if prev_w else None, p)
            ji = intent.jobs.add(job_id=jid, priority=a.priority, flows=flows)
            reasons = list(a.reasons)
            if window is not None:
                ji.windows.add(first=window.first, last=window.last, priority=window.priority)
                lag = max(workers.values()) - min(workers.values())
                slow = min(workers, key=lambda w: workers[w])
                reasons.append(
                    f"straggler: worker {slow} lags {lag} iteration(s); iterations "
                    f"{window.first}..{window.last} boosted to class {window.priority}"
                )
            memory[jid] = {
                "rank": a.rank,
                "priority": a.priority,
                "plateau": a.plateau,
                "window": [window.first, window.last, window.priority] if window else None,
            }
            explanations[jid] = _explanation(
                jid, name, fits[jid], scores[jid], a, window, reasons, len(snap), it_s, net_s, p
            )
        return Evaluation(intent, memory, explanations)

    def decide(self, persist: bool = True) -> int | None:
        """Evaluate; if the intent changed, persist it as a new decision and hand it to the sink.

        Returns the new decision's sequence number, or None if nothing changed.
        """
        with self._decide_lock:
            if persist:
                self._retire_silent()
            ev = self.evaluate()
            key = _jobs_key(ev.intent)
            with self._lock:
                self._memory = ev.memory
                self._explanations = ev.explanations
                changed = key != self._last_jobs and persist
                if changed:
                    ev.intent.source = "mlfc-coordinator"
                    with self._store.transaction() as db:
                        seq = Store.insert_decision(
                            db, self._wall(), ev.intent.SerializeToString(), json.dumps(ev.memory)
                        )
                    self._last_jobs = key
                    self.latest_seq = seq
                for e in self._explanations.values():
                    e.decision = self.latest_seq
                if not changed:
                    return None
            if self.sink is not None:
                self.sink(seq, ev.intent)
            return seq

    def on_applied(self, seq: int, generation: int) -> None:
        self._store.mark_applied(seq, generation, self._wall())
        with self._lock:
            self.applied_seq = max(self.applied_seq, seq)

    # -- introspection --------------------------------------------------------------------------
    def explain(self, job_id: int) -> pb.JobExplanation:
        check_job_id(job_id)
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                raise RequestError(grpc.StatusCode.NOT_FOUND, f"unknown job {job_id}")
            e = self._explanations.get(job_id)
            if job.state == ACTIVE and e is not None:
                out = pb.JobExplanation()
                out.CopyFrom(e)
                return out
            text = f"job {job_id} {job.spec.name!r} ({job.kind}): {job.state}"
            if job.state != ACTIVE:
                text += f" ({job.reason}); not in the intent, its traffic falls back to the default class"
                return pb.JobExplanation(
                    job_id=job_id,
                    name=job.spec.name,
                    state=job.state,
                    reasons=[f"retired: {job.reason}"],
                    decision=self.latest_seq,
                    text=text,
                )
            return pb.JobExplanation(
                job_id=job_id,
                name=job.spec.name,
                state=job.state,
                reasons=["not evaluated yet"],
                text=text + "; not evaluated yet",
            )

    def status(self) -> pb.StatusReply:
        with self._lock:
            jobs = [self.explain(j) for j in sorted(self._jobs)]
            return pb.StatusReply(
                jobs=jobs,
                decision=self.latest_seq,
                applied_decision=self.applied_seq,
                controller_error=self.controller_error(),
                reports=self.reports,
            )

    def job_state(self, job_id: int) -> str | None:
        with self._lock:
            job = self._jobs.get(job_id)
            return job.state if job else None

    # -- decision thread ------------------------------------------------------------------------
    def _poke(self) -> None:
        with self._cv:
            self._dirty = True
            self._cv.notify_all()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="maif-decide", daemon=True)
        self._thread.start()
        self._poke()

    def stop(self) -> None:
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        last = -math.inf
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._dirty or self._stopping, self.config.tick_s)
                if self._stopping:
                    return
                self._dirty = False
            gap = last + self.config.min_gap_s - self._clock()
            if gap > 0:
                time.sleep(gap)
            try:
                self.decide()
            except Exception:  # keep deciding; the next report or tick retries
                log.exception("MAIF decision failed")
            last = self._clock()


def _jobs_key(intent: intent_pb2.Intent) -> bytes:
    """What identifies a decision: the jobs part of the intent, deterministically serialized."""
    return b"".join(j.SerializeToString(deterministic=True) for j in sorted(intent.jobs, key=lambda j: j.job_id))


def _explanation(
    jid: int,
    name: str,
    fit: maif.Fit,
    s: maif.Score,
    a: maif.Assignment,
    window: maif.Window | None,
    reasons: list[str],
    n: int,
    it_s: float,
    net_s: float,
    p: maif.MaifParams,
) -> pb.JobExplanation:
    e = pb.JobExplanation(
        job_id=jid,
        name=name,
        state=ACTIVE,
        fit=pb.CurveFit(
            model=fit.model,
            a=fit.a,
            b=fit.b,
            c=fit.c,
            r2=fit.r2,
            points=fit.points,
            last_iteration=fit.last_iteration,
            last_quality=fit.last_quality,
            t0=fit.t0,
        ),
        predicted_gain=s.gain,
        next_iterations=s.next_iters,
        network_seconds=s.network_s,
        score=a.score,
        rank=a.rank,
        priority=a.priority,
        reasons=reasons,
    )
    if window is not None:
        e.windows.add(first=window.first, last=window.last, priority=window.priority)
    timing = "unknown iteration time" if math.isnan(it_s) else f"{it_s:.3g}s/iteration"
    net = "network time unknown (whole iteration counted)" if math.isnan(net_s) else f"{net_s:.3g}s on the network"
    lines = [
        f"job {jid} {name!r}: active, rank {a.rank} of {n} -> class {a.priority}",
        f"  fit: {fit.describe()}; last iteration {fit.last_iteration}, quality {fit.last_quality:.4g}",
        f"  predicted gain: {s.gain:+.4g} over the next {s.next_iters:.3g} iterations "
        f"({p.horizon_s:g}s horizon, {timing}, {net})",
        f"  score: {a.score:.4g} quality per network second (network {s.network_s:.3g}s per horizon)",
    ]
    lines += [f"  - {r}" for r in reasons]
    e.text = "\n".join(lines)
    return e
