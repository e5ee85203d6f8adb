"""The PS path without torch: real transport on loopback, numpy parameters, exact numbers under loss."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from mlfc.hosts.training.client import ClientConfig, WorkerClient, WorkerError
from mlfc.hosts.training.server import ServerConfig, TrainingError, TrainingServer
from mlfc.hosts.transport import bind_shim_socket
from mlfc.testing.lossy import LossySocket
from mlfc.testing.ps_pair import SMALL, first_push_lossy, push_twice
from mlfc.testing.ps_pair import small_client as _client
from mlfc.testing.ps_pair import small_server as _server
from mlfc.wire import IMPORTANCE_PROTECTED


def test_lost_unprotected_chunks_are_averaged_out_counted_and_protected_ones_arrive():
    params = [np.zeros(40, np.float32)]
    g0 = np.arange(40, dtype=np.float32)
    g1 = 100 + np.arange(40, dtype=np.float32)
    # worker 1 loses the first transmission of every chunk of iteration 0's push
    lossy = first_push_lossy()
    with _server(params) as srv:
        # without loss feedback: what is zero-filled is gone (test_loss_feedback.py has it on)
        results = push_twice(srv, [g0, g1], [None, lossy], loss_bound=1.0, loss_feedback=False)
        ledger = srv.ledger

    # Which chunks were protected: equal-rank magnitudes, so the top 25 % by magnitude (round(2.5) = 2:
    # chunks 8 and 9; 9 is also the last chunk) — read from what went on the wire.
    first = {h.chunk_seq: h.importance for h in lossy.sent if h.iteration == 0 and h.tensor_id == 0}
    protected = {s for s, imp in first.items() if imp >= IMPORTANCE_PROTECTED}
    assert protected == {8, 9}
    assert {h.chunk_seq for h in lossy.dropped} == set(range(10)), "every chunk's first copy was dropped"
    # Iteration 0: chunks 0..7 (elements 0..31) arrived from worker 0 only, 8..9 (retransmitted) from both.
    mean0 = np.concatenate([g0[:32], (g0[32:] + g1[32:]) / 2])
    assert results[0]["params0"].tolist() == (-mean0).tolist()
    assert results[1]["params0"].tolist() == (-mean0).tolist()
    # Iteration 1: nothing lost, plain mean.
    mean1 = (g0 + g1) / 2
    assert results[0]["params1"].tolist() == (-mean0 - mean1).astype(np.float32).tolist()
    # Counted per job, iteration, tensor, worker: at the PS and in each worker's STATS.
    assert ledger.of(0).lost_chunks == {(1, 0): 8}
    assert ledger.of(1).total() == 0
    assert results[1]["stats0"] == {"v": 1, "lost_chunks": 8, "job_lost_chunks": 8, "lost_by_tensor": {"0": 8},
                                    "chunks": 10, "lost_elements": 0, "pull_sent_bytes": 160, "pull_withheld_chunks": 0,
                                    "pull_stale_elements": 0}  # fmt: skip
    assert results[0]["stats0"]["lost_chunks"] == 0 and results[0]["stats0"]["job_lost_chunks"] == 8
    assert results[1]["stats1"]["lost_chunks"] == 0
    assert ledger.totals() == {"lost_chunks": 8, "chunks": 40, "lost_elements": 0, "tensors_with_loss": 1}
    # MLTCP progress as with any transfer: the shim's progress bucket climbs through the declared iteration
    progress = [h.progress for h in lossy.sent if h.iteration == 1]
    assert progress == sorted(progress) and progress[0] < progress[-1], progress
    # The sender's view agrees: 8 tolerated (not retransmitted), 2 protected retransmitted.
    push = results[1]["push0"]
    assert (push.tolerated_chunks, push.retransmits, push.protected_chunks) == (8, 2, 2)


def test_without_a_loss_bound_every_lost_chunk_is_retransmitted():
    params = [np.zeros(40, np.float32)]
    g = np.ones(40, np.float32)
    lossy = LossySocket(bind_shim_socket("127.0.0.1"), lambda h, attempt: h.tensor_id == 0 and attempt == 0)
    with _server(params, workers=1) as srv:
        ps = threading.Thread(target=lambda: (srv.accept(), srv.run(1)), daemon=True)
        ps.start()
        with _client(srv, 0, lossy) as c:  # loss_bound 0 (the default)
            c.connect([40])
            c.initial_parameters()
            res = c.push(0, 0, g, layer_index=0, num_layers=1)
            got = np.frombuffer(c.wait(0, 0).data, np.float32)
            stats = c.stats(0)
        ps.join(timeout=30)
    assert res.retransmits == 10 and res.tolerated_chunks == 0
    assert got.tolist() == [-1.0] * 40
    assert stats["lost_chunks"] == 0


def test_a_worker_with_another_model_is_refused_with_a_clear_error():
    params = [np.zeros(40, np.float32)]
    with _server(params, workers=1) as srv:
        box: dict[str, BaseException] = {}

        def serve() -> None:
            try:
                srv.accept()
            except TrainingError as exc:
                box["ps"] = exc

        ps = threading.Thread(target=serve, daemon=True)
        ps.start()
        with _client(srv, 0) as c, pytest.raises(WorkerError, match="not the same model"):
            c.connect([41])
        ps.join(timeout=30)
    assert "not the same model" in str(box["ps"])


def test_aggregate_mode_returns_the_mean_to_every_worker_and_ends_on_bye():
    cfg = ServerConfig(job=6, workers=2, port=0, mode="aggregate", tx_port_base=None, timeout=20, sender=SMALL)
    with TrainingServer(cfg, emit=None) as srv:
        ps = threading.Thread(target=lambda: (srv.accept(), srv.serve()), daemon=True)
        ps.start()
        got: dict[int, list[float]] = {}

        def worker(rank: int) -> None:
            ccfg = ClientConfig(job=6, rank=rank, ps=srv.address, rx_port=0, tx_port=0, mode="aggregate", timeout=20,
                                sender=SMALL)  # fmt: skip
            with WorkerClient(ccfg) as c:
                c.connect([3])
                c.push(0, 7, np.full(12, rank * 2 + 1, np.float32), layer_index=0, num_layers=1)
                got[rank] = np.frombuffer(c.wait(0, 7).data, np.float32).tolist()
                c.bye()

        threads = [threading.Thread(target=worker, args=(r,)) for r in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        ps.join(timeout=30)
        assert not ps.is_alive(), "the aggregator did not stop after both BYEs"
    assert got == {0: [2.0] * 12, 1: [2.0] * 12}


def test_lost_chunks_are_exported_to_prometheus():
    from prometheus_client import CollectorRegistry, generate_latest

    from mlfc.hosts.training.accounting import LossCollector, LossLedger

    ledger = LossLedger(job=7)
    ledger.record(3, rank=1, tensor=4, n_chunks=10, missing=2)
    ledger.record(3, rank=0, tensor=4, n_chunks=10, missing=0)
    ledger.record_elements(3, tensor=4, lost_elements=5)
    ledger.finished(3)
    reg = CollectorRegistry()
    reg.register(LossCollector(ledger))
    text = generate_latest(reg).decode()
    assert 'mlfc_training_lost_chunks_total{job="7",tensor="4",worker="1"} 2.0' in text
    assert 'mlfc_training_chunks_total{job="7",worker="0"} 10.0' in text
    assert 'mlfc_training_lost_elements_total{job="7",tensor="4"} 5.0' in text
    assert 'mlfc_training_iteration{job="7"} 3.0' in text


def _aggregator(workers: int) -> tuple[TrainingServer, threading.Thread, dict]:
    cfg = ServerConfig(job=6, workers=workers, port=0, mode="aggregate", tx_port_base=None, timeout=20, sender=SMALL)
    srv = TrainingServer(cfg, emit=None)
    box: dict = {}

    def run() -> None:
        try:
            srv.accept()
            srv.serve()
        except TrainingError as exc:
            box["error"] = exc

    ps = threading.Thread(target=run, daemon=True)
    ps.start()
    return srv, ps, box


def _agg_client(srv: TrainingServer, rank: int) -> WorkerClient:
    return WorkerClient(ClientConfig(job=6, rank=rank, ps=srv.address, rx_port=0, tx_port=0, mode="aggregate",
                                     timeout=20, connect_timeout=5, sender=SMALL))  # fmt: skip


def test_a_rank_beyond_the_aggregators_workers_arriving_late_ends_the_job_on_every_rank():
    import time

    from mlfc.hosts.training.client import JobAborted

    srv, ps, box = _aggregator(2)
    with srv:
        admitted = [_agg_client(srv, r) for r in (0, 1)]
        threads = [threading.Thread(target=c.connect, args=([3],), daemon=True) for c in admitted]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert all(c.welcome.get("workers") == 2 for c in admitted)
        t0 = time.monotonic()
        with _agg_client(srv, 2) as late, pytest.raises(WorkerError, match=r"rank 2 .*more ranks than --workers 2"):
            late.connect([3])
        # the admitted ranks learn of it instead of waiting for a mean that would be over 2 of 3 ranks
        for c in admitted:
            with pytest.raises(JobAborted, match=r"aggregator ended the job: rank 2 connected after the 2 workers"):
                c.wait(0, 0, timeout=10)
            c.close()
        assert time.monotonic() - t0 < 10
        ps.join(timeout=30)
        assert not ps.is_alive()
    assert "more ranks than --workers 2" in str(box["error"])


def test_a_rank_that_gives_up_ends_the_aggregator_and_the_other_ranks_hear_why():
    from mlfc.hosts.training.client import JobAborted

    srv, ps, box = _aggregator(2)
    with srv:
        clients = [_agg_client(srv, r) for r in (0, 1)]
        threads = [threading.Thread(target=c.connect, args=([3],), daemon=True) for c in clients]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        clients[1].bye(error="out of memory")
        with pytest.raises(JobAborted, match="worker 1 gave up: out of memory"):
            clients[0].wait(0, 0, timeout=10)
        ps.join(timeout=30)
        assert not ps.is_alive(), "the aggregator runs on after a rank gave up"
        for c in clients:
            c.close()
    assert "worker 1 gave up: out of memory" in str(box["error"])


def test_the_aggregator_ends_soon_after_a_rank_vanished_without_bye_not_at_its_timeout():
    import time

    from mlfc.hosts.training.client import JobAborted

    srv, ps, box = _aggregator(2)  # timeout 20 s
    with srv:
        clients = [_agg_client(srv, r) for r in (0, 1)]
        threads = [threading.Thread(target=c.connect, args=([3],), daemon=True) for c in clients]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        t0 = time.monotonic()
        clients[1].close()  # killed: no BYE, its receiver is gone
        with pytest.raises(JobAborted, match=r"worker\(s\) \[1\] gone"):
            clients[0].wait(0, 0, timeout=15)
        ps.join(timeout=30)
        assert time.monotonic() - t0 < 12, "the aggregator waited for its timeout"
        clients[0].close()
    assert "[1] gone" in str(box["error"])


def test_parameters_reach_a_worker_whose_feedback_is_silent_for_longer_than_the_peer_timeout():
    """A worker in a starved class acknowledges nothing for a while (strict priority): the PS sends WELCOME
    and INITIAL again until the job's timeout rather than give up at the transport's peer timeout."""
    import dataclasses
    import time

    params = [np.arange(40, dtype=np.float32)]
    with _server(params, workers=1) as srv:
        srv.cfg = dataclasses.replace(srv.cfg, sender=dataclasses.replace(SMALL, peer_timeout=0.3))
        ps = threading.Thread(target=srv.accept, daemon=True)
        ps.start()
        with _client(srv, 0) as c:
            silent_until = time.monotonic() + 1.5
            send = c.rx._send
            c.rx._send = lambda *a: None if time.monotonic() < silent_until else send(*a)  # type: ignore[method-assign]
            c.connect([40])
            assert c.initial_parameters().tolist() == params[0].tolist()
        ps.join(timeout=10)
        assert not ps.is_alive()
