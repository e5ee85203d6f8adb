"""ECN feedback through the sender's ACK path (sender._on_ack, fed from a queue of ACKs): one window reduction
per round trip for losses and echoes together, and the per-ACK echo DCTCP counts (on_ecn_feedback)."""

from __future__ import annotations

from collections import deque

import pytest

from mlfc.hosts.transport import Sender, SenderConfig, outgoing
from mlfc.hosts.transport.packet import build_ack
from mlfc.wire import Flags

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


def sender_with_window_sent(cc: str) -> tuple[Sender, QueuedSocket, outgoing.Transfer]:
    """A sender whose ``CHUNKS`` chunks are all in flight (transmissions 1..CHUNKS), none acknowledged."""
    sock = QueuedSocket()
    sender = Sender(PEER, config=SenderConfig(chunk_size=CHUNK, cc=cc), sock=sock, clock=lambda: 1.0)
    t = outgoing.prepare(sender.config, 1, 0, 0, bytes(CHUNK * CHUNKS), 0, 0, 1, 0.0, batched=False)
    t.board.on_transmit_run(0, CHUNKS, sender.recovery.next_tx(CHUNKS), 0.5)
    return sender, sock, t


def ack(cum: int, blocks=(), flags: int = 0) -> bytes:
    return build_ack(1, 0, 0, cum, blocks, flags)


@pytest.mark.parametrize(("cc", "factor"), [("reno", 0.5), ("cubic", 0.7)])
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
