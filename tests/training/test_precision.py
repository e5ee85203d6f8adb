"""Pushes at the precision the network's share asks for (issue 46 item 3, mlfc.policy.precision): the codec,
error feedback of the rounding and of withheld chunks, and the PS decoding each push by its length."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from mlfc.hosts.training.cli import build_parser
from mlfc.hosts.training.client import ClientConfig, WorkerClient
from mlfc.hosts.training.compress import decode_at, encode_at, received_at
from mlfc.hosts.training.launch import TrainingJob, worker_argv
from mlfc.hosts.transport import SenderConfig
from mlfc.hosts.transport.outgoing import SendResult
from mlfc.policy.precision import encoded_bytes
from mlfc.policy.withhold import WithholdPolicy
from mlfc.testing.ps_pair import small_client, small_server
from mlfc.wire import IMPORTANCE_PROTECTED, SHIM_PORT_BASE

CHUNK = 16  # bytes: 4 float32, 8 half or 12 int8 (after the scale) per chunk
N = 120
TELEMETRY = WithholdPolicy(signal="telemetry", weight=1.0)  # gain 1: the share is the congestion, up to the bound


@pytest.mark.parametrize(("precision", "tol"), [("fp32", 0.0), ("fp16", 1e-2), ("int8", 5e-2)])
def test_encode_decode_round_trip(precision, tol):
    v = np.random.default_rng(1).normal(0, 1, N).astype(np.float32)
    payload = encode_at(precision, v, CHUNK)
    raw = payload if isinstance(payload, bytes) else payload.tobytes()
    assert len(raw) == encoded_bytes(precision, N, CHUNK)  # the bytes on the wire really shrink
    assert np.abs(decode_at(precision, raw, N, CHUNK) - v).max() <= tol * np.abs(v).max()


def test_an_int8_chunk_lost_or_withheld_costs_only_its_own_elements():
    v = np.arange(1, N + 1, dtype=np.float32)
    raw = bytearray(encode_at("int8", v, CHUNK))
    raw[CHUNK : 2 * CHUNK] = bytes(CHUNK)  # chunk 1 zero-filled by the receiver
    got = decode_at("int8", bytes(raw), N, CHUNK)
    mask = received_at("int8", N, CHUNK, [1])
    assert mask.tolist() == [i not in range(12, 24) for i in range(N)]
    assert (got[~mask] == 0).all() and np.abs(got - v)[mask].max() <= 120 / 254  # half a step of the largest scale


class FakeSender:
    """The push flow: records each push's bytes and reports the withheld chunks missing (what the PS zero-fills)."""

    def __init__(self) -> None:
        self.config = SenderConfig(chunk_size=CHUNK)
        self.sent: list[tuple[bytes, list[int], tuple[int, ...]]] = []  # (payload, classes, missing chunks)

    def send_tensor(self, job, iteration, tensor_id, buffer, *, importance, loss_bound, timeout, withhold=()):
        raw = bytes(memoryview(buffer).cast("B"))
        missing = tuple(sorted(withhold))
        raw = bytearray(raw)
        for k in missing:  # the receiver zero-fills what never arrived
            raw[k * CHUNK : (k + 1) * CHUNK] = bytes(len(raw[k * CHUNK : (k + 1) * CHUNK]))
        self.sent.append((bytes(raw), list(importance), missing))
        n = -(-len(raw) // CHUNK)
        return SendResult(job, iteration, tensor_id, len(raw), n, 0.0, 0, 0, bool(missing), missing, len(missing),
                          sum(min(CHUNK, len(raw) - k * CHUNK) for k in missing))  # fmt: skip

    def received(self, i: int) -> np.ndarray:
        """What the PS averages of push ``i``: decoded by its length, missing elements 0."""
        raw, _, missing = self.sent[i]
        precision = {encoded_bytes(p, N, CHUNK): p for p in ("fp32", "fp16", "int8")}[len(raw)]
        return np.where(received_at(precision, N, CHUNK, missing), decode_at(precision, raw, N, CHUNK), 0.0)

    def close(self) -> None:
        pass


@pytest.fixture
def worker():
    made = []

    def make(**kw) -> tuple[WorkerClient, FakeSender]:
        cfg = ClientConfig(job=1, rank=0, ps=("127.0.0.1", SHIM_PORT_BASE + 1), rx_port=0, tx_port=0,
                           sender=SenderConfig(chunk_size=CHUNK), **{"loss_bound": 0.9, "withhold": TELEMETRY,
                                                                     "precision": True, **kw})  # fmt: skip
        c = WorkerClient(cfg)
        fake = FakeSender()
        made.append((c, c.tx))
        c.tx = fake
        return c, fake

    yield make
    for c, real in made:
        c.tx = real
        c.close()


def grad(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 1, N).astype(np.float32)


def test_alone_a_push_goes_fp32_whole(worker):
    c, fake = worker()
    res = c.push(0, 0, grad(0), layer_index=0, num_layers=1)
    assert len(fake.sent[0][0]) == 4 * N and fake.sent[0][2] == ()
    assert res.precision_chunks == {"fp32": 30, "fp16": 0, "int8": 0} and res.withheld_chunks == 0
    assert c.residuals.get(0) is None


def test_congestion_lowers_the_precision_before_withholding(worker):
    c, fake = worker()
    c.congestion.value = 0.45  # share 0.45: fp16 sheds it, nothing withheld
    res = c.push(0, 0, grad(0), layer_index=0, num_layers=1)
    assert len(fake.sent[0][0]) == 2 * N and res.withheld_chunks == 0 and res.precision_chunks["fp16"] == 15
    c.congestion.value = 0.9  # share 0.9: int8 (sheds ~0.72 here), the rest withheld
    res = c.push(1, 0, grad(1), layer_index=0, num_layers=1)
    raw, classes, missing = fake.sent[1]
    assert len(raw) == encoded_bytes("int8", N, CHUNK) and missing
    assert res.precision_chunks["int8"] + res.withheld_chunks == len(classes) == 10
    assert res.withheld_bytes <= 0.9 * len(raw)
    kept = [i for i in range(len(classes)) if i not in missing]
    assert all(classes[i] < IMPORTANCE_PROTECTED for i in missing)  # protected chunks are never withheld
    assert max(classes[i] for i in missing) <= min(classes[i] for i in kept[:-1])  # the least important


def test_the_rounding_and_the_withheld_chunks_go_to_the_residual_nothing_lost(worker):
    c, fake = worker()
    grads = [grad(10 + i) for i in range(4)]
    for it, (g, congestion) in enumerate(zip(grads, (0.9, 0.45, 0.9, 0.0), strict=True)):
        c.congestion.value = congestion
        c.push(it, 0, g, layer_index=0, num_layers=1)
        # error feedback: what the PS got so far plus what the worker holds is every gradient so far
        got = sum(fake.received(i).astype(np.float64) for i in range(it + 1))
        held = c.residuals.get(0)
        total = got + (0 if held is None else held)
        assert np.allclose(total, sum(x.astype(np.float64) for x in grads[: it + 1]), atol=1e-5)
    assert c.residuals.get(0) is None  # the last push, fp32 on a free link, took the rest


def test_precision_needs_withhold_and_reaches_the_worker():
    with pytest.raises(ValueError, match="precision needs withhold"):
        ClientConfig(job=1, rank=0, ps=("127.0.0.1", 1), loss_bound=0.5, precision=True)
    args = build_parser().parse_args(["worker", "--job", "1", "--rank", "0", "--ps", "x", "--withhold", "--precision"])
    assert args.precision and args.withhold
    argv = worker_argv(TrainingJob(1, 2, 10, loss_bound=0.5, withhold=True, precision=True), 0, "127.0.0.1", "x")
    assert "--precision" in argv and "--precision" not in worker_argv(TrainingJob(1, 2, 10), 0, "127.0.0.1", "x")


def test_through_the_ps_pushes_at_fp16_and_int8_decode_by_their_length():
    g0 = np.arange(40, dtype=np.float32) / 4  # quarters: exact in half
    g1 = ((np.arange(40) * 7) % 200 - 100).astype(np.float32)
    g1[::12] = 127  # every int8 chunk's largest magnitude 127: scale 1, integers exact
    params = [np.zeros(40, np.float32)]
    congestion = {0: 0.45, 1: 0.7}  # worker 0 sheds by fp16, worker 1 by int8 (nothing withheld)
    results: dict[int, dict] = {}
    with small_server(params) as srv:
        ps = threading.Thread(target=lambda: (srv.accept(), srv.run(2)), daemon=True)
        ps.start()

        def run(rank: int) -> None:
            g = (g0, g1)[rank]
            with small_client(srv, rank, loss_bound=0.7, withhold=TELEMETRY, precision=True) as c:
                c.connect([g.size])
                c.initial_parameters()
                out = {}
                for it in range(2):
                    c.congestion.value = congestion[rank] if it == 0 else 0.0  # then a free link: fp32
                    c.start_iteration(g.nbytes)
                    out[f"push{it}"] = c.push(it, 0, g, layer_index=0, num_layers=1)
                    out[f"params{it}"] = np.frombuffer(c.wait(it, 0).data, np.float32).copy()
                results[rank] = out

        threads = [threading.Thread(target=run, args=(r,)) for r in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        ps.join(timeout=30)
    assert set(results) == {0, 1}, "a worker did not finish"
    assert results[0]["push0"].bytes == 80 and results[0]["push0"].precision_chunks["fp16"] == 5
    assert results[1]["push0"].bytes == 56 and results[1]["push0"].precision_chunks["int8"] == 4
    assert results[0]["push0"].withheld_chunks == results[1]["push0"].withheld_chunks == 0
    assert results[0]["params0"].tolist() == (-(g0 + g1) / 2).tolist()
    assert results[1]["push1"].bytes == 160  # alone again: fp32
    assert results[1]["params1"].tolist() == (-(g0 + g1)).tolist()
