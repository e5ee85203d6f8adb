"""The sender handles plain cumulative ACKs waiting in its socket as the last of them (sender._drain_feedback):
the same scoreboard and window as one by one, every ACK counted; anything else (SACK blocks, ECE, FIN, a
duplicate) is handled on its own."""

from __future__ import annotations

from collections import deque

import pytest

from mlfc.hosts.transport import Sender, SenderConfig, outgoing
from mlfc.hosts.transport.packet import build_ack, build_cnp, plain_ack
from mlfc.wire import SHIM_VERSION, Flags

PEER = ("127.0.0.1", 19712)
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


def _sender_and_transfer(cc: str) -> tuple[Sender, QueuedSocket, outgoing.Transfer]:
    sock = QueuedSocket()
    sender = Sender(PEER, config=SenderConfig(chunk_size=CHUNK, cc=cc), sock=sock, clock=lambda: 1.0)
    t = outgoing.prepare(sender.config, 1, 0, 0, bytes(CHUNK * CHUNKS), 0, 0, 1, 0.0, batched=False)
    first = sender.recovery.next_tx(CHUNKS)
    t.board.on_transmit_run(0, CHUNKS, first, 0.5)
    return sender, sock, t


def _ack(cum: int, blocks=(), flags: int = 0) -> bytes:
    return build_ack(1, 0, 0, cum, blocks, flags)


def _counting(sender: Sender, monkeypatch) -> list[int]:
    calls: list[int] = []
    original = sender._on_ack

    def on_ack(t, fb, now, acks=1):
        calls.append(acks)
        return original(t, fb, now, acks)

    monkeypatch.setattr(sender, "_on_ack", on_ack)
    return calls


@pytest.mark.parametrize("cc", ["reno", "cubic", "dcqcn", "dctcp"])
def test_plain_acks_in_a_row_end_as_one_by_one_would(cc: str, monkeypatch) -> None:
    together, sock, t = _sender_and_transfer(cc)
    calls = _counting(together, monkeypatch)
    sock.queue.extend(_ack(c) for c in (8, 16, 24, 32))
    assert together._drain_feedback(t) == (True, True)
    assert calls == [4]  # one pass of recovery and congestion control for the four
    alone, sock1, t1 = _sender_and_transfer(cc)
    for c in (8, 16, 24, 32):
        sock1.queue.append(_ack(c))
        alone._drain_feedback(t1)
    assert t.board.cum == t1.board.cum == 32 and t.board.inflight == t1.board.inflight
    assert together.cc.cwnd == pytest.approx(alone.cc.cwnd)
    assert together.stats.acks == alone.stats.acks == 4 and together.stats.bytes_acked == alone.stats.bytes_acked


def test_sack_ece_fin_and_duplicates_are_handled_each_on_their_own(monkeypatch) -> None:
    sender, sock, t = _sender_and_transfer("reno")
    calls = _counting(sender, monkeypatch)
    sock.queue.extend([
        _ack(4), _ack(8),  # merged
        _ack(8), _ack(8, ((10, 12),)),  # a duplicate, then one with a SACK block: each alone
        _ack(12), _ack(16, flags=Flags.ECE),  # plain, then ECE: the plain one first, alone
        _ack(20), _ack(24),  # merged again
    ])  # fmt: skip
    sender._drain_feedback(t)
    assert calls == [2, 1, 1, 1, 1, 2]
    assert sender.stats.acks == 8 and t.board.cum == 24 and sender.stats.ece_acks == 1


def test_a_fin_ends_the_transfer_after_the_held_ack() -> None:
    sender, sock, t = _sender_and_transfer("reno")
    sock.queue.extend([_ack(10), _ack(20), _ack(CHUNKS, flags=Flags.FIN), _ack(CHUNKS)])
    sender._drain_feedback(t)
    assert t.done and t.fin and sender.stats.acks == 3  # the ACK after the FIN is left unread


def test_plain_ack_reads_exactly_the_acks_without_flags_or_blocks():
    ack = build_ack(3, 9, 7, 1234, (), 0)
    assert plain_ack(ack, len(ack)) == (3, 9, 7, 1234, 0, 0)
    echo = build_ack(3, 9, 7, 1234, (), 0, rate_class=56, queue_bytes=30_000)  # the queue telemetry echoed
    assert plain_ack(echo, len(echo)) == (3, 9, 7, 1234, 56, 30_000)
    assert plain_ack(ack + b"\0", len(ack) + 1) is None  # trailing bytes: decoded whole
    for other in (
        build_ack(3, 9, 7, 1234, (), Flags.ECE),
        build_ack(3, 9, 7, 1234, (), Flags.FIN),
        build_ack(3, 9, 7, 12, ((14, 15),), 0),
        build_cnp(3, 9, 7, 5) + bytes(4),  # a CNP padded to an ACK's length
        bytes([(SHIM_VERSION + 1) << 4 | ack[0] & 0x0F]) + ack[1:],  # another shim version
    ):
        assert plain_ack(other, len(other)) is None


def test_merged_plain_acks_carry_the_latest_echo_and_count_each_ack():
    """The queue telemetry of plain ACKs handled as the last of them: that ACK's echo, weighted by the ACKs
    it stands for (the sample is a mean over ACKs: mlfc.policy.withhold.echo_excess)."""
    sender, sock, t = _sender_and_transfer("reno")
    sender.delivery.restart(0.0)  # a second before the ACKs: a delivery rate of 30 chunks/s
    sender.capacity = 10_000_000.0  # bytes/s: the link's rate as the flow saw it (no rate class on board)
    deep = 100 * 1500  # far beyond the room
    sock.queue.extend(build_ack(1, 0, 0, cum, (), 0, 0, deep) for cum in (10, 20, 30))
    sender._drain_feedback(t)
    assert 0 < sender.delivery.rate < sender.capacity
    assert t.excess_n == 3 and t.excess_sum == pytest.approx(3 * (1 - sender.delivery.rate / sender.capacity))
    sock.queue.extend(build_ack(1, 0, 0, cum, (), 0, 0, 0) for cum in (35, CHUNKS))  # an empty queue: room
    sender._drain_feedback(t)
    assert t.excess_n == 5 and t.result(2.0).excess == pytest.approx(t.excess_sum / 5)
