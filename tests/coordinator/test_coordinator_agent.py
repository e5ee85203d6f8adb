"""The host agent: non-blocking reports, bounded buffering while the coordinator is down, reconnection,
and the ``mlfc-agent`` wrapper for jobs that print their metrics."""

from __future__ import annotations

import sqlite3
import sys
import textwrap
import threading
from concurrent import futures

import grpc
import pytest
from coord_helpers import TOKEN, free_port, wait_until

from mlfc.hosts import agent_cli
from mlfc.hosts.agent import Agent, Flow, RegistrationRefused, Worker
from mlfc.proto import coordinator_pb2_grpc


def _stored(coord, job_id: int) -> list[tuple]:  # type: ignore[no-untyped-def]
    with sqlite3.connect(coord.store.path) as db:
        return db.execute(
            "SELECT worker, iteration, metric FROM reports WHERE job_id=? ORDER BY iteration", (job_id,)
        ).fetchall()


def _agent(port: int, job_id: int = 1, **kw: object) -> Agent:
    kw.setdefault("backoff_max_s", 0.2)
    return Agent(
        job_id,
        coordinator=f"127.0.0.1:{port}",
        token=TOKEN,
        workers=[
            Worker(0, "10.0.0.1"),
            Worker(1, "10.0.0.2", flows=[Flow(src="10.0.0.2", dst="10.0.0.1", protocol=17)]),
        ],
        **kw,
    )  # type: ignore[arg-type]


def test_agent_buffers_while_coordinator_is_down(make_coordinator) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    agent = _agent(port).start()
    for i in range(300):
        agent.report(i, 0.1 + i / 1000, compute_s=0.01, comm_s=0.005, bytes=1000)
    assert wait_until(lambda: agent.stats().failures >= 2)
    st = agent.stats()
    assert (st.buffered, st.sent, st.registered, st.connected) == (300, 0, False, False)
    assert "UNAVAILABLE" in st.last_error

    coord = make_coordinator(listen=f"127.0.0.1:{port}")
    assert agent.flush(timeout=10)
    assert len(_stored(coord, 1)) == 300
    st = agent.stats()
    assert (st.sent, st.dropped, st.buffered, st.registered, st.connected) == (300, 0, 0, True, True)

    # Outage while running: stop the coordinator, keep training, restart on the same database.
    coord.stop(0)
    for i in range(300, 400):
        agent.report(i, 0.5, worker=1)
    coord2 = make_coordinator(listen=f"127.0.0.1:{port}")
    assert agent.finish(timeout=10)
    assert len(_stored(coord2, 1)) == 400
    assert coord2.engine.job_state(1) == "finished"


class _HungCoordinator(coordinator_pb2_grpc.CoordinatorServicer):
    """Holds every call until ``release`` is set: the agent's sender thread is stuck in an RPC."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = threading.Event()

    def _hang(self, context) -> None:  # type: ignore[no-untyped-def]
        self.calls.set()
        self.release.wait(30)
        context.abort(grpc.StatusCode.UNAVAILABLE, "test coordinator going away")

    def Register(self, request, context):  # type: ignore[no-untyped-def]
        self._hang(context)

    def Report(self, request, context):  # type: ignore[no-untyped-def]
        self._hang(context)


def test_report_does_not_wait_for_the_network() -> None:
    hung = _HungCoordinator()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    coordinator_pb2_grpc.add_CoordinatorServicer_to_server(hung, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    agent = _agent(port, rpc_timeout_s=60).start()
    try:
        assert hung.calls.wait(10)  # the sender thread is inside Register now, for as long as the test likes
        reporter = threading.Thread(target=lambda: [agent.report(i, 0.5) for i in range(300)])
        reporter.start()
        # Not a speed limit: a report() that waited for the network would stay blocked until the release.
        reporter.join(timeout=20)
        assert not reporter.is_alive(), "report() blocked while the coordinator did not answer"
        assert agent.stats().buffered == 300
    finally:
        hung.release.set()
        agent.close()
        server.stop(0)


def test_buffer_is_bounded_and_keeps_the_newest(make_coordinator) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    agent = _agent(port, buffer_size=100).start()
    for i in range(250):
        agent.report(i, 0.2)
    assert agent.stats().dropped == 150 and agent.stats().buffered == 100
    coord = make_coordinator(listen=f"127.0.0.1:{port}")
    assert agent.flush(timeout=10)
    assert [r[1] for r in _stored(coord, 1)] == list(range(150, 250))
    agent.close()


def test_agent_validates_locally_and_never_raises_from_the_network() -> None:
    agent = _agent(free_port(), metric="accuracy")
    try:
        for bad, msg in ((float("nan"), "finite"), (float("inf"), "finite"), (95.0, r"outside \[0, 1\]")):
            with pytest.raises(ValueError, match=msg):
                agent.report(1, bad)
        agent.report(5, 0.5)
        with pytest.raises(ValueError, match="does not increase"):
            agent.report(5, 0.6)
        with pytest.raises(ValueError, match="not one of the registered workers"):
            agent.report(6, 0.6, worker=7)
        with pytest.raises(ValueError, match="compute_s"):
            agent.report(6, 0.6, compute_s=-1)
        agent.report(6, 0.6, worker=1)  # other workers count separately
        with pytest.raises(ValueError, match=r"in 0\.\.2147483647"):
            agent.report(4294967295, 0.6)  # -1 as unsigned 32-bit: refused before it is queued
        with pytest.raises(ValueError, match="jumps 1000001 ahead"):
            agent.report(1_000_006, 0.6)
        agent.report(7, 0.6)  # the refused values changed nothing
        assert agent.stats().buffered == 3
    finally:
        agent.close()
    with pytest.raises(ValueError, match="token"):
        Agent(1, token="")


def test_agent_with_wrong_token_keeps_buffering(make_coordinator) -> None:  # type: ignore[no-untyped-def]
    coord = make_coordinator()
    agent = Agent(1, coordinator=coord.address, token="wrong", backoff_max_s=0.1).start()
    agent.report(1, 0.5)
    assert wait_until(lambda: "UNAUTHENTICATED" in agent.stats().last_error)
    assert agent.stats().buffered == 1 and not agent.stats().registered
    assert not agent.finish(timeout=0.3)
    assert coord.engine.job_state(1) is None


def test_wait_registered_tells_accepted_unreachable_and_refused(make_coordinator) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    agent = _agent(port, backoff_max_s=0.05)
    assert not agent.wait_registered(0.3)  # nothing listens yet: a timeout, not a refusal
    coord = make_coordinator(listen=f"127.0.0.1:{port}")
    assert agent.wait_registered(10)
    wrong_token, same_job = Agent(2, coordinator=coord.address, token="wrong"), _agent(port)  # job 1, another instance
    with pytest.raises(RegistrationRefused, match="UNAUTHENTICATED"):
        wrong_token.wait_registered(10)
    with pytest.raises(RegistrationRefused, match=r"ALREADY_EXISTS.*already registered by agent instance"):
        same_job.wait_registered(10)
    wrong_token.close()
    same_job.close()
    assert agent.finish(timeout=5)


def test_context_manager_registers_reports_and_finishes(make_coordinator) -> None:  # type: ignore[no-untyped-def]
    coord = make_coordinator()
    port = coord.port
    with _agent(port, job_id=9, name="lr=0.1", bytes_per_iteration=4096) as agent:
        for i in range(1, 21):
            agent.report(i, 1 - 1 / (i + 1), compute_s=0.02, comm_s=0.01, bytes=4096)
    assert len(_stored(coord, 9)) == 20
    assert coord.engine.job_state(9) == "finished"
    with pytest.raises(RuntimeError), _agent(port, job_id=10) as agent:
        agent.report(1, 0.1)
        raise RuntimeError("diverged")
    ex = coord.engine.explain(10)
    assert ex.state == "finished" and "diverged" in ex.reasons[0]
    with pytest.raises(RuntimeError), _agent(port, job_id=11) as agent:
        raise RuntimeError("x" * 1000)  # a reason the coordinator would refuse uncut
    assert coord.engine.job_state(11) == "finished"


def test_agent_cli_wraps_a_printing_job(make_coordinator, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    coord = make_coordinator()
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent("""
        import json
        print("starting training", flush=True)
        for i in range(1, 11):
            print(f"iter={i} acc={i / 20:.3f} compute=0.01 comm=0.002 bytes=1000", flush=True)
        print(json.dumps({"iteration": 11, "accuracy": 0.6, "worker": 1}), flush=True)
        print("iter=12 acc=nan", flush=True)
        print("iter=5 acc=0.9", flush=True)
        raise SystemExit(3)
    """)
    )
    rc = agent_cli.main(
        [
            "--job",
            "4",
            "--coordinator",
            coord.address,
            "--token-file",
            str(token_file),
            "--worker",
            "0=10.0.0.1",
            "--worker",
            "1=10.0.0.2",
            "--flow",
            "1:10.0.0.2,10.0.0.1,17",
            "--",
            sys.executable,
            str(script),
        ]
    )
    assert rc == 3
    out, err = capsys.readouterr()
    assert "starting training" in out and "iter=10 acc=0.500" in out  # passed through
    assert "skipped line 'iter=12 acc=nan'" in err and "skipped line 'iter=5 acc=0.9'" in err
    assert "11 report(s) committed" in err
    rows = _stored(coord, 4)
    assert [(w, i) for w, i, _ in rows] == [(0, i) for i in range(1, 11)] + [(1, 11)]
    ex = coord.engine.explain(4)
    assert ex.state == "finished" and "exited with status 3" in ex.reasons[0]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("iter=3 acc=0.5", {"iteration": 3, "metric": 0.5}),
        ("step: 7, loss: 1.25 comm=0.1", {"iteration": 7, "comm": 0.1}),
        ('{"iteration": 2, "acc": 0.1, "bytes": 10}', {"iteration": 2, "metric": 0.1, "bytes": 10}),
        ("no metrics here", None),
        ("iter=x acc=0.1", None),
    ],
)
def test_agent_cli_line_parser(line: str, expected: dict | None) -> None:
    assert agent_cli.parse_line(line, "accuracy") == expected


def test_agent_cli_custom_pattern_and_loss() -> None:
    import re

    pat = re.compile(r"epoch (?P<iteration>\d+) .*val_loss (?P<metric>[\d.]+)")
    assert agent_cli.parse_line("epoch 4 train 0.3 val_loss 0.25", "loss", pat) == {"iteration": 4, "metric": 0.25}
    assert agent_cli.parse_line("step: 7, loss: 1.25", "loss") == {"iteration": 7, "metric": 1.25}


def test_on_ack_names_every_committed_report_once(make_coordinator) -> None:  # type: ignore[no-untyped-def]
    """The acknowledgement audit (``mlfc-agent --ack-log``): what the callback calls committed is in the store,
    each report once, across a coordinator outage."""
    port = free_port()
    acked: list[tuple[int, int, bool]] = []
    agent = _agent(port, on_ack=lambda reps, ok: acked.extend((r.worker, r.iteration, ok) for r in reps)).start()
    for i in range(50):
        agent.report(i, 0.1 + i / 1000)
    coord = make_coordinator(listen=f"127.0.0.1:{port}")
    assert agent.flush(timeout=10)
    coord.stop(0)
    for i in range(50, 80):
        agent.report(i, 0.1 + i / 1000)
    coord = make_coordinator(listen=f"127.0.0.1:{port}")  # the same database file (durable store)
    assert agent.flush(timeout=10)
    agent.close()
    assert sorted(acked) == [(0, i, True) for i in range(80)]
    assert {(w, i) for w, i, _ in _stored(coord, 1)} == {(w, i) for w, i, _ in acked}
