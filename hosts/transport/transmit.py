"""How DATA chunks leave a sender: one chunk per send, or a batch written at once and sent as GSO sends of
up to 64 KB (gso.py), each transmission then recorded in the scoreboard, the counters, the progress tag and
the congestion controller's byte count. Nothing is recorded for what the kernel did not take; where it
refuses GSO, GSO is off for good. When to send and how much is the sender's loop (sender.py).
"""

from __future__ import annotations

import math
import socket

from mlfc.hosts import fastpath
from mlfc.hosts.cc import CongestionControl
from mlfc.hosts.progress import IterationProgress
from mlfc.hosts.transport.config import SenderConfig
from mlfc.hosts.transport.gso import GSO_REFUSED, GSO_SENDS_PER_BATCH, SegmentBatch, gso_ancillary, max_segments
from mlfc.hosts.transport.outgoing import Transfer
from mlfc.hosts.transport.packet import DATA_HEADER, FIELD_INDEX, HEADER_LEN
from mlfc.hosts.transport.recovery import FlowRecovery
from mlfc.hosts.transport.sockets import UDP_IP_OVERHEAD
from mlfc.hosts.transport.stats import FlowStats
from mlfc.wire import Flags

_SEQ, _FLAGS, _IMPORTANCE, _PROGRESS = (FIELD_INDEX[n] for n in ("chunk_seq", "flags", "importance", "progress"))
_LAST, _RETX = int(Flags.LAST), int(Flags.RETX)


def count_sent(progress: IterationProgress, cc: CongestionControl, sizes: list[int], now: float) -> None:
    """Count new chunks of ``sizes`` payload bytes, sent at ``now``, as if one by one (progress, then the
    controller, per chunk) but in one step per stretch that ends at a chunk reaching the controller's next
    event: between events neither reads the other, so the sums are all that matter. ``sizes`` is a run
    (Scoreboard.run_sizes): every chunk but the last has the same size, so the chunk that reaches an event
    is found by arithmetic, not by summing chunk by chunk."""
    n = len(sizes)
    if not n:  # a batch of retransmissions only
        return
    size, last = sizes[0], sizes[-1]
    seg = HEADER_LEN + size

    def wire(j: int) -> int:  # wire bytes of chunks 0..j
        return (j + 1) * seg if j < n - 1 else (n - 1) * seg + HEADER_LEN + last

    def payload(j: int) -> int:
        return (j + 1) * size if j < n - 1 else (n - 1) * size + last

    done_wire = done_payload = 0
    i = 0
    while i < n:
        need = done_wire + cc.bytes_to_event()  # the first chunk whose running total reaches it
        j = min(max(i, math.ceil(need / seg) - 1), n - 1)
        progress.on_sent(payload(j) - done_payload, now)
        cc.on_sent(wire(j) - done_wire, now)
        done_wire, done_payload, i = wire(j), payload(j), j + 1


class Transmitter:
    def __init__(self, sock: socket.socket, cfg: SenderConfig, progress: IterationProgress, cc: CongestionControl,
                 recovery: FlowRecovery, stats: FlowStats) -> None:  # fmt: skip
        self.sock, self.progress, self.cc, self.recovery, self.stats = sock, progress, cc, recovery, stats
        segment = HEADER_LEN + cfg.chunk_size
        self.per_send = max_segments(segment)  # segments one GSO send carries
        self.max_batch = self.per_send * GSO_SENDS_PER_BATCH if cfg.gso else 1
        fast = fastpath.load() if cfg.compiled else None
        self.batch = SegmentBatch(cfg.chunk_size, self.max_batch, fast) if self.max_batch > 1 else None
        self._gso_cmsg = gso_ancillary(segment)
        self._pkt = bytearray(segment)  # one chunk's packet, for the unbatched path
        self._pktmv = memoryview(self._pkt)
        # a controller that counts sent bytes (DCQCN's byte counter) reads F as each chunk is counted
        self._byte_clocked = type(cc).on_sent is not CongestionControl.on_sent

    @property
    def batching(self) -> bool:
        return self.batch is not None

    def start(self, t: Transfer) -> None:
        """A new tensor: write the fields its segments share into the batch once."""
        if t.chunks is not None and self.batch is not None:
            self.batch.set_tensor(**t.header._asdict())

    def send_one(self, t: Transfer, now: float) -> tuple[int, int]:
        """The next chunk alone: (chunks sent, wire bytes). A failed retransmission goes back to the queue."""
        nxt = t.board.next_chunk()
        if nxt is None:
            return 0, 0
        seq, is_retx = nxt
        try:
            return 1, self.xmit(t, seq, is_retx, now)
        except OSError:
            if is_retx:
                t.board.requeue(seq)
            raise

    def send_batch(self, t: Transfer, limit: int, now: float) -> tuple[int, int]:
        """Up to ``limit`` chunks prepared at once and sent in GSO sends of up to 64 KB (one chunk alone goes
        the plain way): (chunks sent, wire bytes). Only what the kernel took is recorded; the rest goes back
        to the queue. Where the kernel refuses GSO, GSO is off for good."""
        board = t.board
        retx, first, count = board.take(limit)
        if len(retx) + count <= 1:
            board.requeue_all(retx)
            return self.send_one(t, now)
        new_sizes = board.run_sizes(first, count)
        state = self.progress.checkpoint()
        buckets = [self.progress.bucket] * len(retx) + self.progress.tag_run(new_sizes, now)
        total = self.batch.fill(board, t.chunks, retx, first, count, buckets)
        try:
            done, nbytes, calls = self._send_segments(len(retx) + count, total)
        except OSError as exc:
            self.progress.restore(state)
            board.requeue_all(retx)
            if exc.errno not in GSO_REFUSED:
                raise
            self.batch = t.chunks = None  # the kernel or the device cannot segment: one datagram per chunk
            self.max_batch = 1
            self.stats.gso_refused += 1
            return self.send_one(t, now)
        r = min(done, len(retx))  # retransmissions go first in a batch
        new_sizes = new_sizes[: done - r]
        if done < len(retx) + count:  # the socket filled up midway: count only what left
            board.requeue_all(retx[r:])
            self.progress.restore(state)
            self.progress.tag_run(new_sizes, now)
        tx = self.recovery.next_tx(done)
        for i, seq in enumerate(retx[:r]):
            board.on_transmit(seq, tx + i, now, True)
        board.on_transmit_run(first, len(new_sizes), tx + r, now)
        st = self.stats
        st.gso_sends += calls
        st.send_calls += calls
        st.chunks_sent += done
        st.bytes_sent += nbytes
        st.retransmits += r
        st.payload_bytes_sent += sum(new_sizes)
        if self._byte_clocked:  # F read as at the chunk that reaches each byte-counter event, as unbatched
            self.progress.restore(state)
            for seq in retx[:r]:
                self.cc.on_sent(HEADER_LEN + board.size(seq), now)
            count_sent(self.progress, self.cc, new_sizes, now)
        else:
            self.cc.on_sent(nbytes, now)
        return done, nbytes + done * UDP_IP_OVERHEAD

    def _send_segments(self, count: int, total: int) -> tuple[int, int, int]:
        """Send the batch's ``count`` segments (``total`` bytes) in GSO sends of at most 64 KB. Returns
        (segments sent, bytes sent, sendmsg calls); raises only when the first send fails."""
        per_send, segment, mv = self.per_send, self.batch.segment, self.batch.mv
        done = off = calls = 0
        while done < count:
            n = min(per_send, count - done)
            end = min(total, off + n * segment)
            try:
                self.sock.sendmsg([mv[off:end]], self._gso_cmsg)
            except OSError:
                if not calls:
                    raise
                break  # what was sent stays sent; the caller gives the rest back
            calls += 1
            done += n
            off = end
        return done, off, calls

    def xmit(self, t: Transfer, seq: int, is_retx: bool, now: float) -> int:
        """Send one chunk; returns its bytes on the wire (incl. UDP/IP headers)."""
        board = t.board
        ln = board.size(seq)
        off = seq * board.chunk
        h = t.values
        h[_SEQ] = seq
        h[_FLAGS] = (_LAST if seq == board.n - 1 else 0) | (_RETX if is_retx else 0)
        h[_IMPORTANCE] = board.classes[seq]
        h[_PROGRESS] = self.progress.bucket
        DATA_HEADER.pack_into(self._pkt, 0, *h)
        end = HEADER_LEN + ln
        self._pkt[HEADER_LEN:end] = t.mv[off : off + ln]
        self.sock.send(self._pktmv[:end])
        board.on_transmit(seq, self.recovery.next_tx(), now, is_retx)
        st = self.stats
        st.send_calls += 1
        st.chunks_sent += 1
        st.bytes_sent += end
        if is_retx:
            st.retransmits += 1
        else:
            st.payload_bytes_sent += ln
            self.progress.on_sent(ln, now)
        self.cc.on_sent(end, now)
        return end + UDP_IP_OVERHEAD
