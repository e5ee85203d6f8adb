"""One tensor being received, without sockets: where each chunk goes, which have arrived, what to
acknowledge, and when the tensor may be delivered (complete, or within its loss bound by
mlfc.policy.loss once the deadline after the last chunk has passed)."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from mlfc.hosts import fastpath
from mlfc.hosts.importance import num_chunks
from mlfc.hosts.transport.gso import RUN_CONSTANT
from mlfc.hosts.transport.packet import DATA_HEADER, HEADER_LEN, sack_blocks
from mlfc.policy import loss
from mlfc.wire import IMPORTANCE_PROTECTED

_FIELDS = fastpath.fields(DATA_HEADER, "chunk_seq", "importance")  # kept alive: the C code reads them
_SEQ, _IMPORTANCE = ctypes.addressof(_FIELDS[0]), ctypes.addressof(_FIELDS[1])
_SAME_ADDRESS = fastpath.address(RUN_CONSTANT)


@dataclass(frozen=True)
class LossReport:
    total_bytes: int
    chunk_size: int
    missing_chunks: tuple[int, ...]  # zero-filled chunk sequence numbers
    zero_filled_bytes: int

    @property
    def loss_fraction(self) -> float:
        return self.zero_filled_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def complete(self) -> bool:
        return not self.missing_chunks


class Reassembly:
    """The descriptor (``total``, ``chunk``, ``bound_bp``, ``nprot``) comes from the tensor's first DATA
    packet; every later packet must repeat it."""

    __slots__ = ("bound_bp", "buf", "ce", "ce_pending", "chunk", "count", "cum", "dups", "first", "last_packet")
    __slots__ += ("last_seen", "latest", "mv", "n", "nprot", "prot_received", "received", "total", "unacked")
    __slots__ += ("telemetry",)
    __slots__ += ("_addresses", "_rows")

    def __init__(self, total: int, chunk: int, bound_bp: int, nprot: int, now: float) -> None:
        self.total, self.chunk, self.bound_bp, self.nprot = total, chunk, bound_bp, nprot
        self.n = num_chunks(total, chunk)
        self.buf = bytearray(total)  # zeros: missing chunks are zero-filled by construction
        self.mv = memoryview(self.buf)
        self.received = bytearray(self.n)
        self.count = self.cum = self.prot_received = self.unacked = self.ce = self.dups = 0
        self.ce_pending = False
        self.latest = 0  # the chunk that arrived last (first SACK block)
        # (rate_class, queue_bytes) of the latest DATA (a GRO run's first segment): the next ACK echoes it
        self.telemetry = (0, 0)
        self.first = self.last_packet = now
        self.last_seen: float | None = None  # when the LAST chunk first arrived
        self._rows: np.ndarray | None = None  # (whole chunks, chunk) view of buf, made by the first place_run
        self._addresses: tuple[int, int] | None = None  # of buf and received, made by the first take_run

    def same_descriptor(self, total: int, chunk: int, bound_bp: int, nprot: int) -> bool:
        return (total, chunk, bound_bp, nprot) == (self.total, self.chunk, self.bound_bp, self.nprot)

    def span(self, seq: int) -> tuple[int, int] | None:
        """(offset, length) of chunk ``seq`` in the tensor; None beyond the last chunk."""
        if seq >= self.n:
            return None
        off = seq * self.chunk
        return off, (self.chunk if seq < self.n - 1 else self.total - off)

    def place(self, seq: int, payload: memoryview, protected: bool, ack_every: int, now: float) -> tuple[bool, bool]:
        """Store chunk ``seq`` (``payload`` of the length ``span`` gives). Returns (new: not a duplicate,
        acknowledge at once: a duplicate, a hole below it, the last chunk, or ``ack_every`` unacknowledged)."""
        self.last_packet = now
        self.latest = seq
        if self.received[seq]:
            self.dups += 1
            return False, True
        off = seq * self.chunk
        self.mv[off : off + len(payload)] = payload
        self.received[seq] = 1
        self.count += 1
        if protected:
            self.prot_received += 1
        ack_now = False
        if seq == self.cum:
            nxt = self.received.find(0, seq)
            self.cum = self.n if nxt < 0 else nxt
        else:
            ack_now = True  # a hole: tell the sender at once
        if seq == self.n - 1:
            self.last_seen = now
            ack_now = True
        self.unacked += 1
        return True, ack_now or self.unacked >= ack_every

    def place_run(self, first: int, payload: np.ndarray, last_len: int, protected: int, ack_every: int,
                  now: float) -> bool:  # fmt: skip
        """Store new chunks ``first .. first + len(payload) - 1`` at once (row i of ``payload`` is chunk
        first + i; the last row holds ``last_len`` bytes): what ``place`` chunk by chunk does when none of
        them has arrived before. Returns: acknowledge at once (``place``'s rule over the run)."""
        count = len(payload)
        end = first + count
        if self._rows is None:
            whole = self.total // self.chunk
            self._rows = np.frombuffer(self.buf, dtype=np.uint8)[: whole * self.chunk].reshape(whole, self.chunk)
        whole_rows = count if end <= len(self._rows) else count - 1  # the short last chunk goes apart
        self._rows[first : first + whole_rows] = payload[:whole_rows]
        if whole_rows < count:
            off = (end - 1) * self.chunk
            self.buf[off : off + last_len] = payload[-1, :last_len].tobytes()
        self.received[first:end] = b"\x01" * count
        return self._placed_run(first, count, protected, ack_every, now)

    def take_run(self, fast: fastpath.FastPath, read: int, nbytes: int, segment: int, first: int, ack_every: int,
                 now: float) -> tuple[int, bool] | None:  # fmt: skip
        """``place_run`` for a whole GRO read (at address ``read``, ``nbytes`` in ``segment``-byte segments,
        the first carrying this tensor's descriptor and chunk ``first``), checked and copied in one C call
        (mlfc.hosts.fastpath, by gso.RunParser's rule): (chunks placed, acknowledge at once), or None when the
        read is not a run of new chunks (nothing placed; the caller goes segment by segment)."""
        if self._addresses is None:
            self._addresses = (fastpath.address(self.buf), fastpath.address(self.received))
        dst, received = self._addresses
        protected = ctypes.c_size_t()
        count = fast.place_run(read, nbytes, segment, HEADER_LEN, _SAME_ADDRESS, _SEQ, _IMPORTANCE,
                               IMPORTANCE_PROTECTED, dst, self.total, self.chunk, received, self.n,
                               ctypes.byref(protected))  # fmt: skip
        if not count:
            return None
        return count, self._placed_run(first, count, protected.value, ack_every, now)

    def _placed_run(self, first: int, count: int, protected: int, ack_every: int, now: float) -> bool:
        """The state after chunks ``first .. first + count - 1``, none seen before, were placed and marked
        received: ``place``'s rule over the run (True: acknowledge at once)."""
        end = first + count
        self.last_packet = now
        self.latest = end - 1
        self.count += count
        self.prot_received += protected
        ack_now = False
        if first == self.cum:
            nxt = self.received.find(0, first)
            self.cum = self.n if nxt < 0 else nxt
        else:
            ack_now = True
        if end == self.n:
            self.last_seen = now
            ack_now = True
        self.unacked += count
        return ack_now or self.unacked >= ack_every

    def on_ack_sent(self) -> None:
        self.unacked = 0

    @property
    def complete(self) -> bool:
        return self.count == self.n

    @property
    def waiting(self) -> bool:
        """The last chunk has arrived but others are missing: the zero-fill deadline runs."""
        return self.last_seen is not None and not self.complete

    def may_deliver_partial(self) -> bool:
        """Zero-fill the missing chunks and deliver? (Called once the deadline after the last chunk passed.)"""
        missing_bytes = (self.n - self.count) * self.chunk  # the last (short) chunk is in: LAST arrived
        return loss.may_zero_fill(missing_bytes, self.nprot - self.prot_received, self.total, self.bound_bp)

    def sack(self, limit: int) -> tuple[tuple[int, int], ...]:
        return sack_blocks(self.received, self.cum, limit, self.latest) if self.cum < self.n else ()

    def missing(self) -> tuple[int, ...]:
        out = []
        pos = 0
        while (i := self.received.find(0, pos)) >= 0:
            out.append(i)
            pos = i + 1
        return tuple(out)

    def loss_report(self) -> LossReport:
        missing = self.missing()
        return LossReport(self.total, self.chunk, missing, len(missing) * self.chunk)
