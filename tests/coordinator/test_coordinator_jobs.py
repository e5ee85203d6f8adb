"""Job state alone (coordinator/jobs.py): the Register/Report/Finish/silence state machine on plain records,
without SQLite, threads or gRPC. The store lookup of committed reports is a dict."""

from __future__ import annotations

import math

import pytest
from coord_helpers import report, spec

from mlfc.coordinator.errors import AlreadyRegistered, InvalidRequest, JobFinished, UnknownJob
from mlfc.coordinator.jobs import ACTIVE, FINISHED, SILENT, Curve, JobBook, Timing
from mlfc.coordinator.store import ReportRow
from mlfc.proto import coordinator_pb2 as pb


class Book:
    """A JobBook with a dict for the store: plan, 'commit', apply, as the engine does."""

    def __init__(self) -> None:
        self.book = JobBook(history=64)
        self.rows: dict[tuple[int, int, int], ReportRow] = {}
        self.wall = 1000.0
        self.mono = 0.0

    def register(self, job_id: int, workers: int = 1, instance: str = "a", replace: bool = False, **kw: object):  # type: ignore[no-untyped-def]
        req = pb.RegisterRequest(job=spec(job_id, workers, **kw), instance=instance, replace=replace)
        reg = self.book.plan_register(req, self.wall, self.mono)
        if reg.drop_history:
            self.rows = {k: v for k, v in self.rows.items() if k[0] != job_id}
        self.book.apply_register(reg)
        return reg

    def report(self, *reports: pb.IterationReport):  # type: ignore[no-untyped-def]
        plan = self.book.plan_reports(reports, self.wall, lambda j, w, i: self.rows.get((j, w, i)))
        for r in plan.rows:
            self.rows[(r.job_id, r.worker, r.iteration)] = r
        self.book.apply_reports(plan, self.wall, self.mono)
        return plan


def test_register_report_finish() -> None:
    b = Book()
    assert not b.register(1, workers=2).resumed
    plan = b.report(report(1, 0, 0.1), report(1, 1, 0.2), report(1, 0, worker=1))
    assert (len(plan.rows), plan.duplicates, plan.touched) == (3, 0, {1})
    job = b.book.jobs[1]
    assert job.progress() == {0: 1, 1: 0} and job.workers[0].reports == 2
    assert job.curve.t == [0.0, 1.0] and job.curve.ref == 0.1
    assert b.book.plan_finish(1, "") == "finished by agent"
    b.book.set_state(1, FINISHED, "done", b.wall)
    assert b.book.plan_finish(1, "again") is None  # idempotent
    with pytest.raises(JobFinished, match="has finished"):
        b.report(report(1, 5, 0.5))
    with pytest.raises(UnknownJob, match="unknown job 2"):
        b.book.plan_finish(2, "")


def test_a_refused_batch_changes_nothing() -> None:
    b = Book()
    b.register(1)
    b.report(report(1, 0, 0.1))
    before = (dict(b.rows), b.book.jobs[1].progress(), list(b.book.jobs[1].curve.m))
    with pytest.raises(InvalidRequest, match=r"report 2 .*metric is nan"):
        b.report(report(1, 1, 0.2), report(1, 2, 0.3), report(1, 3, math.nan))
    assert (dict(b.rows), b.book.jobs[1].progress(), list(b.book.jobs[1].curve.m)) == before


def test_resends_are_duplicates_and_changed_resends_refused() -> None:
    b = Book()
    b.register(1)
    b.report(report(1, 0, 0.1), report(1, 1, 0.2))
    plan = b.report(report(1, 1, 0.2), report(1, 2, 0.3))
    assert (len(plan.rows), plan.duplicates) == (1, 1)
    with pytest.raises(InvalidRequest, match="already reported with different values"):
        b.report(report(1, 1, 0.25))


def test_registration_rules() -> None:
    b = Book()
    b.register(1, workers=2)
    b.report(report(1, 0, 0.1))
    with pytest.raises(AlreadyRegistered, match="agent instance 'a'"):
        b.register(1, instance="b")
    taken = b.register(1, workers=2, instance="b", replace=True)
    assert taken.resumed and b.book.jobs[1].progress() == {0: 0}  # history kept on takeover
    with pytest.raises(InvalidRequest, match="cannot change it to loss"):
        b.register(1, instance="b", metric=pb.LOSS)
    b.book.set_state(1, FINISHED, "done", b.wall)
    with pytest.raises(AlreadyRegistered, match="replace=true"):
        b.register(1, instance="b")
    fresh = b.register(1, instance="c", replace=True)
    assert fresh.drop_history and not fresh.resumed and b.book.jobs[1].workers == {} and not b.rows


def test_final_iteration_finishes_when_every_worker_got_there() -> None:
    b = Book()
    b.register(1, workers=2, final_iteration=3)
    assert b.report(report(1, 3, 0.5, worker=0)).finished == []
    assert b.report(report(1, 3, 0.5, worker=1)).finished == [1]
    assert (b.book.jobs[1].state, b.book.jobs[1].reason) == (FINISHED, "reached final_iteration")


def test_silence_by_the_monotonic_clock_and_back() -> None:
    b = Book()
    b.register(1)
    b.register(2)
    b.mono = 30.0
    b.report(report(2, 0, 0.1))
    assert b.book.silent(now=60.0, silence_s=60.0) == []  # exactly 60 s is not more than 60 s
    assert b.book.silent(now=61.0, silence_s=60.0) == [1]
    b.book.set_state(1, SILENT, "quiet", b.wall)
    assert [j.job_id for j in b.book.active()] == [2]
    plan = b.report(report(1, 0, 0.3))
    assert plan.reactivated == [1] and b.book.jobs[1].state == ACTIVE and b.book.jobs[1].reason == ""


def test_curve_thins_the_older_half() -> None:
    c = Curve()
    for i in range(100):
        c.add(i, i / 100, cap=64)
    assert len(c.t) <= 64 and c.t[-32:] == [float(i) for i in range(68, 100)]
    assert c.ref == 0.0 and c.version == 100 and c.t == sorted(c.t)


def test_timing_prefers_reported_times_then_agent_clocks() -> None:
    t = Timing()
    assert all(math.isnan(x) for x in t.estimate())
    t.add_stamp(0, 1, 10.0)
    t.add_stamp(0, 3, 11.0)  # two iterations in one second
    assert t.estimate()[0] == pytest.approx(0.5) and math.isnan(t.estimate()[1])
    t.add(0.1, 0.05)
    assert t.estimate() == pytest.approx((0.15, 0.05))


def test_a_wrong_iteration_is_superseded_by_the_workers_real_ones() -> None:
    b = Book()
    b.register(1)
    b.report(report(1, 0, 0.1), report(1, 1, 0.2))
    wrong = 1 + 1_000_000  # inside the bounds
    plan = b.report(report(1, wrong, 0.9), report(1, 2, 0.3), report(1, 3, 0.4))
    assert len(plan.rows) == 3 and b.book.jobs[1].progress() == {0: 3}  # progress follows the latest report
    with pytest.raises(InvalidRequest, match="already reported with different values"):
        b.report(report(1, 2, 0.35))  # at or below the worker's progress: the usual rule
    plan = b.report(report(1, wrong, 0.5))  # the worker really got there: replaces the wrong report
    assert (plan.rows, [r.metric for r in plan.replaced]) == ([], [0.5])
    b.rows[(1, 0, wrong)] = plan.replaced[0]
    assert b.book.jobs[1].workers[0].reports == 5 and b.book.jobs[1].progress() == {0: wrong}
    # The same inside one batch: the later report of the iteration wins.
    b.register(2)
    plan = b.report(report(2, 0, 0.1), report(2, 10, 0.9), report(2, 1, 0.2), report(2, 10, 0.3))
    assert [(r.iteration, r.metric) for r in plan.rows] == [(0, 0.1), (1, 0.2), (10, 0.3)]  # arrival order
    assert b.book.jobs[2].progress() == {0: 10} and b.book.jobs[2].workers[0].reports == 3
