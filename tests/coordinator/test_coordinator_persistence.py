"""Persistence: a restarted coordinator (cleanly, or after a real ``kill -9``) has every acknowledged
report, its jobs and its latest decision, and re-sends that decision to the controller."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading

import grpc
from coord_helpers import MD, TOKEN, evaluated, register, report, stub_for, wait_until

from mlfc.proto import coordinator_pb2 as pb


def test_restart_keeps_jobs_reports_and_decision(make_coordinator, controller) -> None:  # type: ignore[no-untyped-def]
    c = make_coordinator(controller=controller.address)
    stub = stub_for(c.address)
    register(stub, 1, workers=2)
    register(stub, 2)
    stub.Report(pb.ReportBatch(reports=[report(1, i, 0.9 - 0.8 * (i + 1) ** -0.4) for i in range(50)]), metadata=MD)
    stub.Report(pb.ReportBatch(reports=[report(2, i, min(0.8, 0.1 + 0.02 * i)) for i in range(60)]), metadata=MD)
    stub.Finish(pb.FinishRequest(job_id=2, reason="pruned by ASHA"), metadata=MD)
    assert wait_until(lambda: controller.classes().keys() == {1})
    # The decision above may come from an evaluation before all 50 points were in (job 1 then scores by the
    # exploration prior): take the fit once an evaluation has fitted every report. The class is compared with
    # the latest stored decision, re-sent on restart: evaluations go on until the stop, and the ranker's
    # hysteresis may still move job 1 after the one read here.
    assert wait_until(lambda: evaluated(stub, {1: 50}))
    before = stub.Explain(pb.ExplainRequest(job_id=1), metadata=MD)
    c.stop(0)
    # Read after the stop: the decision thread may still store one more decision until then.
    seq, n_intents = c.engine.latest_seq, len(controller.intents)

    c2 = make_coordinator(controller=controller.address)
    stub2 = stub_for(c2.address)
    # The latest decision is re-sent on start (the controller may have missed it) and, once the restarted
    # coordinator has evaluated the reloaded history, nothing changed.
    assert wait_until(lambda: len(controller.intents) > n_intents)
    latest_class = controller.classes()[1]
    assert wait_until(lambda: evaluated(stub2, {1: 50}))
    assert c2.engine.latest_seq == seq
    status = stub2.Status(pb.StatusRequest(), metadata=MD)
    assert status.reports == 110
    assert {j.job_id: j.state for j in status.jobs} == {1: "active", 2: "finished"}
    after = stub2.Explain(pb.ExplainRequest(job_id=1), metadata=MD)
    assert (after.priority, after.fit.model, after.fit.points) == (latest_class, before.fit.model, 50)
    assert after.fit.a == before.fit.a
    # Per-worker progress survived: a re-sent old report is a duplicate.
    assert stub2.Report(pb.ReportBatch(reports=[report(1, 49, 0.9 - 0.8 * 50**-0.4)]), metadata=MD).duplicates == 1
    reply = register(stub2, 1, workers=2)
    assert reply.resumed and [(w.rank, w.last_iteration) for w in reply.workers] == [(0, 49)]


def test_restart_restores_each_workers_latest_report(make_coordinator) -> None:  # type: ignore[no-untyped-def]
    c = make_coordinator()
    stub = stub_for(c.address)
    register(stub, 1, workers=2)
    # Worker 0's wrong iteration 10 is superseded by its later report of iteration 1, in the same batch.
    batch = [report(1, 0, 0.1), report(1, 10, 0.9), report(1, 1, 0.2), report(1, 5, 0.5, worker=1)]
    assert stub.Report(pb.ReportBatch(reports=batch), metadata=MD).accepted == 4
    before = [(w.rank, w.last_iteration, w.reports) for w in c.engine.jobs()[0].workers]
    assert before == [(0, 1, 3), (1, 5, 1)]
    c.stop(0)
    c2 = make_coordinator()
    assert [(w.rank, w.last_iteration, w.reports) for w in c2.engine.jobs()[0].workers] == before
    assert c2.store.worker_progress(1) == {0: 10, 1: 5}  # the highest stored, as the lab reads it


def _spawn(db, token_file):  # type: ignore[no-untyped-def]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlfc.coordinator.cli",
            "run",
            "--db",
            str(db),
            "--listen",
            "127.0.0.1:0",
            "--token-file",
            str(token_file),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert "listening on 127.0.0.1:" in line, line + proc.stderr.read()
    return proc, line.rsplit(" ", 1)[1].strip()


def test_kill_9_loses_no_acknowledged_report(tmp_path) -> None:  # type: ignore[no-untyped-def]
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    db = tmp_path / "coord.sqlite"
    proc, address = _spawn(db, token_file)
    acked: list[tuple[int, int]] = []
    stop = threading.Event()
    errors: list[str] = []

    def writer(job: int) -> None:
        stub = stub_for(address)
        register(stub, job, workers=1)
        it = 0
        while not stop.is_set():
            batch = [report(job, it + k, 0.5) for k in range(20)]
            try:
                stub.Report(pb.ReportBatch(reports=batch), metadata=MD, timeout=2)
            except grpc.RpcError as e:
                errors.append(e.code().name)
                return
            acked.extend((job, r.iteration) for r in batch)
            it += 20

    threads = [threading.Thread(target=writer, args=(j,)) for j in (1, 2)]
    for t in threads:
        t.start()
    try:
        assert wait_until(lambda: len(acked) >= 2000, timeout=20)
        os.kill(proc.pid, signal.SIGKILL)  # mid-stream: reports are in flight
        proc.wait(timeout=5)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=5)
    assert proc.returncode == -signal.SIGKILL
    assert errors, "writers should have seen the coordinator die"
    with sqlite3.connect(db) as conn:  # the file as the dead process left it (WAL replayed on open)
        stored = set(conn.execute("SELECT job_id, iteration FROM reports").fetchall())
    missing = set(acked) - stored
    assert not missing, f"{len(missing)} acknowledged reports lost, e.g. {sorted(missing)[:5]}"

    proc2, address2 = _spawn(db, token_file)
    try:
        stub = stub_for(address2)
        status = stub.Status(pb.StatusRequest(), metadata=MD, timeout=5)
        assert status.reports == len(stored) >= len(acked)
        assert {j.job_id for j in status.jobs} == {1, 2}
        # Agents resume where the database says they are.
        reply = register(stub, 1)
        last = max(i for j, i in stored if j == 1)
        assert reply.resumed and reply.workers[0].last_iteration == last
        assert stub.Report(pb.ReportBatch(reports=[report(1, last + 1, 0.6)]), metadata=MD).accepted == 1
    finally:
        proc2.send_signal(signal.SIGTERM)
        assert proc2.wait(timeout=10) == 0
