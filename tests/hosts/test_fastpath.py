"""The compiled per-chunk loops (mlfc.hosts.fastpath) against the numpy paths they replace: the same
magnitudes, classes, batch bytes and reassembly state, on the cases the numpy paths are tested with."""

from __future__ import annotations

import numpy as np
import pytest

from mlfc.hosts import fastpath
from mlfc.hosts.importance import assign_importance, chunk_magnitudes
from mlfc.hosts.transport import Receiver, ReceiverConfig, Sender, SenderConfig
from mlfc.hosts.transport.gso import Chunks, RunParser, SegmentBatch
from mlfc.hosts.transport.packet import DATA_HEADER, HEADER_LEN, DataHeader
from mlfc.hosts.transport.reassembly import Reassembly
from mlfc.hosts.transport.recovery import Scoreboard
from mlfc.policy.loss import LossBudget
from mlfc.wire import SHIM, Flags

CHUNK = 1000
HOST = "127.0.0.1"


@pytest.fixture(scope="module")
def fast() -> fastpath.FastPath:
    try:
        path = fastpath.build()
    except fastpath.FastPathError as exc:
        pytest.skip(f"compiled path not built here: {exc}")
    return fastpath.FastPath(path)


def test_locate_finds_the_bits_pack_writes():
    for layout in (SHIM, DATA_HEADER):
        for name, width in layout.fields:
            if name.startswith("reserved"):
                continue
            offset, nbytes, shift, w = layout.locate(name)
            value = (1 << width) - 1
            slot = int.from_bytes(layout.pack(**{name: value})[offset : offset + nbytes], "big")
            assert (w, slot) == (width, value << shift), name


@pytest.mark.parametrize("chunk", [1400, 1401, 7, 4, 3])
def test_magnitudes_are_numpy_s(fast, chunk):
    rng = np.random.default_rng(chunk)
    values = rng.standard_normal(20_003).astype(np.float32) * rng.uniform(0, 5, 20_003).astype(np.float32)
    values[[5, 900, 15_000]] = [np.nan, np.inf, -np.inf]
    for nbytes in (len(values) * 4, len(values) * 4 - 3, chunk + 1, 3):
        buf = values.tobytes()[:nbytes]
        want = chunk_magnitudes(buf, chunk, compiled=False)
        got = chunk_magnitudes(buf, chunk, compiled=True)
        np.testing.assert_allclose(got, want, rtol=2e-6)


def test_classes_are_numpy_s_for_gradients(fast):
    for seed in range(4):
        grads = np.random.default_rng(seed).standard_normal(400_000).astype(np.float32).tobytes()
        for layer in (0, 3):
            kw = {"layer_index": layer, "num_layers": 4}
            assert assign_importance(grads, 1400, compiled=True, **kw) == assign_importance(
                grads, 1400, compiled=False, **kw
            )


def tensor(n: int, last: int) -> bytes:
    return np.random.default_rng(n).integers(0, 256, (n - 1) * CHUNK + last, dtype=np.uint8).tobytes()


@pytest.mark.parametrize(
    ("n", "last", "first", "count", "buckets"),
    [
        (9, 300, 0, 8, [4] * 8),  # whole chunks, one bucket
        (9, 300, 5, 4, [2, 2, 3, 3]),  # up to the short last chunk, buckets rising
        (6, CHUNK, 2, 4, [1] * 4),  # the last chunk full-sized
        (3, 1, 1, 2, [15, 15]),
    ],
)
def test_fill_run_writes_the_numpy_batch(fast, n, last, first, count, buckets):
    data = tensor(n, last)
    classes = bytearray(np.random.default_rng(n + first).integers(0, 16, n, dtype=np.uint8).tobytes())
    board = Scoreboard(len(data), CHUNK, classes, LossBudget(len(data), 0))
    h = DataHeader(job_id=5, iteration=77, tensor_id=3, total_len=len(data), chunk_size=CHUNK, n_protected=3)
    out = []
    for engine in (None, fast):
        batch = SegmentBatch(CHUNK, 8, engine)
        batch.buf[:] = b"\xaa" * len(batch.buf)  # what an earlier batch left
        batch.set_tensor(**h._asdict())
        total = batch.fill(board, Chunks(memoryview(data), CHUNK, classes), [], first, count, buckets)
        out.append((total, bytes(batch.mv[:total])))
    assert out[0] == out[1]


def packets(seqs, *, n: int = 10, tensor: int = 0, chunk: int = CHUNK, imp=lambda s: s % 16) -> list[bytes]:
    h = DataHeader(job_id=1, tensor_id=tensor, total_len=(n - 1) * CHUNK + 10, chunk_size=chunk)
    out = []
    for s in seqs:
        buf = bytearray(HEADER_LEN)
        flags = Flags.LAST if s == n - 1 else 0
        DATA_HEADER.pack_into(buf, 0, *h._replace(chunk_seq=s, flags=flags, importance=imp(s)))
        out.append(bytes(buf) + bytes([s + 1]) * (10 if s == n - 1 else chunk))
    return out


def state(tr: Reassembly) -> tuple:
    return (bytes(tr.buf), bytes(tr.received), tr.count, tr.cum, tr.prot_received, tr.latest, tr.unacked,
            tr.last_seen)  # fmt: skip


@pytest.mark.parametrize(
    ("before", "read"),
    [
        ([], packets(range(5))),
        ([], packets([6, 7, 8, 9])),  # ends with the short last chunk
        ([0, 1], packets([4, 5, 6])),  # above a hole
        ([5], packets([3, 4, 5])),  # one chunk seen before: not a run
        ([], packets([3, 5, 6])),  # a gap
        ([], packets([3, 2])),  # out of order
        ([], packets([3]) + packets([4], tensor=1)),  # two tensors
        ([], packets([3, 4], chunk=CHUNK - 1)),  # segments sized unlike the descriptor's chunk
        ([], [*packets([3]), b"\x11" + packets([4])[0][1:]]),  # an ACK-typed shim among DATA
        ([], packets([8, 9], n=11)),  # the last segment shorter than its chunk
        ([], packets([8, 9, 10], n=11)[:2] + packets([10], n=11)),  # past the tensor's end
    ],
)
def test_take_run_is_run_parser_and_place_run(fast, before, read):
    seg = HEADER_LEN + CHUNK
    total = 9 * CHUNK + 10
    raw = b"".join(read)
    buf = bytearray(1 << 17)
    buf[: len(raw)] = raw
    trs = [Reassembly(total, CHUNK, 0, 0, 0.0) for _ in range(2)]
    for tr in trs:
        for s in before:
            tr.place(s, memoryview(packets([s])[0])[HEADER_LEN:], False, 8, 0.5)
    run = RunParser(buf).parse(len(raw), seg)
    ref = trs[0]  # the receiver's checks around RunParser (Receiver._on_run), then place_run
    end = None if run is None else run.first + run.count
    if (
        run is not None
        and end <= ref.n
        and run.last_len == ref.span(end - 1)[1]
        and ref.received.find(1, run.first, end) < 0
    ):
        want = (run.count, ref.place_run(run.first, run.payload, run.last_len, run.protected, 8, 1.0))
    else:
        want = None
    first = DataHeader._make(DATA_HEADER.unpack_from(buf)).chunk_seq
    got = trs[1].take_run(fast, fastpath.address(buf), len(raw), seg, first, 8, 1.0)
    assert got == want
    assert state(trs[1]) == state(trs[0])


@pytest.mark.parametrize("compiled", [False, True])
def test_both_paths_deliver_the_same_tensors_over_sockets(fast, compiled):
    with Receiver((HOST, 0), ReceiverConfig(compiled=compiled)) as rx:
        if not rx.gro:
            pytest.skip("the kernel does not offer UDP_GRO on this socket")
        grads = np.random.default_rng(3).standard_normal(300_001).astype(np.float32).tobytes()[:-2]
        with Sender(rx.address, (HOST, 0), SenderConfig(compiled=compiled)) as tx:
            for k in range(3):
                tx.send_tensor(1, 0, k, grads)
                d = rx.recv(timeout=5)
                assert bytes(d.data) == grads and d.loss.complete
        assert rx.stats.runs > 0


def test_not_built_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFC_FASTPATH_BUILD", str(tmp_path))
    fastpath.load.cache_clear()
    try:
        assert fastpath.load() is None
        assert "not built" in fastpath.status()
    finally:
        monkeypatch.delenv("MLFC_FASTPATH_BUILD")
        fastpath.load.cache_clear()
