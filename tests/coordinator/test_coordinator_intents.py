"""Coordinator -> controller: MAIF decisions reach a (fake, in-process) IntentService."""

from __future__ import annotations

import math

import numpy as np
from coord_helpers import (
    MD,
    FakeController,
    decided,
    evaluated,
    fast_config,
    free_port,
    register,
    report,
    stub_for,
    wait_until,
)

from mlfc.proto import coordinator_pb2 as pb
from mlfc.proto import intent_pb2


def _curve_reports(job_id: int, metric, iterations: range, worker: int = 0) -> pb.ReportBatch:  # type: ignore[no-untyped-def]
    return pb.ReportBatch(reports=[report(job_id, i, float(metric(i)), worker=worker) for i in iterations])


def plateau(i: int) -> float:
    return 0.85 - 0.75 * math.exp(-0.08 * i)


def improving(i: int) -> float:
    return 0.95 - 0.9 * (i + 1) ** -0.35


def test_improving_job_takes_the_network_from_a_plateauing_one(make_coordinator, controller) -> None:  # type: ignore[no-untyped-def]
    c = make_coordinator(controller=controller.address)
    stub = stub_for(c.address)
    register(stub, 1)
    register(stub, 2)
    # Early on job 1 climbs fast and job 2 has no history: job 1 is served first.
    stub.Report(_curve_reports(1, plateau, range(0, 20)), metadata=MD)
    stub.Report(_curve_reports(2, improving, range(0, 2)), metadata=MD)
    # (Wait for the decision that used these reports: the one taken at registration ranks 1 above 2 too.)
    assert wait_until(lambda: decided(stub, controller, {1: 20, 2: 2}))
    assert controller.classes()[1] > controller.classes()[2]
    # Later job 1 saturates while job 2 keeps improving: job 2 overtakes.
    stub.Report(_curve_reports(1, plateau, range(20, 200)), metadata=MD)
    stub.Report(_curve_reports(2, improving, range(2, 200)), metadata=MD)
    assert wait_until(lambda: decided(stub, controller, {1: 200, 2: 200}))
    assert controller.classes() == {2: 6, 1: 2}
    ex = stub.Explain(pb.ExplainRequest(job_id=1), metadata=MD)
    assert ex.priority == 2 and any("plateaued" in r for r in ex.reasons)
    assert "fit:" in ex.text and "predicted gain" in ex.text
    ex2 = stub.Explain(pb.ExplainRequest(job_id=2), metadata=MD)
    assert ex2.rank == 1 and ex2.predicted_gain > 100 * ex.predicted_gain
    assert controller.latest().source == "mlfc-coordinator"
    # The controller's acknowledgement is recorded (just after the fake saw the intent).
    assert wait_until(lambda: (s := stub.Status(pb.StatusRequest(), metadata=MD)).applied_decision == s.decision > 0)


def test_straggler_gets_boosted_window(make_coordinator, controller) -> None:  # type: ignore[no-untyped-def]
    c = make_coordinator(controller=controller.address)
    stub = stub_for(c.address)
    spec2 = pb.JobSpec(
        job_id=1,
        workers=[
            pb.Worker(rank=0, flows=[intent_pb2.Flow(src="10.0.0.1", protocol=6)]),
            pb.Worker(rank=1, flows=[intent_pb2.Flow(src="10.0.0.2")]),
        ],
    )
    stub.Register(pb.RegisterRequest(job=spec2, instance="a"), metadata=MD)
    register(stub, 2)  # a second job with the better curve takes the top class (nothing to boost above it)
    stub.Report(_curve_reports(2, improving, range(0, 50)), metadata=MD)
    stub.Report(_curve_reports(1, plateau, range(0, 200), worker=0), metadata=MD)
    stub.Report(pb.ReportBatch(reports=[report(1, i, worker=1) for i in range(0, 200)]), metadata=MD)
    assert wait_until(lambda: decided(stub, controller, {1: 200, 2: 50}))
    job1 = next(j for j in controller.latest().jobs if j.job_id == 1)
    assert not job1.windows
    assert [(f.src, f.protocol) for f in job1.flows] == [("10.0.0.1", 6), ("10.0.0.2", 0)]
    # Worker 0 runs ahead by 4 iterations: iterations 200..203 of job 1 get a boosted class.
    stub.Report(pb.ReportBatch(reports=[report(1, i, worker=0) for i in range(200, 204)]), metadata=MD)

    def window():  # type: ignore[no-untyped-def]
        j = next(j for j in controller.latest().jobs if j.job_id == 1)
        return [(w.first, w.last, w.priority) for w in j.windows], j.priority

    assert wait_until(lambda: window()[0] != [])
    windows, cls = window()
    assert windows == [(200, 203, cls + 1)] and cls < 6
    reasons = stub.Explain(pb.ExplainRequest(job_id=1), metadata=MD).reasons
    assert any("straggler: worker 1 lags 4" in r for r in reasons)
    # The straggler catches up: the window goes away.
    stub.Report(pb.ReportBatch(reports=[report(1, i, worker=1) for i in range(200, 204)]), metadata=MD)
    assert wait_until(lambda: window()[0] == [])


def test_latest_decision_reaches_a_controller_that_was_down(make_coordinator) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    c = make_coordinator(controller=f"127.0.0.1:{port}", controller_backoff_max_s=0.2)
    stub = stub_for(c.address)
    for j in (1, 2, 3):
        register(stub, j)
        stub.Report(_curve_reports(j, lambda i, j=j: 0.9 - 0.8 * (i + 1) ** (-0.2 * j), range(0, 30)), metadata=MD)
    # The final decision: the latest evaluation used every report (an earlier one may be superseded).
    assert wait_until(lambda: evaluated(stub, {1: 30, 2: 30, 3: 30}))
    assert wait_until(lambda: c.sender.attempts >= 2)  # retried while the controller is down
    assert "UNAVAILABLE" in stub.Status(pb.StatusRequest(), metadata=MD).controller_error
    fake = FakeController(port=port).start()
    try:
        assert wait_until(lambda: fake.latest() is not None, timeout=5)
        assert wait_until(lambda: c.engine.applied_seq == c.engine.latest_seq)
        # Only the latest decision is sent, and it is exactly what the coordinator decided last.
        latest = c.engine.latest_decision()
        assert latest is not None and fake.latest() == latest[1]
        assert all(intent == latest[1] for _, intent in fake.intents)
        assert sorted(j.job_id for j in fake.latest().jobs) == [1, 2, 3]
    finally:
        fake.stop()


def test_rejected_intent_is_not_retried_forever(make_coordinator, controller) -> None:  # type: ignore[no-untyped-def]
    controller.reject = True
    c = make_coordinator(controller=controller.address)
    stub = stub_for(c.address)
    register(stub, 1)

    def refused_latest() -> bool:  # the decision holding job 1 is the latest one, and it was sent and refused
        latest = c.engine.latest_decision()
        return latest is not None and [j.job_id for j in latest[1].jobs] == [1] and c.sender.refused_seq == latest[0]

    assert wait_until(refused_latest)
    assert "INVALID_ARGUMENT" in c.sender.last_error
    attempts = c.sender.attempts
    wait_until(lambda: False, timeout=0.3)
    assert c.sender.attempts == attempts  # waits for the next decision instead of hammering
    controller.reject = False
    register(stub, 2)
    assert wait_until(lambda: controller.classes().keys() == {1, 2})


def test_decisions_do_not_churn_on_steady_progress(make_coordinator, controller) -> None:  # type: ignore[no-untyped-def]
    c = make_coordinator(controller=controller.address, config=fast_config())
    stub = stub_for(c.address)
    rng = np.random.default_rng(3)
    for j in (1, 2):
        register(stub, j)
    for it in range(0, 300, 10):  # two similar noisy curves reported in small batches
        for j in (1, 2):
            stub.Report(
                pb.ReportBatch(
                    reports=[
                        report(j, i, float(np.clip(improving(i) + rng.normal(0, 0.01), 0, 1)))
                        for i in range(it, it + 10)
                    ]
                ),
                metadata=MD,
            )
    assert wait_until(lambda: evaluated(stub, {1: 300, 2: 300}))  # every batch was evaluated
    assert c.engine.latest_seq <= 8, f"{c.engine.latest_seq} decisions for 60 report batches"


def test_a_controller_that_lost_the_decision_gets_it_again(make_coordinator, controller) -> None:  # type: ignore[no-untyped-def]
    """Issue 16 item 4: a controller restarted without state_file (generation back to 0, no jobs) used to keep
    nothing while the running coordinator did not notice."""
    c = make_coordinator(controller=controller.address)
    stub = stub_for(c.address)
    for j in (1, 2):
        register(stub, j)
        stub.Report(_curve_reports(j, improving, range(0, 20)), metadata=MD)
    assert wait_until(lambda: decided(stub, controller, {1: 20, 2: 20}))
    latest = c.engine.latest_decision()
    assert latest is not None and controller.held == latest[1]
    sent = len(controller.intents)
    controller.forget()
    assert wait_until(lambda: controller.held == latest[1])  # re-sent, unchanged
    assert controller.generation == 1 and c.sender.resends == 1
    assert c.engine.latest_decision() == latest  # a re-send, not a new decision
    # Once the controller holds it again, nothing more is sent.
    wait_until(lambda: False, timeout=1.5)
    assert len(controller.intents) == sent + 1
    # Another client's intent is replaced by the decision too: the coordinator owns the controller's intent.
    controller.Apply(intent_pb2.Intent(source="someone else"), None)
    assert wait_until(lambda: controller.held == latest[1])
