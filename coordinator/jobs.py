"""Job state: one record per registered job (spec, state, per-worker progress, learning curve, timing) and
the state machine of Register, Report, Finish and silence.

A transition comes in two steps: ``plan_*`` checks a request against the records and says what to write,
raising a domain error (coordinator/errors.py) with nothing changed if the request is refused; ``apply_*``
mirrors the plan into the records once the caller has committed it to the store. No locks, SQLite or gRPC
here: the engine serialises the calls and owns the transactions.

States: ``active`` (in the intent) -> ``finished`` (Finish, or every worker reported ``final_iteration``;
terminal until the id is registered again with ``replace``) or ``silent`` (no report for a while; the next
report makes it active again).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from mlfc.proto import coordinator_pb2 as pb
from mlfc.proto import intent_pb2

from .api import MAX_ITERATION_JUMP, MAX_REASON, MAX_REPORT_ITERATION
from .errors import AlreadyRegistered, InvalidRequest, JobFinished, UnknownJob
from .store import JobRow, ReportRow
from .validate import check_instance, check_report_numbers, check_spec, metric_kind

ACTIVE, FINISHED, SILENT = "active", "finished", "silent"
EWMA = 0.2  # weight of the newest iteration time: reacts within ~5 iterations, smooths jitter
REACHED_FINAL = "reached final_iteration"
COMM_HISTORY = 64  # iterations of communication time kept per job (FallbackParams.history may not exceed it)


@dataclass(slots=True)
class Curve:
    """A job's metric history in iteration order of arrival; beyond ``cap`` points the older half is thinned."""

    t: list[float] = field(default_factory=list)
    m: list[float] = field(default_factory=list)
    ref: float | None = None  # the first metric: the reference loss of maif.to_quality
    version: int = 0  # bumps with every point: a fit is redone only when it changed

    def add(self, iteration: int, metric: float, cap: int) -> None:
        if self.ref is None:
            self.ref = metric
        self.t.append(float(iteration))
        self.m.append(metric)
        self.version += 1
        if len(self.t) > cap:  # thin the older half, keep the recent half intact
            half = cap // 2
            self.t = self.t[:-half:2] + self.t[-half:]
            self.m = self.m[:-half:2] + self.m[-half:]


@dataclass(slots=True)
class Timing:
    """Iteration and network time per iteration (EWMAs of the reported times, or of the agents' clocks)."""

    iter_s: float = math.nan
    net_s: float = math.nan
    wall_iter_s: float = math.nan
    stamps: dict[int, tuple[int, float]] = field(default_factory=dict)  # worker -> (iteration, agent time)
    # iteration -> communication seconds of its slowest worker, the latest COMM_HISTORY iterations (the
    # fallback's signal, mlfc/policy/fallback.py)
    comm: dict[int, float] = field(default_factory=dict)
    # iteration -> (start, end) of that worker's communication, by the agent's clock (when it reports one)
    phases: dict[int, tuple[float, float]] = field(default_factory=dict)

    def add(self, compute_s: float, comm_s: float) -> None:
        if compute_s <= 0 and comm_s <= 0:
            return
        if self.iter_s != self.iter_s:  # nan: the first one (inline: this runs for every report)
            self.iter_s, self.net_s = compute_s + comm_s, comm_s
        else:
            self.iter_s = (1 - EWMA) * self.iter_s + EWMA * (compute_s + comm_s)
            self.net_s = (1 - EWMA) * self.net_s + EWMA * comm_s

    def add_comm(self, iteration: int, comm_s: float, end: float = 0.0) -> None:
        """``end``: the agent's clock when the iteration ended (the report's timestamp), 0 if unknown."""
        if comm_s <= 0:
            return
        comm = self.comm
        if comm_s > comm.get(iteration, 0.0):
            comm[iteration] = comm_s
            if end > 0:
                self.phases[iteration] = (end - comm_s, end)
        if len(comm) > COMM_HISTORY:
            oldest = min(comm)
            del comm[oldest]
            self.phases.pop(oldest, None)

    def add_stamp(self, worker: int, iteration: int, stamp: float) -> None:
        # Wall-clock iteration time from the agents' timestamps, for jobs that report no timings.
        prev = self.stamps.get(worker)
        self.stamps[worker] = (iteration, stamp)
        if prev is None or stamp <= 0 or prev[1] <= 0 or iteration <= prev[0] or stamp <= prev[1]:
            return
        dt = (stamp - prev[1]) / (iteration - prev[0])
        w = self.wall_iter_s
        self.wall_iter_s = dt if math.isnan(w) else (1 - EWMA) * w + EWMA * dt

    def estimate(self) -> tuple[float, float]:
        """(iteration seconds, network seconds per iteration); nan when unknown."""
        if not math.isnan(self.iter_s):
            return self.iter_s, self.net_s
        return self.wall_iter_s, math.nan


@dataclass(slots=True)
class WorkerTally:
    last: int  # iteration of the worker's latest accepted report: its progress
    highest: int  # highest iteration stored for it
    reports: int = 0  # reports committed for it


@dataclass(slots=True)
class JobRecord:
    spec: pb.JobSpec
    kind: str  # accuracy or loss
    instance: str  # the agent instance that registered it
    state: str
    reason: str
    registered_at: float  # wall clock
    changed_at: float  # wall clock of the last state change
    last_seen: float  # monotonic: the last registration or accepted report (the silence clock)
    workers: dict[int, WorkerTally] = field(default_factory=dict)
    curve: Curve = field(default_factory=Curve)
    timing: Timing = field(default_factory=Timing)
    ranks: frozenset[int] = field(init=False)  # the registered workers (empty: any)

    def __post_init__(self) -> None:
        self.ranks = frozenset(w.rank for w in self.spec.workers)

    @property
    def job_id(self) -> int:
        return self.spec.job_id

    def progress(self) -> dict[int, int]:
        """{worker: iteration of its latest accepted report}."""
        return {w: t.last for w, t in self.workers.items()}

    def flows(self) -> tuple[intent_pb2.Flow, ...]:
        return tuple(f for w in self.spec.workers for f in w.flows)

    def row(self) -> JobRow:
        return JobRow(
            self.job_id,
            self.spec.SerializeToString(),
            self.instance,
            self.state,
            self.reason,
            self.registered_at,
            self.changed_at,
        )


@dataclass(frozen=True, slots=True)
class Registration:
    record: JobRecord
    resumed: bool  # the job was registered already (same instance, or a takeover)
    drop_history: bool  # a finished job's id is reused: its reports are deleted


@dataclass(slots=True)
class ReportPlan:
    accepted: dict[tuple[int, int, int], ReportRow] = field(default_factory=dict)  # in order of arrival
    replacing: set[tuple[int, int, int]] = field(default_factory=set)  # of stored reports the worker superseded
    duplicates: int = 0  # identical re-sends of committed reports
    touched: set[int] = field(default_factory=set)  # jobs with accepted reports
    reactivated: list[int] = field(default_factory=list)  # silent jobs reporting again: active again
    finished: list[int] = field(default_factory=list)  # jobs whose every worker reached final_iteration

    @property
    def rows(self) -> list[ReportRow]:
        """New reports, to insert."""
        return [r for k, r in self.accepted.items() if k not in self.replacing]

    @property
    def replaced(self) -> list[ReportRow]:
        """Reports that replace stored ones."""
        return [r for k, r in self.accepted.items() if k in self.replacing]


class _Where:
    """Names a report in an error message; formatted only when one is raised (this runs for every report)."""

    __slots__ = ("i", "r")

    def __init__(self, i: int, r: pb.IterationReport) -> None:
        self.i, self.r = i, r

    def __str__(self) -> str:
        r = self.r
        return f"report {self.i} (job {r.job_id} worker {r.worker} iteration {r.iteration})"


class JobBook:
    """The records of every registered job, and the transitions between their states."""

    def __init__(self, history: int = 2048) -> None:
        self.history = history  # metric points kept per job
        self.jobs: dict[int, JobRecord] = {}

    def get(self, job_id: int) -> JobRecord | None:
        return self.jobs.get(job_id)

    def require(self, job_id: int) -> JobRecord:
        job = self.jobs.get(job_id)
        if job is None:
            raise UnknownJob(f"unknown job {job_id}")
        return job

    def active(self) -> list[JobRecord]:
        return [job for _, job in sorted(self.jobs.items()) if job.state == ACTIVE]

    def load(self, job: JobRecord) -> None:
        self.jobs[job.job_id] = job

    # -- Register -----------------------------------------------------------------------------------
    def plan_register(self, req: pb.RegisterRequest, wall: float, mono: float) -> Registration:
        if not req.HasField("job"):
            raise InvalidRequest("job is missing")
        spec = req.job
        check_spec(spec)
        check_instance(req.instance)
        kind = metric_kind(spec.metric)
        jid = spec.job_id
        job = self.jobs.get(jid)
        if job is None or job.state == FINISHED:
            if job is not None and not req.replace:
                raise AlreadyRegistered(
                    f"job {jid} is already registered and finished ({job.reason}); "
                    "register with replace=true to reuse the id (its history is deleted)"
                )
            new = JobRecord(spec, kind, req.instance, ACTIVE, "", registered_at=wall, changed_at=wall, last_seen=mono)
            return Registration(new, resumed=False, drop_history=job is not None)
        if job.instance != req.instance and not req.replace:
            raise AlreadyRegistered(
                f"duplicate registration: job {jid} is already registered by agent instance "
                f"{job.instance!r}; register with replace=true to take it over"
            )
        if kind != job.kind and job.curve.t:
            raise InvalidRequest(f"job.metric: job {jid} reports {job.kind}; cannot change it to {kind}")
        # The same instance again, or a takeover: the new spec, active, the history kept.
        new = dataclasses.replace(
            job, spec=spec, kind=kind, instance=req.instance, state=ACTIVE, reason="", changed_at=wall, last_seen=mono
        )
        return Registration(new, resumed=True, drop_history=False)

    def apply_register(self, reg: Registration) -> None:
        self.jobs[reg.record.job_id] = reg.record

    # -- Report -------------------------------------------------------------------------------------
    def plan_reports(
        self,
        reports: Sequence[pb.IterationReport],
        wall: float,
        stored: Callable[[int, int, int], ReportRow | None],
    ) -> ReportPlan:
        """Check a batch (all or nothing); ``stored(job, worker, iteration)`` looks up a committed report.

        Reports of a worker normally come in iteration order, but one below the worker's latest that was not
        reported before is accepted too (late), and the worker's progress follows the latest accepted report:
        so one wrong iteration, even inside the bounds, cannot make the coordinator refuse the worker's real
        reports after it. A report of an iteration above the worker's latest replaces a stored one with other
        values (a wrong report that the worker's later, lower reports superseded)."""
        plan = ReportPlan()
        accepted, jobs = plan.accepted, self.jobs
        latest: dict[tuple[int, int], int] = {}  # (job, worker) -> latest iteration, this batch included
        highest: dict[tuple[int, int], int] = {}  # (job, worker) -> highest iteration stored, this batch included
        for i, report in enumerate(reports):
            # locals: protobuf attributes cost, per report
            jid, worker, it = report.job_id, report.worker, report.iteration
            where = _Where(i, report)
            job = jobs.get(jid)
            if job is None:
                raise UnknownJob(f"{where}: unknown job {jid}; register it first")
            if job.state == FINISHED:
                raise JobFinished(f"{where}: job {jid} has finished ({job.reason})")
            ranks = job.ranks
            if ranks and worker not in ranks:
                raise InvalidRequest(
                    f"{where}: worker {worker} is not a registered worker of job {jid} (ranks {sorted(ranks)})"
                )
            metric = check_report_numbers(report, job.kind, where)
            key, row_key = (jid, worker), (jid, worker, it)
            tally = job.workers.get(worker)
            last = latest.get(key, tally.last if tally else None)
            if last is None or it - last > MAX_ITERATION_JUMP or it > MAX_REPORT_ITERATION or job.spec.final_iteration:
                self._check_iteration(job, report, where, last, latest)
            # recv_time: the rows of a batch 1 us apart, so the store keeps their order (the latest report)
            row = ReportRow(jid, worker, it, metric, report.compute_seconds, report.comm_seconds, report.bytes,
                            report.timestamp, wall + i * 1e-6)  # fmt: skip
            top = highest.get(key, tally.highest if tally else -1)
            prior = accepted.get(row_key)
            if prior is None and it <= top:
                prior = stored(jid, worker, it)
            if prior is not None:
                if prior.same_values(row):
                    plan.duplicates += 1  # a re-send after a lost acknowledgement
                    continue
                if last is None or it <= last:
                    raise InvalidRequest(f"{where}: iteration {it} was already reported with different values")
                if row_key in accepted:
                    del accepted[row_key]  # replaces one of this batch: the later counts, in arrival order
                else:
                    plan.replacing.add(row_key)
            accepted[row_key] = row
            latest[key] = it
            if it > top:
                highest[key] = it
        plan.touched = {jid for jid, _ in latest}
        plan.reactivated = [jid for jid in sorted(plan.touched) if self.jobs[jid].state == SILENT]
        for jid in sorted(plan.touched):
            job = self.jobs[jid]
            final = job.spec.final_iteration
            if not final:
                continue
            workers = job.ranks or {worker for (j, worker) in latest if j == jid} | set(job.workers)
            progress = job.progress()
            if all(latest.get((jid, worker), progress.get(worker, -1)) >= final for worker in workers):
                plan.finished.append(jid)
        return plan

    @staticmethod
    def _check_iteration(
        job: JobRecord, r: pb.IterationReport, where: _Where, last: int | None, latest: dict[tuple[int, int], int]
    ) -> None:
        """The bounds of coordinator/api.py, and final_iteration."""
        it = r.iteration
        if it > MAX_REPORT_ITERATION:
            raise InvalidRequest(
                f"{where}: iteration {it} is above the maximum {MAX_REPORT_ITERATION} "
                "(a negative number sent as unsigned?)"
            )
        final = job.spec.final_iteration
        if final and it > final:
            raise InvalidRequest(f"{where}: iteration {it} is past the job's end: its final_iteration is {final}")
        if last is not None:
            ref, whose = last, f"worker {r.worker}'s latest report"
        else:  # the worker's first report: measured from the job's furthest worker, if any
            others = [t.last for t in job.workers.values()] + [v for (j, _), v in latest.items() if j == job.job_id]
            if not others:
                return  # the job's very first report: a job may start anywhere (e.g. from a checkpoint)
            ref, whose = max(others), "the job's furthest worker"
        if it - ref > MAX_ITERATION_JUMP:
            raise InvalidRequest(
                f"{where}: iteration {it} jumps {it - ref} iterations ahead of {whose} ({ref}); "
                f"at most {MAX_ITERATION_JUMP} per report"
            )

    def apply_reports(self, plan: ReportPlan, wall: float, mono: float) -> None:
        jobs, history, replacing = self.jobs, self.history, plan.replacing
        for k3, row in plan.accepted.items():
            job = jobs[row.job_id]
            it = row.iteration
            tally = job.workers.get(row.worker)
            if tally is None:
                tally = job.workers[row.worker] = WorkerTally(it, it)
            tally.last = it
            if it > tally.highest:
                tally.highest = it
            if k3 not in replacing:
                tally.reports += 1
            if row.metric is not None:  # (a replaced report's old point stays in memory until a restart)
                job.curve.add(it, row.metric, history)
            job.timing.add(row.compute_s, row.comm_s)
            job.timing.add_comm(it, row.comm_s, row.agent_time)
            job.timing.add_stamp(row.worker, it, row.agent_time)
        for jid in plan.touched:
            self.jobs[jid].last_seen = mono
        for jid in plan.reactivated:
            self.set_state(jid, ACTIVE, "", wall)
        for jid in plan.finished:
            self.set_state(jid, FINISHED, REACHED_FINAL, wall)

    # -- Finish and silence -------------------------------------------------------------------------
    def plan_finish(self, job_id: int, reason: str) -> str | None:
        """The reason to record, or None if the job has finished already (Finish is idempotent)."""
        if len(reason) > MAX_REASON:
            raise InvalidRequest(f"reason is {len(reason)} characters; at most {MAX_REASON}")
        job = self.require(job_id)
        return None if job.state == FINISHED else (reason or "finished by agent")

    def silent(self, now: float, silence_s: float) -> list[int]:
        """Active jobs with no registration or report for more than ``silence_s`` (monotonic ``now``)."""
        return [
            jid for jid, job in sorted(self.jobs.items()) if job.state == ACTIVE and now - job.last_seen > silence_s
        ]

    def set_state(self, job_id: int, state: str, reason: str, wall: float) -> None:
        job = self.jobs[job_id]
        job.state, job.reason, job.changed_at = state, reason, wall
