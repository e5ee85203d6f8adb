"""The coordinator's gRPC API: authentication, validation (errors name the problem, state stays intact),
idempotent re-sends, retirement."""

from __future__ import annotations

import sqlite3

import grpc
import pytest
from coord_helpers import (
    MD,
    TOKEN_HEADER,
    FakeClock,
    decided,
    fast_config,
    register,
    report,
    spec,
    stub_for,
    wait_until,
)

from mlfc.proto import coordinator_pb2 as pb
from mlfc.proto import intent_pb2


def _rows(coord) -> list[tuple]:  # type: ignore[no-untyped-def]
    with sqlite3.connect(coord.store.path) as db:
        return db.execute("SELECT * FROM reports ORDER BY job_id, worker, iteration").fetchall()


def _jobs(coord) -> list[tuple]:  # type: ignore[no-untyped-def]
    with sqlite3.connect(coord.store.path) as db:
        return db.execute("SELECT job_id, instance, state FROM jobs ORDER BY job_id").fetchall()


@pytest.fixture
def coord(make_coordinator):  # type: ignore[no-untyped-def]
    c = make_coordinator()
    stub = stub_for(c.address)
    register(stub, 1, workers=2)
    register(stub, 2, workers=1, metric=pb.LOSS)
    ack = stub.Report(pb.ReportBatch(reports=[report(1, i, 0.1 + 0.01 * i) for i in range(5)]), metadata=MD)
    assert ack.accepted == 5
    return c, stub


@pytest.mark.parametrize(
    ("metadata", "needle"),
    [((), "missing token"), (((TOKEN_HEADER, "nope"),), "wrong token"), ((("authorization", "x"),), "missing token")],
)
def test_auth_rejected_without_valid_token(coord, metadata, needle) -> None:  # type: ignore[no-untyped-def]
    c, stub = coord
    before = (_rows(c), _jobs(c))
    for call, req in (
        (stub.Register, pb.RegisterRequest(job=spec(3), instance="x")),
        (stub.Report, pb.ReportBatch(reports=[report(1, 10, 0.5)])),
        (stub.Finish, pb.FinishRequest(job_id=1)),
        (stub.Status, pb.StatusRequest()),
        (stub.Explain, pb.ExplainRequest(job_id=1)),
    ):
        with pytest.raises(grpc.RpcError) as e:
            call(req, metadata=metadata, timeout=5)
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert needle in e.value.details() and TOKEN_HEADER in e.value.details()
    assert (_rows(c), _jobs(c)) == before


BAD_REPORTS = [
    ([report(1, 10, float("nan"))], grpc.StatusCode.INVALID_ARGUMENT, "metric is nan"),
    ([report(1, 10, float("inf"))], grpc.StatusCode.INVALID_ARGUMENT, "metric is inf"),
    ([report(1, 10, 87.5)], grpc.StatusCode.INVALID_ARGUMENT, "accuracy 87.5 outside [0, 1]"),
    ([report(1, 10, 0.5, compute=-1)], grpc.StatusCode.INVALID_ARGUMENT, "compute_seconds=-1.0"),
    ([report(1, 10, 0.5, comm=float("nan"))], grpc.StatusCode.INVALID_ARGUMENT, "comm_seconds=nan"),
    ([report(1, 3, 0.9)], grpc.StatusCode.INVALID_ARGUMENT, "already reported with different values"),
    ([report(1, 7, 0.5), report(1, 7, 0.6)], grpc.StatusCode.INVALID_ARGUMENT, "already reported with different"),
    ([report(1, 4294967295, 0.5)], grpc.StatusCode.INVALID_ARGUMENT, "above the maximum 2147483647"),
    ([report(1, 1_000_005, 0.5)], grpc.StatusCode.INVALID_ARGUMENT, "jumps 1000001 iterations ahead"),
    # A worker's first report is measured from the job's furthest worker (worker 0 is at 4).
    ([report(1, 1_000_005, 0.5, worker=1)], grpc.StatusCode.INVALID_ARGUMENT, "ahead of the job's furthest worker"),
    ([report(1, 10, 0.5, worker=5)], grpc.StatusCode.INVALID_ARGUMENT, "worker 5 is not a registered worker"),
    ([report(99, 1, 0.5)], grpc.StatusCode.NOT_FOUND, "unknown job 99"),
    # One bad report spoils the whole batch: nothing of it is stored.
    (
        [report(1, 10 + i, 0.5) for i in range(50)] + [report(1, 100, float("nan"))],
        grpc.StatusCode.INVALID_ARGUMENT,
        "report 50 (job 1 worker 0 iteration 100)",
    ),
    ([report(1, 10 + i) for i in range(4097)], grpc.StatusCode.INVALID_ARGUMENT, "exceeds the limit of 4096"),
]


@pytest.mark.parametrize(("reports", "code", "needle"), BAD_REPORTS)
def test_bad_reports_rejected_and_state_intact(coord, reports, code, needle) -> None:  # type: ignore[no-untyped-def]
    c, stub = coord
    before = _rows(c)
    with pytest.raises(grpc.RpcError) as e:
        stub.Report(pb.ReportBatch(reports=reports), metadata=MD, timeout=5)
    assert e.value.code() == code
    assert needle in e.value.details()
    assert _rows(c) == before
    # The coordinator still works: the next valid report is accepted.
    assert stub.Report(pb.ReportBatch(reports=[report(1, 5, 0.2)]), metadata=MD).accepted == 1


def test_oversized_payload_rejected(coord) -> None:  # type: ignore[no-untyped-def]
    c, stub = coord
    before = (_rows(c), _jobs(c))
    big = spec(3)
    big.name = "x" * (5 * 1024 * 1024)
    with pytest.raises(grpc.RpcError) as e:
        stub.Register(pb.RegisterRequest(job=big, instance="a"), metadata=MD, timeout=10)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "larger than max" in e.value.details()
    assert (_rows(c), _jobs(c)) == before


def _flow_spec(src: str) -> pb.JobSpec:
    s = spec(3)
    s.workers[0].flows.append(intent_pb2.Flow(src=src))
    return s


def _dup_rank_spec() -> pb.JobSpec:
    s = spec(3, workers=2)
    s.workers[1].rank = 0
    return s


@pytest.mark.parametrize(
    ("request_", "code", "needle"),
    [
        (
            pb.RegisterRequest(job=spec(1), instance="agent-b"),
            grpc.StatusCode.ALREADY_EXISTS,
            "duplicate registration: job 1 is already registered by agent instance 'agent-a'",
        ),
        (pb.RegisterRequest(job=spec(0), instance="a"), grpc.StatusCode.INVALID_ARGUMENT, "job.job_id=0 out of range"),
        (pb.RegisterRequest(job=spec(70000), instance="a"), grpc.StatusCode.INVALID_ARGUMENT, "out of range 1..65535"),
        (pb.RegisterRequest(instance="a"), grpc.StatusCode.INVALID_ARGUMENT, "job is missing"),
        (pb.RegisterRequest(job=spec(3)), grpc.StatusCode.INVALID_ARGUMENT, "instance must be"),
        (
            pb.RegisterRequest(job=_flow_spec("10.0.0.300"), instance="a"),
            grpc.StatusCode.INVALID_ARGUMENT,
            "job.workers[0].flows[0].src='10.0.0.300'",
        ),
        (
            pb.RegisterRequest(job=_flow_spec("10.0.1.5/24"), instance="a"),
            grpc.StatusCode.INVALID_ARGUMENT,
            "host bits set",
        ),
        (
            pb.RegisterRequest(job=_dup_rank_spec(), instance="a"),
            grpc.StatusCode.INVALID_ARGUMENT,
            "job.workers[1].rank=0 is duplicated",
        ),
        (
            pb.RegisterRequest(job=spec(1, metric=pb.LOSS), instance="agent-a"),
            grpc.StatusCode.INVALID_ARGUMENT,
            "cannot change it to loss",
        ),
    ],
)
def test_bad_registrations_rejected(coord, request_, code, needle) -> None:  # type: ignore[no-untyped-def]
    c, stub = coord
    before = (_rows(c), _jobs(c))
    with pytest.raises(grpc.RpcError) as e:
        stub.Register(request_, metadata=MD, timeout=5)
    assert e.value.code() == code
    assert needle in e.value.details()
    assert (_rows(c), _jobs(c)) == before


def test_reregistration_same_instance_and_replace(coord) -> None:  # type: ignore[no-untyped-def]
    c, stub = coord
    again = register(stub, 1, workers=2, instance="agent-a")
    assert again.resumed
    assert [(w.rank, w.last_iteration) for w in again.workers] == [(0, 4)]
    taken = stub.Register(pb.RegisterRequest(job=spec(1, workers=2), instance="agent-b", replace=True), metadata=MD)
    assert taken.resumed
    assert (1, "agent-b", "active") in _jobs(c)
    assert len(_rows(c)) == 5  # history kept on takeover


def test_resent_reports_are_idempotent(coord) -> None:  # type: ignore[no-untyped-def]
    c, stub = coord
    batch = pb.ReportBatch(reports=[report(1, 3, 0.13), report(1, 4, 0.14), report(1, 5, 0.15)])
    ack = stub.Report(batch, metadata=MD)
    assert (ack.accepted, ack.duplicates) == (1, 2)  # 3 and 4 were committed before (lost-ack re-send)
    assert len(_rows(c)) == 6


def test_finish_retires_and_rejects_further_reports(coord, controller, make_coordinator) -> None:  # type: ignore[no-untyped-def]
    c, stub = coord
    stub.Finish(pb.FinishRequest(job_id=1, reason="done"), metadata=MD)
    stub.Finish(pb.FinishRequest(job_id=1), metadata=MD)  # idempotent
    with pytest.raises(grpc.RpcError) as e:
        stub.Report(pb.ReportBatch(reports=[report(1, 10, 0.5)]), metadata=MD)
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "has finished (done)" in e.value.details()
    with pytest.raises(grpc.RpcError) as e:
        stub.Finish(pb.FinishRequest(job_id=42), metadata=MD)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    ex = stub.Explain(pb.ExplainRequest(job_id=1), metadata=MD)
    assert ex.state == "finished" and "retired: done" in ex.reasons
    # Reusing the id of a finished job needs replace=true and starts a fresh history.
    with pytest.raises(grpc.RpcError) as e:
        register(stub, 1, workers=2)
    assert e.value.code() == grpc.StatusCode.ALREADY_EXISTS and "replace=true" in e.value.details()
    stub.Register(pb.RegisterRequest(job=spec(1, workers=2), instance="new", replace=True), metadata=MD)
    assert [r for r in _rows(c) if r[0] == 1] == []


def test_final_iteration_and_silence_retire_jobs(make_coordinator, controller) -> None:  # type: ignore[no-untyped-def]
    # The silence clock is the test's: a loaded machine cannot make a job fall silent before its time.
    clock = FakeClock()
    c = make_coordinator(controller=controller.address, config=fast_config(silence_s=60), clock=clock)
    stub = stub_for(c.address)
    register(stub, 1, workers=2, final_iteration=10)
    register(stub, 2)
    stub.Report(pb.ReportBatch(reports=[report(1, 10, 0.5, worker=0), report(2, 1, 0.1)]), metadata=MD)
    assert wait_until(lambda: decided(stub, controller, {1: 1, 2: 1}))
    assert controller.classes().keys() == {1, 2}
    stub.Report(pb.ReportBatch(reports=[report(1, 10, 0.5, worker=1)]), metadata=MD)  # last worker done
    assert c.engine.job_state(1) == "finished"
    assert wait_until(lambda: controller.classes().keys() == {2})
    # Job 2 goes silent, leaves the intent, and comes back with its next report.
    clock.advance(61)
    assert wait_until(lambda: c.engine.job_state(2) == "silent")
    assert wait_until(lambda: controller.classes() == {})
    stub.Report(pb.ReportBatch(reports=[report(2, 2, 0.2)]), metadata=MD)
    assert c.engine.job_state(2) == "active"
    assert wait_until(lambda: controller.classes().keys() == {2})


def test_one_bad_iteration_cannot_wedge_a_worker(coord) -> None:  # type: ignore[no-untyped-def]
    """Issue 16 item 1: -1 written as an unsigned 32-bit value (4294967295) used to be accepted, after which
    every real report of the worker was refused as going backwards."""
    c, stub = coord  # job 1: worker 0 reported iterations 0..4
    for bad, needle in (
        (4294967295, "iteration 4294967295 is above the maximum 2147483647"),
        (4 + 1_000_001, "jumps 1000001 iterations ahead of worker 0's latest report (4)"),
    ):
        with pytest.raises(grpc.RpcError) as e:
            stub.Report(pb.ReportBatch(reports=[report(1, bad, 0.5)]), metadata=MD, timeout=5)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and needle in e.value.details()
    # A wrong iteration inside the bounds is accepted, and still cannot block the worker's real reports:
    # they are accepted (late, below the wrong one) and the worker's progress follows them.
    wrong = 4 + 1_000_000
    assert stub.Report(pb.ReportBatch(reports=[report(1, wrong, 0.5)]), metadata=MD).accepted == 1
    ack = stub.Report(pb.ReportBatch(reports=[report(1, i, 0.1 + 0.01 * i) for i in range(5, 10)]), metadata=MD)
    assert (ack.accepted, ack.duplicates) == (5, 0)
    (job1,) = [j for j in c.engine.jobs() if j.job_id == 1]
    assert [(w.rank, w.last_iteration, w.reports) for w in job1.workers] == [(0, 9, 11)]
    assert stub.Report(pb.ReportBatch(reports=[report(1, 7, 0.1 + 0.07)]), metadata=MD).duplicates == 1
    # When the worker really gets to that iteration, its report replaces the wrong one.
    ack = stub.Report(
        pb.ReportBatch(reports=[report(1, i, 0.5) for i in range(10, 12)] + [report(1, wrong, 0.6)]), metadata=MD
    )
    assert ack.accepted == 3
    assert [r[3] for r in _rows(c) if r[:3] == (1, 0, wrong)] == [0.6]


def test_reports_beyond_final_iteration_are_refused(make_coordinator) -> None:  # type: ignore[no-untyped-def]
    c = make_coordinator()
    stub = stub_for(c.address)
    register(stub, 1, final_iteration=100)
    with pytest.raises(grpc.RpcError) as e:
        stub.Report(pb.ReportBatch(reports=[report(1, 101, 0.5)]), metadata=MD, timeout=5)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "final_iteration is 100" in e.value.details()
    assert c.engine.job_state(1) == "active"
