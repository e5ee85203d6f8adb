"""The transport end to end on 127.0.0.1: delivery, ECN feedback, bounded loss, bad input, vanished peers.

Loss and CE marks are injected on the sender's socket (mlfc.testing.lossy), so every case is deterministic.
"""

from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest

from mlfc.hosts.transport import (
    PeerTimeout,
    Receiver,
    ReceiverConfig,
    Sender,
    SenderConfig,
    TransferAborted,
    TransferRejected,
    bind_shim_socket,
)
from mlfc.hosts.transport.config import stale_timeout_for
from mlfc.hosts.transport.packet import HEADER_LEN, DataHeader, build_ack, pack_data_header_into
from mlfc.policy.mltcp import MltcpParams
from mlfc.policy.mltcp_tuning import TuningParams
from mlfc.testing.lossy import LossySocket
from mlfc.wire import IMPORTANCE_PROTECTED, SHIM_PORT_BASE, Flags, MsgType, Shim

HOST = "127.0.0.1"
CHUNK = 1000


@pytest.fixture
def receiver():
    rx = Receiver((HOST, 0), ReceiverConfig(deadline=0.01))
    yield rx
    rx.close()


def sender_to(rx: Receiver, drop=None, force_tos=None, **cfg) -> tuple[Sender, LossySocket]:
    cfg.setdefault("chunk_size", CHUNK)
    sock = LossySocket(bind_shim_socket(HOST), drop, force_tos=force_tos)
    return Sender(rx.address, config=SenderConfig(**cfg), sock=sock), sock


def grads(nbytes: int, seed: int = 0) -> bytes:
    return np.random.default_rng(seed).standard_normal(nbytes // 4).astype(np.float32).tobytes()


@pytest.mark.parametrize("cc", ["reno", "cubic", "dcqcn", "dctcp"])
@pytest.mark.parametrize("mltcp", [None, MltcpParams()])
def test_delivers_tensors_intact(receiver, cc, mltcp):
    tx, _ = sender_to(receiver, cc=cc, mltcp=mltcp, line_rate=2e9)
    for k, size in enumerate((1, CHUNK, 3 * CHUNK + 7, 2_000_000)):
        data = grads(size, k) if size % 4 == 0 else bytes(range(256)) * (size // 256) + b"z" * (size % 256)
        r = tx.send_tensor(3, 10, k, data)
        d = receiver.recv(timeout=5)
        assert (d.job_id, d.iteration, d.tensor_id, d.peer) == (3, 10, k, tx.local_address)
        assert bytes(d.data) == data and d.loss.complete
        assert r.nbytes == size and r.chunks == -(-size // CHUNK)
    assert tx.stats.bytes_acked == tx.stats.payload_bytes_sent
    tx.close()


def test_data_is_ect0_and_both_ports_are_in_the_shim_range(receiver):
    probe = bind_shim_socket(HOST)
    probe.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    probe.settimeout(2)
    tx = Sender(probe.getsockname(), (HOST, 0), SenderConfig(chunk_size=CHUNK, peer_timeout=0.2))
    with pytest.raises(PeerTimeout):
        tx.send_tensor(1, 0, 0, b"abc")
    _, anc, _, addr = probe.recvmsg(2048, socket.CMSG_SPACE(4))
    tos = [d[0] for level, kind, d in anc if level == socket.IPPROTO_IP and kind == socket.IP_TOS]
    assert tos == [0x02]
    assert addr[1] & 0xFF00 == SHIM_PORT_BASE and probe.getsockname()[1] & 0xFF00 == SHIM_PORT_BASE
    tx.close()
    probe.close()


def test_ce_marks_give_ece_to_window_cc_and_rate_limited_cnps_to_dcqcn():
    rx = Receiver((HOST, 0), ReceiverConfig(cnp_interval=0.005))
    try:
        reno, _ = sender_to(rx, force_tos=0x03, cc="reno")  # every packet arrives CE-marked
        start = time.monotonic()
        reno.send_tensor(1, 0, 0, grads(400_000))
        elapsed = time.monotonic() - start
        rx.recv(timeout=2)
        assert reno.stats.ece_acks > 0 and reno.stats.ece_events > 0
        assert reno.cc.cwnd < 10 * CHUNK  # cut below the initial window
        assert rx.stats.ce_marked == reno.stats.chunks_sent
        assert 1 <= rx.stats.cnps_sent <= elapsed / 0.005 + 2  # at most one per flow per interval
        dcqcn, _ = sender_to(rx, force_tos=0x03, cc="dcqcn", line_rate=1e9, sample_interval=1e-6)
        dcqcn.send_tensor(1, 0, 1, grads(400_000))
        rx.recv(timeout=2)
        assert dcqcn.stats.cnps == dcqcn.cc.cnps > 0
        rates = [rate for _, _, rate, *_ in dcqcn.stats.samples]
        # The first CNP cuts by alpha / 2; alpha starts at 1 and decays every K (2.2 ms at 1 Gb/s) until
        # that CNP arrives, so the cut is a little under half (the exact rule: tests/hosts/test_cc_dcqcn.py).
        assert rates[0] == 1e9 / 8 and min(rates) <= 0.6 * 1e9 / 8
        clean, _ = sender_to(rx, cc="dcqcn", line_rate=1e9)
        clean.send_tensor(1, 0, 2, grads(400_000))
        rx.recv(timeout=2)
        assert clean.stats.cnps == 0 and clean.stats.ece_acks == 0
    finally:
        rx.close()


def chunks_with(classes: bytes, protected: bool) -> list[int]:
    return [i for i, c in enumerate(classes) if (c >= IMPORTANCE_PROTECTED) == protected]


def test_zero_fill_within_the_bound(receiver):
    n = 100
    classes = bytes([3] * (n - 1) + [IMPORTANCE_PROTECTED])
    lost = {5, 40, 77}  # persistently dropped: a switch discarding low-importance chunks
    tx, _ = sender_to(receiver, drop=lambda h, attempt: h.chunk_seq in lost)
    data = grads(n * CHUNK)
    r = tx.send_tensor(1, 0, 0, data, importance=classes, loss_bound=0.05, timeout=10)
    d = receiver.recv(timeout=2)
    assert d.loss.missing_chunks == (5, 40, 77)
    assert d.loss.zero_filled_bytes == 3 * CHUNK and d.loss.loss_fraction == 0.03
    got = np.frombuffer(d.data, dtype=np.uint8).reshape(n, CHUNK)
    want = np.frombuffer(data, dtype=np.uint8).reshape(n, CHUNK)
    for i in range(n):
        assert (got[i] == 0).all() if i in lost else (got[i] == want[i]).all()
    assert r.fin and r.tolerated_chunks == 3 and r.retransmits == 0  # tolerated, not retransmitted
    assert receiver.stats.tensors_zero_filled == 1


def test_retransmits_above_the_bound(receiver):
    n = 100
    classes = bytes([3] * (n - 1) + [IMPORTANCE_PROTECTED])
    lost = {5, 20, 40, 60, 77}  # dropped on their first two transmissions
    tx, sock = sender_to(receiver, drop=lambda h, attempt: h.chunk_seq in lost and attempt < 2)
    data = grads(n * CHUNK)
    r = tx.send_tensor(1, 0, 0, data, importance=classes, loss_bound=0.02, timeout=10)  # room for 2 chunks
    d = receiver.recv(timeout=3)
    assert len(d.loss.missing_chunks) <= 2 and d.loss.loss_fraction <= 0.02
    assert set(d.loss.missing_chunks) <= lost
    assert r.retransmits >= 3 * 2  # the 3 beyond the budget needed two retransmissions each
    assert {h.chunk_seq for h in sock.sent if h.flags & Flags.RETX} >= lost - set(d.loss.missing_chunks)
    r0 = tx.send_tensor(1, 0, 1, data, importance=classes, loss_bound=0.0, timeout=10)
    d0 = receiver.recv(timeout=3)
    assert d0.loss.complete and bytes(d0.data) == data and r0.retransmits >= 2 * len(lost)


def test_protected_chunks_are_never_lost(receiver):
    data = grads(200 * CHUNK)
    tx, sock = sender_to(
        receiver,
        # protected chunks: each lost on its first two transmissions; unprotected: one in four lost for good
        drop=lambda h, attempt: (attempt < 2) if h.importance >= IMPORTANCE_PROTECTED else h.chunk_seq % 4 == 0,
        min_rto=0.01,
        initial_rto=0.01,
    )
    r = tx.send_tensor(1, 0, 0, data, loss_bound=0.5, timeout=10)  # importance from gradient magnitude
    d = receiver.recv(timeout=2)
    first = {h.chunk_seq: h.importance for h in sock.sent if not h.flags & Flags.RETX}
    assert sorted(first) == list(range(200))
    classes = bytes(first[i] for i in range(200))
    protected = chunks_with(classes, True)
    assert 50 <= len(protected) <= 51  # 25 % by magnitude, plus the last chunk
    assert not set(protected) & set(d.loss.missing_chunks)
    got, want = np.frombuffer(d.data, dtype=np.uint8), np.frombuffer(data, dtype=np.uint8)
    for i in protected:
        assert (got[i * CHUNK : (i + 1) * CHUNK] == want[i * CHUNK : (i + 1) * CHUNK]).all()
    assert set(d.loss.missing_chunks) == {i for i in chunks_with(classes, False) if i % 4 == 0}
    assert r.retransmits >= 2 * len(protected)


def test_persistent_loss_above_the_bound_times_out_not_hangs(receiver):
    tx, _ = sender_to(receiver, drop=lambda h, attempt: h.chunk_seq == 3, peer_timeout=5, initial_rto=0.05, max_rto=0.1)
    start = time.monotonic()
    with pytest.raises(PeerTimeout, match="tensor 0 not delivered in time"):
        tx.send_tensor(1, 0, 0, grads(10 * CHUNK), importance=0, loss_bound=0.0, timeout=0.8)
    assert time.monotonic() - start < 2


def test_vanished_peer_raises_peer_timeout(receiver):
    tx, _ = sender_to(receiver, peer_timeout=0.4)
    tx.send_tensor(1, 0, 0, grads(50 * CHUNK))
    receiver.recv(timeout=2)
    receiver.close()  # the peer goes away
    start = time.monotonic()
    with pytest.raises(PeerTimeout, match="no feedback"):
        tx.send_tensor(1, 0, 1, grads(50 * CHUNK))
    assert time.monotonic() - start < 1.5


def test_abort_ends_a_blocked_transfer_at_once_and_the_next_one_runs(receiver):
    tx, _ = sender_to(receiver, peer_timeout=30.0)
    receiver.close()  # nobody answers: without abort() the transfer would wait the 30 s peer timeout
    timer = threading.Timer(0.3, tx.abort)
    timer.start()
    start = time.monotonic()
    with pytest.raises(TransferAborted, match="aborted"):
        tx.send_tensor(1, 0, 1, grads(50 * CHUNK))
    took = time.monotonic() - start
    assert 0.25 < took < 2.0, took  # within one RTO (max_rto 1 s) of the abort
    rx2 = Receiver(("127.0.0.1", 0))
    try:
        tx2, _ = sender_to(rx2)
        tx2.abort()  # an abort between transfers does not touch the next one
        tx2.send_tensor(1, 0, 2, grads(4 * CHUNK))
        assert rx2.recv(timeout=5).tensor_id == 2
    finally:
        rx2.close()


def test_bad_input_is_rejected(receiver):
    tx, _ = sender_to(receiver, max_tensor_bytes=10_000, jobs=frozenset({1}))
    for kwargs in (
        {"buffer": b"x" * 10_001},
        {"buffer": b""},
        {"job": 2},
        {"job": 70_000},
        {"tensor_id": 1 << 16},
        {"loss_bound": 1.5},
        {"importance": [1, 2]},
        {"buffer": np.zeros((4, 4), dtype=np.float32)[:, 1]},  # not contiguous
    ):
        args = {"job": 1, "iteration": 0, "tensor_id": 0, "buffer": b"x" * 100, **kwargs}
        with pytest.raises(TransferRejected):
            tx.send_tensor(args.pop("job"), args.pop("iteration"), args.pop("tensor_id"), args.pop("buffer"), **args)
    assert tx.stats.chunks_sent == 0
    with pytest.raises(ValueError, match="shim range"):
        Sender((HOST, 9999))


def data_packet(job: int, total: int, seq: int = 0, chunk: int = 100, payload: bytes = b"", tensor: int = 0) -> bytes:
    buf = bytearray(HEADER_LEN)
    pack_data_header_into(
        buf, DataHeader(job_id=job, tensor_id=tensor, chunk_seq=seq, total_len=total, chunk_size=chunk)
    )
    return bytes(buf) + payload


def test_receiver_counts_and_ignores_bad_packets():
    rx = Receiver((HOST, 0), ReceiverConfig(jobs=frozenset({1}), max_tensor_bytes=1_000_000))
    try:
        raw = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for pkt in (
            b"",
            b"\x00" * 5,  # truncated shim
            b"\xf0" + b"\x00" * 40,  # unknown version
            b"\x1f" + b"\x00" * 40,  # unknown message type
            data_packet(1, 500)[:20],  # DATA shim without the descriptor
            data_packet(1, 500, seq=9, payload=b"x" * 100),  # chunk beyond the tensor
            data_packet(1, 500, payload=b"x" * 7),  # wrong payload length
        ):
            raw.sendto(pkt, rx.address)
        raw.sendto(build_ack(1, 0, 0, 0, (), 0), rx.address)  # valid shim, wrong direction
        raw.sendto(Shim(MsgType.CNP, 1, 0).pack(), rx.address)
        raw.sendto(data_packet(2, 100, payload=b"y" * 100), rx.address)  # unknown job
        raw.sendto(data_packet(1, 2_000_000, payload=b"y" * 100, tensor=1), rx.address)  # oversized tensor
        raw.sendto(data_packet(1, 600, payload=b"y" * 100), rx.address)  # disagrees with the first chunk's 500 B
        tx = Sender(rx.address, (HOST, 0), SenderConfig(chunk_size=CHUNK))
        tx.send_tensor(1, 5, 5, b"still works")
        d = rx.recv(timeout=2)
        assert bytes(d.data) == b"still works"
        st = rx.stats
        assert (st.malformed, st.foreign, st.unknown_job, st.oversized) == (8, 2, 1, 1)
        assert st.tensors_delivered == 1
        tx.close()
        raw.close()
    finally:
        rx.close()


def test_sender_counts_and_ignores_bad_feedback():
    peer = bind_shim_socket(HOST)
    tx = Sender(peer.getsockname(), (HOST, 0), SenderConfig(chunk_size=CHUNK, peer_timeout=0.3))
    for pkt in (b"junk", b"\x10" * 3, Shim(MsgType.DATA, 1, 0).pack() + b"x" * 20, build_ack(9, 0, 0, 0, (), 0)):
        peer.sendto(pkt, tx.local_address)
    peer.sendto(build_ack(1, 0, 7, 0, (), 0), tx.local_address)  # right job, another tensor
    with pytest.raises(PeerTimeout):
        tx.send_tensor(1, 0, 0, b"z" * 3000)
    assert (tx.stats.malformed, tx.stats.foreign, tx.stats.stale) == (2, 2, 1)
    tx.close()
    peer.close()


def test_progress_field_and_mltcp_iterations(receiver):
    tx, sock = sender_to(receiver, mltcp=MltcpParams(), idle_gap=None)
    tx.start_iteration(expected_bytes=2 * 100 * CHUNK)
    for k in range(2):
        tx.send_tensor(1, 0, k, grads(100 * CHUNK))
        receiver.recv(timeout=2)
    first = [h.progress for h in sock.sent if h.tensor_id == 0 and not h.flags & Flags.RETX]
    second = [h.progress for h in sock.sent if h.tensor_id == 1 and not h.flags & Flags.RETX]
    assert first == sorted(first) and second == sorted(second)
    assert first[0] == 0 and 6 <= first[-1] <= 8 and 7 <= second[0] <= 8 and second[-1] == 15
    assert tx.progress.ratio == 1.0 and tx.cc.factor() == MltcpParams().slope + MltcpParams().intercept
    tx.send_tensor(1, 1, 0, grads(10 * CHUNK))  # a new iteration number starts a new iteration
    receiver.recv(timeout=2)
    assert tx.progress.iterations_started == 2 and tx.progress.bytes_per_iteration == 2 * 100 * CHUNK
    assert tx.stats.samples and all(len(s) == 6 for s in tx.stats.samples)


@pytest.mark.parametrize("restart", [True, False])
def test_window_restarts_after_an_idle_gap_longer_than_the_rto(receiver, restart):
    tx, _ = sender_to(receiver, cc="reno", restart_after_idle=restart, min_rto=0.05, initial_rto=0.05)
    data = grads(200_000)
    tx.send_tensor(1, 0, 0, data)
    receiver.recv(timeout=5)
    tx.send_tensor(1, 0, 1, data)  # back to back: no idle time
    receiver.recv(timeout=5)
    assert tx.stats.idle_restarts == 0
    grown = tx.cc.cwnd
    time.sleep(1.2)  # longer than any RTO (max_rto 1 s)
    tx.send_tensor(1, 1, 0, grads(1000))
    receiver.recv(timeout=5)
    assert tx.stats.idle_restarts == (1 if restart else 0)
    if restart:
        assert tx.cc.cwnd < grown
    tx.close()


def test_sender_tunes_f_from_its_iteration_times(receiver):
    """SenderConfig.mltcp_tune: every iteration boundary feeds the tuner, and the controller's F moves with it."""
    tx, _ = sender_to(receiver, mltcp=MltcpParams(2.0, 0.5), mltcp_tune=TuningParams(window=1, settle=0))
    assert tx.mltcp_params == MltcpParams(2.0, 0.5)
    for it in range(3):
        tx.start_iteration(20 * CHUNK)  # and the iteration number changes too: still one boundary
        tx.send_tensor(1, it, 0, grads(20 * CHUNK))
        receiver.recv(timeout=2)
    assert len(tx.online_f.tuner.history) == 2
    assert tx.mltcp_params == tx.online_f.params == tx.cc.mltcp.params != MltcpParams(2.0, 0.5)
    tx.close()


def test_a_receiver_that_gave_the_tensor_up_gets_it_again():
    """A starved flow: chunk 0's transmissions are lost for longer than the receiver's stale timeout, so it
    drops the rest it had acknowledged and starts again from chunk 0's retransmission. Its ACK then shows the
    tensor whole to the sender's scoreboard but carries no FIN: the sender must send the rest again, not take
    the tensor for delivered (the peer would wait for it forever)."""
    rx = Receiver((HOST, 0), ReceiverConfig(deadline=0.01, stale_timeout=0.2))
    try:
        n = 40
        until = time.monotonic() + 1.5  # the receiver sweeps every second
        tx, _ = sender_to(rx, drop=lambda h, attempt: h.chunk_seq == 0 and time.monotonic() < until)
        data = grads(n * CHUNK)
        r = tx.send_tensor(1, 0, 0, data, timeout=10)
        d = rx.recv(timeout=3)
        assert d.loss.complete and bytes(d.data) == data
        assert rx.stats.abandoned == 1
        assert tx.stats.reneged_chunks == n - 1 and r.missing_chunks == ()
    finally:
        rx.close()


def test_a_receiver_keeps_a_partial_tensor_longer_than_its_peers_keep_sending_it():
    assert stale_timeout_for(SenderConfig(peer_timeout=600.0)) == 1200.0
    assert stale_timeout_for(SenderConfig()) == ReceiverConfig().stale_timeout  # 3 s peers: the 10 s default
