"""ECN feedback through the sender's ACK path (sender._on_ack, fed from a queue of ACKs): one window reduction
per round trip for losses and echoes together, and the per-ACK echo DCTCP counts (on_ecn_feedback)."""

from __future__ import annotations

import itertools
from collections import deque

import pytest

from mlfc.hosts.transport import Receiver, ReceiverConfig, Sender, SenderConfig, bind_shim_socket, outgoing
from mlfc.hosts.transport.packet import (
    HEADER_LEN,
    DataHeader,
    build_ack,
    pack_data_header_into,
    parse_feedback,
)
from mlfc.policy.mltcp import MltcpParams
from mlfc.testing.lossy import CE_CMSG, LossySocket
from mlfc.wire import Flags, MsgType

HOST = "127.0.0.1"
PEER = (HOST, 19712)
CHUNK, CHUNKS = 1000, 40


class QueuedSocket:
    """What the sender's loop reads: datagrams queued by the test, each read once."""

    def __init__(self) -> None:
        self.queue: deque[bytes] = deque()

    def setsockopt(self, *args: object) -> None:
        pass

    def connect(self, peer: tuple[str, int]) -> None:
        pass

    def setblocking(self, flag: bool) -> None:
        pass

    def recv_into(self, buf: bytearray) -> int:
        if not self.queue:
            raise BlockingIOError
        data = self.queue.popleft()
        buf[: len(data)] = data
        return len(data)


def sender_with_window_sent(cc: str) -> tuple[Sender, QueuedSocket, outgoing.Transfer]:
    """A sender whose ``CHUNKS`` chunks are all in flight (transmissions 1..CHUNKS), none acknowledged."""
    sock = QueuedSocket()
    sender = Sender(PEER, config=SenderConfig(chunk_size=CHUNK, cc=cc), sock=sock, clock=lambda: 1.0)
    t = outgoing.prepare(sender.config, 1, 0, 0, bytes(CHUNK * CHUNKS), 0, 0, 1, 0.0, batched=False)
    t.board.on_transmit_run(0, CHUNKS, sender.recovery.next_tx(CHUNKS), 0.5)
    return sender, sock, t


def ack(cum: int, blocks=(), flags: int = 0) -> bytes:
    return build_ack(1, 0, 0, cum, blocks, flags)


@pytest.mark.parametrize(("cc", "factor"), [("reno", 0.5), ("cubic", 0.7), ("dctcp", 0.5)])
def test_an_ack_that_finds_a_loss_and_echoes_ecn_reduces_the_window_once(cc, factor):
    """Chunk 0 lost (chunks 1..7 SACKed, RACK) and ECE on the same ACK: one congestion response, the loss's
    (RFC 3168 6.1.2); before, the echo cut a second time (Reno to a quarter, CUBIC to 0.49)."""
    sender, sock, t = sender_with_window_sent(cc)
    before = sender.cc.cwnd
    sock.queue.append(ack(0, ((1, 8),), Flags.ECE))
    sender._drain_feedback(t)
    st = sender.stats
    assert (st.loss_events, st.ece_events, st.ece_acks) == (1, 0, 1)
    assert sender.cc.cwnd >= factor * before  # cut once, then the ACK's bytes grow it in congestion avoidance
    assert sender.cc.cwnd < factor * before + 2 * CHUNK


def test_every_ack_reaches_the_controller_with_its_marked_bytes_and_one_echo_cuts_per_round_trip():
    """on_ecn_feedback sees each ACK's newly acknowledged bytes and, with ECE, the same as marked (plain ACKs
    merged by the sender count together, unmarked); of the echoes for one window of data only the first is a
    congestion event (the recovery point), so DCTCP cuts once, by alpha / 2."""
    sender, sock, t = sender_with_window_sent("dctcp")
    cc = sender.cc
    sock.queue.extend([ack(4), ack(8), ack(12, flags=Flags.ECE), ack(16, flags=Flags.ECE), ack(20), ack(24)])
    sender._drain_feedback(t)
    assert (cc.acked_bytes, cc.marked_bytes) == (24 * CHUNK, 8 * CHUNK)
    assert sender.stats.ece_bytes_acked == 8 * CHUNK and sender.stats.ece_acks == 2
    assert sender.stats.ece_events == cc.ecn_cuts == 1
    # the first window (10 segments, the initial window) ended at the first echo, 4 of its 12 segments marked;
    # slow start had taken cwnd from 10 to 18 segments on the 8 before
    alpha = (1 - 1 / 16) + 1 / 16 * 4 / 12
    assert cc.windows >= 1 and cc.ssthresh == pytest.approx(18 * CHUNK * (1 - alpha / 2))


def data_packet(seq: int, n: int, size: int = 100) -> bytes:
    buf = bytearray(HEADER_LEN)
    pack_data_header_into(buf, DataHeader(job_id=1, tensor_id=0, chunk_seq=seq, total_len=n * size, chunk_size=size))
    return bytes(buf) + bytes([seq]) * size


def test_every_ack_echoes_the_ce_state_of_each_chunk_it_acknowledges():
    """DCTCP's receiver (RFC 8257 3.2, ReceiverConfig.ack_on_ce_change): the ACKs of a tensor whose chunks
    arrive marked in runs and alone (CE on the wire, as a switch marks) each newly acknowledge chunks of one
    CE state, and their ECE flags say which: the sender's marked bytes are the CE-marked bytes exactly. ACKs
    wait (ack_every 1000, ack_delay 0.1 s) so without the rule one ACK would cover chunks of both states."""
    marks = [0, 0, 1, 1, 0, 1, 0, 0, 0, 1, 1, 1, 0, 0, 1, 0, 0, 0, 0, 1]
    n = len(marks)
    rx = Receiver((HOST, 0), ReceiverConfig(ack_every=1000, ack_delay=0.1))
    peer = bind_shim_socket(HOST)
    peer.settimeout(3)
    try:
        for seq, ce in enumerate(marks):
            peer.sendmsg([data_packet(seq, n)], CE_CMSG if ce else [], 0, rx.address)
        acks = []
        while not acks or not acks[-1].fin:
            fb = parse_feedback(peer.recv(2048))
            if fb.msg_type == MsgType.ACK:  # not the CNPs
                acks.append(fb)
        assert rx.recv(timeout=2).ce_chunks == sum(marks)
    finally:
        rx.close()
        peer.close()
    cum, marked = 0, 0
    for fb in acks:
        newly = marks[cum : fb.cum_ack]
        assert newly, "every ACK acknowledges new chunks here (in order, no loss)"
        assert set(newly) == {int(fb.ece)}, (cum, fb.cum_ack, fb.ece)
        marked += len(newly) if fb.ece else 0
        cum = fb.cum_ack
    assert cum == n and marked == sum(marks)
    assert len(acks) == 1 + sum(a != b for a, b in itertools.pairwise(marks))  # one per change, and the FIN


def test_dctcp_over_loopback_counts_exactly_the_marked_bytes():
    """Every fourth chunk arrives CE-marked (a per-packet IP_TOS, as a switch marks): the receiver's ACKs echo
    them chunk for chunk, so the DCTCP sender's marked bytes are the CE-marked chunks' bytes exactly, alpha
    moves from 1 toward a quarter, and echoes cut the window (MLTCP-DCTCP alike)."""
    rx = Receiver((HOST, 0), ReceiverConfig(deadline=0.01))
    try:
        for k, mltcp in enumerate((None, MltcpParams())):
            sock = LossySocket(bind_shim_socket(HOST), mark=lambda h, attempt: h.chunk_seq % 4 == 0 and not attempt)
            tx = Sender(rx.address, config=SenderConfig(chunk_size=CHUNK, cc="dctcp", mltcp=mltcp), sock=sock)
            n = 400
            for i in range(2):
                tx.send_tensor(1, i, k, bytes(n * CHUNK))
                d = rx.recv(timeout=5)
                assert d.loss.complete
            cc = tx.cc
            assert len(sock.marked) == n // 2 and cc.acked_bytes == 2 * n * CHUNK
            # exact; a spurious retransmission (an RTO on a busy machine) may be acknowledged in a marked
            # chunk's place, unmarked
            assert abs(cc.marked_bytes - len(sock.marked) * CHUNK) <= tx.stats.retransmits * CHUNK
            assert tx.stats.ece_bytes_acked == cc.marked_bytes
            # windows of one smoothed RTT (loopback: many): alpha moved from 1 to about the marked quarter
            assert cc.windows > 0 and 0.1 < cc.alpha < 0.75 and cc.ecn_cuts > 0
            tx.close()
    finally:
        rx.close()
