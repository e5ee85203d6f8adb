"""Rigid push compression (hosts/training/compress.py): exact encodings, error feedback, and the PS path."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from mlfc.hosts.training.client import ClientConfig, WorkerClient, WorkerError
from mlfc.hosts.training.compress import (
    Compression,
    Compressor,
    decode,
    decode_topk,
    encode_fp16,
    encode_topk,
    parse,
)
from mlfc.hosts.training.server import ServerConfig, TrainingServer
from mlfc.hosts.transport import SenderConfig

CHUNK = 16
SMALL = SenderConfig(chunk_size=CHUNK)


def test_parse_and_sizes():
    assert parse(None) == parse("none") == Compression()
    assert parse("fp16") == Compression("fp16")
    assert parse("topk:0.1") == Compression("topk", 0.1)
    assert parse("topk:0.1").spec() == "topk:0.1"
    for bad in ("topk", "topk:0", "topk:1.5", "topk:x", "gzip"):
        with pytest.raises(ValueError):
            parse(bad)
    assert Compression("fp16").payload_bytes(1000) == 2000
    assert Compression("topk", 0.1).payload_bytes(1000) == 800  # 100 indices + 100 values
    assert Compression("topk", 0.1).payload_bytes(5) == 8  # at least one element
    assert Compression().payload_bytes(1000) == 4000


def test_fp16_round_trip_and_saturation():
    g = np.array([0.5, -2.0, 1024.0, 1e6, -1e6, 0.1], np.float32)
    payload = encode_fp16(g)
    assert len(payload) == 12
    back = decode(Compression("fp16"), payload, 6)
    assert back.dtype == np.float32
    assert back[:3].tolist() == [0.5, -2.0, 1024.0]  # exactly representable in half
    assert back[3:5].tolist() == [65504.0, -65504.0]  # saturated, not infinite
    assert back[5] == np.float32(np.float16(0.1))  # rounded to nearest half
    with pytest.raises(ValueError, match="6"):
        decode(Compression("fp16"), payload, 7)


def test_topk_picks_largest_magnitudes_ties_to_lower_index():
    v = np.array([0.1, -3.0, 2.0, 0.5, -2.0], np.float32)
    payload, idx = encode_topk(v, 2)
    assert idx.tolist() == [1, 2]  # |-3|, then |2| beats the equal |-2| at index 4
    assert len(payload) == 16
    assert decode_topk(payload, 5).tolist() == [0.0, -3.0, 2.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="outside"):
        decode_topk(payload, 2)
    with pytest.raises(ValueError, match="whole"):
        decode_topk(payload[:-1], 5)


def test_topk_error_feedback_sends_what_was_held_back_later():
    c = Compressor(Compression("topk", 0.4))  # k = 2 of 5
    g = np.array([0.1, -3.0, 2.0, 0.5, -2.0], np.float32)
    first = decode_topk(c.encode(7, g), 5)
    assert first.tolist() == [0.0, -3.0, 2.0, 0.0, 0.0]
    assert c.residual[7].tolist() == np.array([0.1, 0.0, 0.0, 0.5, -2.0], np.float32).tolist()
    second = decode_topk(c.encode(7, np.zeros(5, np.float32)), 5)
    assert second.tolist() == [0.0, 0.0, 0.0, 0.5, -2.0]  # the memory's largest two
    assert c.residual[7].tolist() == np.array([0.1, 0, 0, 0, 0], np.float32).tolist()
    # another tensor id has its own memory; without error feedback nothing is remembered
    assert decode_topk(c.encode(8, g), 5).tolist() == first.tolist()
    plain = Compressor(Compression("topk", 0.4), error_feedback=False)
    plain.encode(7, g)
    assert plain.residual == {}


def test_compression_needs_loss_bound_zero_and_ps_mode():
    with pytest.raises(ValueError, match="loss bound 0"):
        ClientConfig(job=1, rank=0, ps=("127.0.0.1", 1), loss_bound=0.02, compression=Compression("fp16"))
    with pytest.raises(ValueError, match="PS mode"):
        ClientConfig(job=1, rank=0, ps=("127.0.0.1", 1), mode="aggregate", compression=Compression("fp16"))


def _server(params: list[np.ndarray], workers: int = 2) -> TrainingServer:
    def apply(_it: int, means: list[np.ndarray]) -> None:  # plain SGD, lr 1
        for p, m in zip(params, means, strict=True):
            p -= m

    cfg = ServerConfig(job=5, workers=workers, port=0, tx_port_base=None, deadline=0.005, timeout=20, sender=SMALL)
    return TrainingServer(cfg, parameters=params, apply=apply, emit=None)


def _client(srv: TrainingServer, rank: int, compression: Compression) -> WorkerClient:
    cfg = ClientConfig(job=5, rank=rank, ps=srv.address, rx_port=0, tx_port=0, deadline=0.005, timeout=20,
                       connect_timeout=20, sender=SMALL, compression=compression)  # fmt: skip
    return WorkerClient(cfg)


def _two_workers(compression: Compression, grads: list[np.ndarray], iterations: int = 1) -> dict[int, dict]:
    params = [np.zeros(grads[0].size, np.float32)]
    with _server(params) as srv:
        ps = threading.Thread(target=lambda: (srv.accept(), srv.run(iterations)), daemon=True)
        ps.start()
        results: dict[int, dict] = {}

        def worker(rank: int) -> None:
            with _client(srv, rank, compression) as c:
                c.connect([grads[rank].size])
                c.initial_parameters()
                out = {}
                for it in range(iterations):
                    c.start_iteration(c.push_bytes([grads[rank].size]))
                    out[f"push{it}"] = c.push(it, 0, grads[rank], layer_index=0, num_layers=1)
                    out[f"params{it}"] = np.frombuffer(c.wait(it, 0).data, np.float32).copy()
                results[rank] = out

        threads = [threading.Thread(target=worker, args=(r,)) for r in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        ps.join(timeout=30)
    assert set(results) == {0, 1}, "a worker did not finish"
    return results


def test_fp16_pushes_through_the_ps_give_the_mean_of_the_half_precision_gradients():
    g0 = np.arange(40, dtype=np.float32) / 4  # quarters: exact in half
    g1 = -np.arange(40, dtype=np.float32)
    res = _two_workers(Compression("fp16"), [g0, g1])
    assert res[0]["push0"].bytes == 80 and res[0]["push0"].chunks == 5  # half the bytes: 5 chunks of 16
    assert res[0]["push0"].protected_chunks == 5  # compressed pushes are sent protected
    assert res[0]["params0"].tolist() == (-(g0 + g1) / 2).tolist()
    assert res[1]["params0"].tolist() == res[0]["params0"].tolist()


def test_topk_pushes_through_the_ps_scatter_and_average_with_error_feedback():
    g0 = np.zeros(40, np.float32)
    g0[[3, 17, 30]] = [5.0, -6.0, 7.0]
    g0[10] = 0.25  # k = 4 of 40 at topk:0.1: the three large ones and this
    g0[11] = 0.125  # held back in the error-feedback memory
    g1 = np.zeros(40, np.float32)
    g1[[0, 1, 2, 39]] = [1.0, 2.0, 3.0, 4.0]
    res = _two_workers(Compression("topk", 0.1), [g0, g1], iterations=2)
    assert res[0]["push0"].bytes == 32  # 4 indices + 4 values
    sent0 = np.zeros(40, np.float32)
    sent0[[3, 10, 17, 30]] = [5.0, 0.25, -6.0, 7.0]
    mean0 = (sent0 + g1) / 2
    assert res[0]["params0"].tolist() == (-mean0).tolist()
    # iteration 1: the same gradients again; worker 0's memory held 0.125 at 11, which now reaches 0.25 and ties
    # with 10's 0.25: the tie goes to the lower index, 10 and the three large ones go again, 11 waits; worker 1
    # sends the same four again
    sent1 = np.zeros(40, np.float32)
    sent1[[3, 10, 17, 30]] = [5.0, 0.25, -6.0, 7.0]
    mean1 = (sent1 + g1) / 2
    assert res[1]["params1"].tolist() == (-mean0 - mean1).astype(np.float32).tolist()


def test_a_worker_compressing_differently_is_refused():
    params = [np.zeros(40, np.float32)]
    with _server(params, workers=2) as srv:
        ps = threading.Thread(target=lambda: srv.accept(), daemon=True)
        ps.start()
        errors: dict[int, BaseException] = {}
        done: set[int] = set()

        def worker(rank: int, comp: Compression) -> None:
            try:
                with _client(srv, rank, comp) as c:
                    c.connect([40])
                    done.add(rank)
            except WorkerError as exc:
                errors[rank] = exc

        a = threading.Thread(target=worker, args=(0, Compression("fp16")))
        a.start()
        a.join(timeout=0.5)  # rank 0 connects first (it waits for the WELCOME)
        worker(1, Compression("topk", 0.1))
        assert "a job uses one scheme" in str(errors.pop(1))
        worker(1, Compression("fp16"))  # the right one joins: the job starts
        a.join(timeout=30)
        ps.join(timeout=30)
        assert done == {0, 1} and not errors
        assert srv.compression == Compression("fp16")
