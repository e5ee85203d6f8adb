"""UDP GSO/GRO batching (mlfc.hosts.transport.gso): segment arithmetic, control messages, the batch's
segments byte for byte against one-chunk packets, run detection in coalesced datagrams, and the fallback
when the kernel refuses GSO. The end-to-end cases run on 127.0.0.1 (loopback segments and coalesces like
a veth pair)."""

from __future__ import annotations

import socket
import struct

import numpy as np
import pytest

from mlfc.hosts.transport import Receiver, ReceiverConfig, Sender, SenderConfig, bind_shim_socket
from mlfc.hosts.transport.gso import (
    SOL_UDP,
    UDP_GRO,
    Chunks,
    RunParser,
    SegmentBatch,
    batch_size,
    gso_ancillary,
    max_segments,
    parse_ancillary,
    segment_spans,
    should_defer,
)
from mlfc.hosts.transport.packet import DATA_HEADER, HEADER_LEN, DataHeader, parse_data
from mlfc.hosts.transport.recovery import Scoreboard
from mlfc.policy.loss import LossBudget
from mlfc.testing.lossy import LossySocket
from mlfc.wire import IMPORTANCE_PROTECTED, Flags

HOST = "127.0.0.1"
CHUNK = 1000


def test_segment_spans_and_limits():
    assert segment_spans(100, 0) == [(0, 100)]  # no GRO: one datagram
    assert segment_spans(100, 100) == [(0, 100)] and segment_spans(100, 400) == [(0, 100)]
    assert segment_spans(300, 100) == [(0, 100), (100, 100), (200, 100)]
    assert segment_spans(250, 100) == [(0, 100), (100, 100), (200, 50)]
    assert segment_spans(0, 100) == [(0, 0)]
    assert max_segments(HEADER_LEN + 1400) == 45  # 45 x 1428 = 64,260 bytes <= 65,507
    assert max_segments(100) == 64 and max_segments(70_000) == 1
    assert gso_ancillary(1428) == [(SOL_UDP, 103, struct.pack("=H", 1428))]


def test_control_messages():
    gro = (SOL_UDP, UDP_GRO, struct.pack("=i", 1428))
    tos = (socket.IPPROTO_IP, socket.IP_TOS, b"\x03")
    assert parse_ancillary([tos, gro]) == (3, 1428)
    assert parse_ancillary([]) == (0, 0)
    assert parse_ancillary([(SOL_UDP, UDP_GRO, b"\x01")]) == (0, 0)  # truncated: ignored


def expected_packet(h: DataHeader, seq: int, flags: int, importance: int, progress: int, payload: bytes) -> bytes:
    buf = bytearray(HEADER_LEN)
    DATA_HEADER.pack_into(buf, 0, *h._replace(chunk_seq=seq, flags=flags, importance=importance, progress=progress))
    return bytes(buf) + payload


def test_batch_segments_are_the_packets_sent_one_by_one():
    n, last = 7, 300
    data = np.random.default_rng(1).integers(0, 256, (n - 1) * CHUNK + last, dtype=np.uint8).tobytes()
    classes = bytearray([3, 9, 0, 15, 7, 2, IMPORTANCE_PROTECTED])
    board = Scoreboard(len(data), CHUNK, classes, LossBudget(len(data), 0))
    h = DataHeader(job_id=5, iteration=77, tensor_id=3, total_len=len(data), chunk_size=CHUNK, n_protected=3)
    batch = SegmentBatch(CHUNK, 8)
    batch.set_tensor(**h._asdict())
    chunks = Chunks(memoryview(data), CHUNK, classes)
    # retransmissions 1 and 4, then new chunks 5 and 6 (the short last one); buckets rise within the batch
    total = batch.fill(board, chunks, [1, 4], 5, 2, [2, 2, 2, 3])
    assert total == 3 * (HEADER_LEN + CHUNK) + HEADER_LEN + last
    got = bytes(batch.mv[:total])
    want = [
        expected_packet(h, 1, Flags.RETX, 9, 2, data[1000:2000]),
        expected_packet(h, 4, Flags.RETX, 7, 2, data[4000:5000]),
        expected_packet(h, 5, 0, 2, 2, data[5000:6000]),
        expected_packet(h, 6, Flags.LAST, IMPORTANCE_PROTECTED, 3, data[6000:]),
    ]
    assert [got[o : o + ln] for o, ln in segment_spans(total, HEADER_LEN + CHUNK)] == want


def gro_buffer(packets: list[bytes]) -> bytearray:
    buf = bytearray(1 << 17)
    raw = b"".join(packets)
    buf[: len(raw)] = raw
    return buf


def packets(seqs, *, tensor: int = 0, chunk: int = CHUNK, n: int = 10, imp=lambda s: s % 16) -> list[bytes]:
    h = DataHeader(job_id=1, tensor_id=tensor, total_len=(n - 1) * chunk + 10, chunk_size=chunk)
    out = []
    for s in seqs:
        size = 10 if s == n - 1 else chunk
        out.append(expected_packet(h, s, Flags.LAST if s == n - 1 else 0, imp(s), 0, bytes([s]) * size))
    return out


def test_run_detection_in_coalesced_datagrams():
    seg = HEADER_LEN + CHUNK
    pk = packets([6, 7, 8, 9])  # 9 is the short last chunk
    parser = RunParser(gro_buffer(pk))
    run = parser.parse(sum(map(len, pk)), seg)
    assert (run.first, run.count, run.last_len, run.protected) == (6, 4, 10, 2)  # classes 8 and 9 are protected
    assert bytes(run.payload[1]) == b"\x07" * CHUNK and bytes(run.payload[3, :10]) == b"\x09" * 10
    for bad in (
        packets([3, 5, 6]),  # a gap
        packets([3, 2]),  # out of order
        packets([3]) + packets([4], tensor=1),  # two tensors
        packets([3, 4], chunk=CHUNK - 1),  # segments sized unlike the descriptor's chunk
        [*packets([3]), b"\x11" + packets([4])[0][1:]],  # an ACK-typed shim among DATA
    ):
        assert RunParser(gro_buffer(bad)).parse(sum(map(len, bad)), seg) is None
    two = packets([1, 2])
    assert RunParser(gro_buffer(two)).parse(seg + HEADER_LEN - 1, seg) is None  # last segment cut in its header
    assert RunParser(gro_buffer(two[:1])).parse(seg, seg) is None  # one segment: not a run


def sender_to(rx: Receiver, **kw) -> tuple[Sender, LossySocket]:
    """A sender that batches whenever GSO is on and it has measured any delivery rate (gso_burst 1 s)."""
    sock = LossySocket(bind_shim_socket(HOST), kw.pop("drop", None), refuse_gso=kw.pop("refuse_gso", False))
    kw.setdefault("gso_burst", 1.0)
    return Sender(rx.address, config=SenderConfig(chunk_size=CHUNK, **kw), sock=sock), sock


def grads(nbytes: int, seed: int = 0) -> bytes:
    return np.random.default_rng(seed).standard_normal(nbytes // 4).astype(np.float32).tobytes()


def first_sends(sock: LossySocket) -> list[tuple[int, int, int, int]]:
    return [(h.chunk_seq, h.flags, h.importance, h.progress) for h in sock.sent if not h.flags & Flags.RETX]


def test_batched_and_unbatched_senders_tag_every_chunk_alike():
    with Receiver((HOST, 0), ReceiverConfig(deadline=0.01)) as rx:
        tags, data = [], grads(400 * CHUNK + 400)
        for gso in (True, False):
            tx, sock = sender_to(rx, gso=gso, idle_gap=None)
            tx.start_iteration(expected_bytes=2 * len(data))
            for k in range(2):
                tx.send_tensor(1, 0, k, data)
                assert bytes(rx.recv(timeout=5).data) == data
            assert (tx.stats.gso_sends > 0) == gso and sock.gso_sends == tx.stats.gso_sends
            tags.append(first_sends(sock))
            tx.close()
        assert tags[0] == tags[1] and len(tags[0]) == 2 * 401


def test_sender_falls_back_to_a_datagram_per_chunk_when_gso_is_refused():
    with Receiver((HOST, 0)) as rx:
        tx, sock = sender_to(rx, refuse_gso=True)
        data = grads(200 * CHUNK)
        for k in range(2):
            tx.send_tensor(1, 0, k, data)
            assert bytes(rx.recv(timeout=5).data) == data
        assert tx.stats.gso_refused == 1 and sock.gso_sends == 1 and tx.stats.gso_sends == 0
        assert tx.stats.chunks_sent == 400 and tx.stats.retransmits == 0
        tx.close()


def test_losses_inside_batches_are_repaired_and_tolerated_as_unbatched():
    with Receiver((HOST, 0), ReceiverConfig(deadline=0.01)) as rx:
        lost = {5, 40, 77}
        classes = bytes([3] * 99 + [IMPORTANCE_PROTECTED])
        tx, _ = sender_to(rx, drop=lambda h, attempt: h.chunk_seq in lost)
        r = tx.send_tensor(1, 0, 0, grads(100 * CHUNK), importance=classes, loss_bound=0.05, timeout=10)
        d = rx.recv(timeout=2)
        assert d.loss.missing_chunks == (5, 40, 77) and r.tolerated_chunks == 3 and r.retransmits == 0
        assert tx.stats.gso_sends > 0
        tx2, sock2 = sender_to(rx, drop=lambda h, attempt: h.chunk_seq in lost and attempt == 0)
        data = grads(100 * CHUNK, 1)
        r2 = tx2.send_tensor(1, 0, 1, data, importance=classes, loss_bound=0.0, timeout=10)
        d2 = rx.recv(timeout=2)
        assert d2.loss.complete and bytes(d2.data) == data and r2.retransmits >= 3
        assert {h.chunk_seq for h in sock2.sent if h.flags & Flags.RETX} >= lost
        tx.close()
        tx2.close()


def test_a_byte_counting_controller_repairs_losses_in_batches():
    """DCQCN counts sent bytes chunk by chunk (transmit.count_sent); a batch may hold retransmissions only."""
    with Receiver((HOST, 0), ReceiverConfig(deadline=0.01)) as rx:
        lost = {5, 40, 77, 97, 98}
        tx, sock = sender_to(
            rx, cc="dcqcn", line_rate=10e9, drop=lambda h, attempt: h.chunk_seq in lost and attempt == 0
        )
        data = grads(100 * CHUNK, 2)
        r = tx.send_tensor(1, 0, 0, data, loss_bound=0.0, timeout=10)
        d = rx.recv(timeout=2)
        assert d.loss.complete and bytes(d.data) == data and r.retransmits >= len(lost)
        assert {h.chunk_seq for h in sock.sent if h.flags & Flags.RETX} >= lost and tx.stats.gso_sends > 0
        tx.close()


def test_receiver_takes_coalesced_datagrams_run_by_run_or_segment_by_segment():
    with Receiver((HOST, 0), ReceiverConfig(ack_every=1000)) as rx:
        if not rx.gro:
            pytest.skip("the kernel does not offer UDP_GRO on this socket")
        raw = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        seg = HEADER_LEN + CHUNK
        # a read of two tensors goes segment by segment, then tensor 0 in two runs (read in this order)
        for pk in (packets([0, 1], tensor=1) + packets([3], tensor=2), packets(range(5)), packets(range(5, 10))):
            raw.sendmsg([b"".join(pk)], gso_ancillary(seg), 0, rx.address)
        d = rx.recv(timeout=2)
        assert (d.tensor_id, d.loss.complete) == (0, True)
        assert bytes(d.data) == b"".join(bytes([s]) * (10 if s == 9 else CHUNK) for s in range(10))
        st = rx.stats
        assert st.packets == 13 and st.malformed == 0 and st.duplicates == 0
        assert st.datagrams == 3 and st.runs == 1  # each GSO send one read; 5..9 placed at once
        raw.close()


def test_parse_data_reads_every_segment_of_a_batch():
    pk = packets([0, 1, 2])
    headers = [parse_data(p) for p in pk]
    assert [h.chunk_seq for h in headers] == [0, 1, 2] and {h.tensor_id for h in headers} == {0}


def test_batch_size_follows_the_rate_and_stays_off_for_slow_flows():
    seg = HEADER_LEN + 1400
    assert batch_size(3e9 / 8, 0.001, seg, 45) == 45  # 3 Gb/s: 1 ms is 262 chunks, capped at one send
    assert batch_size(200e6 / 8, 0.001, seg, 45) == 17
    assert batch_size(80e6 / 8, 0.001, seg, 45) == 1  # below GSO_MIN_BATCH: unbatched
    assert batch_size(float("inf"), 0.001, seg, 45) == 45


def test_deferring_waits_for_room_for_a_batch_while_acks_are_due():
    b = Scoreboard(100 * CHUNK, CHUNK, bytearray(100), LossBudget(100 * CHUNK, 0))
    assert not should_defer(b, room=3, batch=45, cwnd_chunks=300)  # nothing in flight: no ACK would come
    b.on_transmit_run(0, 50, 1, 0.0)
    assert should_defer(b, room=3, batch=45, cwnd_chunks=300)
    assert not should_defer(b, room=45, batch=45, cwnd_chunks=300)  # a whole batch fits
    assert not should_defer(b, room=3, batch=45, cwnd_chunks=6)  # a third of a small window is enough
    b.on_transmit_run(50, 48, 51, 0.0)
    assert not should_defer(b, room=3, batch=45, cwnd_chunks=300)  # only 2 chunks left: send them


class FillsUp(LossySocket):
    """Every third GSO send finds the socket buffer full (EAGAIN), as a fast sender does."""

    def sendmsg(self, buffers, ancdata=(), flags: int = 0, address=None) -> int:
        self.calls = getattr(self, "calls", 0) + 1
        if self.calls % 3 == 0:
            raise BlockingIOError
        return super().sendmsg(buffers, ancdata, flags, address)


def test_a_batch_cut_short_by_a_full_socket_records_only_what_left():
    with Receiver((HOST, 0)) as rx:
        sock = FillsUp(bind_shim_socket(HOST))
        tx = Sender(rx.address, config=SenderConfig(chunk_size=CHUNK, gso_burst=1.0), sock=sock)
        data = grads(3000 * CHUNK)
        r = tx.send_tensor(1, 0, 0, data, importance=0)
        assert bytes(rx.recv(timeout=10).data) == data and r.retransmits == 0
        first = [h.chunk_seq for h in sock.sent if not h.flags & Flags.RETX]
        assert first == list(range(3000))  # every chunk left once, in order, none counted twice
        assert tx.stats.chunks_sent == 3000 and tx.stats.gso_sends == sock.gso_sends < sock.calls  # EAGAINs happened
        tx.close()
