"""UDP segmentation offload on Linux: many shim-tagged chunks per system call.

* Send (GSO, ``UDP_SEGMENT``): one ``sendmsg`` carries up to 64 KB made of equal-size segments (the last
  may be shorter), each a whole DATA packet (shim + descriptor + payload); the kernel cuts it into
  datagrams, or hands it whole to a device that segments later (veth, loopback). ``SegmentBatch`` is the
  sender's memory for one such call: a numpy view of the segments' headers, written column by column
  (mlfc.wire.Layout.pack_rows), and of their payloads.
* Receive (GRO, ``UDP_GRO``): the kernel may deliver several datagrams of one flow as one buffer, with the
  segment size in a control message; ``segment_spans`` splits it.

The kernel refuses GSO when a segment does not fit the path MTU (EMSGSIZE or EINVAL), where UDP_SEGMENT is
unknown, and before Linux 6.11 when the egress device has no checksum offload (EIO; newer kernels segment
and checksum in software then, so the device still sees one datagram per chunk). The sender then falls
back to one datagram per chunk for good (``GSO_REFUSED``).
"""

from __future__ import annotations

import ctypes
import errno
import math
import socket
import struct
from dataclasses import dataclass

import numpy as np

from mlfc.hosts import fastpath
from mlfc.hosts.transport.packet import DATA_B0, DATA_HEADER, HEADER_LEN, DataHeader
from mlfc.hosts.transport.recovery import Scoreboard
from mlfc.policy import loss
from mlfc.wire import Flags

UDP_SEGMENT = getattr(socket, "UDP_SEGMENT", 103)  # linux/udp.h; Python 3.11 does not name them
UDP_GRO = getattr(socket, "UDP_GRO", 104)
SOL_UDP = getattr(socket, "SOL_UDP", 17)
MAX_GSO_BYTES = 0xFFFF - 20 - 8  # one IPv4 datagram's payload: what one GSO send may carry
MAX_GSO_SEGMENTS = 64  # the kernel's UDP_MAX_SEGMENTS (64 before Linux 6.9, 128 since)
GSO_SENDS_PER_BATCH = 4  # GSO sends prepared at once (one set of array operations for up to 4 x 64 KB)
GSO_MIN_BATCH = 8  # chunks per burst below which a flow sends unbatched (about 90 Mb/s at 1400 B, 1 ms)
GRO_BUFFER = 1 << 17  # receive buffer: a GRO datagram is at most 64 KB
GSO_REFUSED = frozenset(
    {errno.EIO, errno.EINVAL, errno.EMSGSIZE, errno.EOPNOTSUPP, errno.ENOPROTOOPT, errno.EPROTONOSUPPORT}
)
_SEGMENT_SIZE = struct.Struct("=H")
_GRO_SIZE = struct.Struct("=i")


def max_segments(segment_size: int) -> int:
    """Segments of ``segment_size`` bytes one GSO send may carry (at least 1)."""
    return max(1, min(MAX_GSO_SEGMENTS, MAX_GSO_BYTES // segment_size))


def batch_size(rate: float, burst: float, segment: int, most: int) -> int:
    """Chunks per GSO send for a flow at ``rate`` bytes/s: ``burst`` seconds of it, at most ``most``, as
    Linux sizes TSO bursts (tcp_tso_autosize). Below GSO_MIN_BATCH chunks go one by one, exactly as without
    GSO: a slow flow gains nothing from batching, and a queue that takes a train as one packet (tc tbf
    before segmentation) then sees the single packets it would otherwise get."""
    chunks = int(min(rate * burst, 1 << 30) / segment)
    return min(most, chunks) if chunks >= GSO_MIN_BATCH else 1


def should_defer(board: Scoreboard, room: float, batch: int, cwnd_chunks: float) -> bool:
    """Wait for the window to open by ``batch`` chunks (the sender passes one GSO send's worth) instead of
    sending the sliver each ACK frees, as Linux defers TSO (tcp_tso_should_defer): only with chunks in flight
    (their ACKs will come), while the window allows less than that and less than a third of itself, and
    more than that is left to send."""
    if board.inflight == 0 or not math.isfinite(room):
        return False
    left = len(board.retx) + board.n - board.next_new
    return room < min(batch, cwnd_chunks / 3) and left > room


def gso_ancillary(segment_size: int) -> list[tuple[int, int, bytes]]:
    return [(SOL_UDP, UDP_SEGMENT, _SEGMENT_SIZE.pack(segment_size))]


def enable_gro(sock: socket.socket) -> bool:
    """Ask for coalesced datagrams on ``sock``; False where the kernel does not offer UDP_GRO."""
    try:
        sock.setsockopt(SOL_UDP, UDP_GRO, 1)
    except OSError:
        return False
    return True


def gro_ancillary_size() -> int:
    """Control-message space for the TOS byte and the GRO segment size."""
    return socket.CMSG_SPACE(4) + socket.CMSG_SPACE(_GRO_SIZE.size)


def parse_ancillary(ancdata: list[tuple[int, int, bytes]]) -> tuple[int, int]:
    """(IP TOS byte or 0, GRO segment size or 0) from ``recvmsg``'s control messages."""
    tos = segment = 0
    for level, kind, data in ancdata:
        if level == socket.IPPROTO_IP and kind == socket.IP_TOS and data:
            tos = data[0]
        elif level == SOL_UDP and kind == UDP_GRO and len(data) >= _GRO_SIZE.size:
            segment = _GRO_SIZE.unpack_from(data)[0]
    return tos, segment


def segment_spans(nbytes: int, segment: int) -> list[tuple[int, int]]:
    """(offset, length) of each datagram in a received buffer of ``nbytes``: one datagram without a segment
    size (or when it is not smaller than the buffer), else full segments and a shorter last one."""
    if segment <= 0 or segment >= nbytes:
        return [(0, nbytes)]
    return [(off, min(segment, nbytes - off)) for off in range(0, nbytes, segment)]


class SegmentBatch:
    """The sender's memory for one GSO send: ``capacity`` segments of one header + ``chunk`` payload bytes.

    ``rows`` is the structured view of the segments' DATA headers; ``payload`` the (capacity, chunk) view of
    their payloads. ``set_tensor`` writes the fields that stay the same for a whole tensor once. With
    ``fast`` (mlfc.hosts.fastpath), a run of new chunks is written by one C call."""

    def __init__(self, chunk: int, capacity: int, fast: fastpath.FastPath | None = None) -> None:
        self.chunk = chunk
        self.segment = HEADER_LEN + chunk
        self.capacity = capacity
        self.buf = bytearray(capacity * self.segment)
        self.mv = memoryview(self.buf)
        self.rows = DATA_HEADER.rows(self.buf, capacity, self.segment)
        self.payload = np.frombuffer(self.buf, dtype=np.uint8).reshape(capacity, self.segment)[:, HEADER_LEN:]
        self._columns = DATA_HEADER.columns(self.rows)
        self._fast = fast
        self._address = fastpath.address(self.buf)

    def set_tensor(self, **fields: int) -> None:
        DATA_HEADER.pack_rows(self.rows, **fields)

    def fill(self, board: Scoreboard, chunks: Chunks, retx: list[int], first: int, count: int,
             progress: list[int]) -> int:  # fmt: skip
        """Write the segments for retransmissions ``retx`` then new chunks ``first .. first + count - 1``
        (``progress``: their buckets) into the batch. Returns the bytes to send."""
        r, k, n = len(retx), len(retx) + count, board.n
        if not r and self._fast is not None:
            same = progress[0] == progress[-1]  # buckets only rise within a run: then one throughout
            buckets = None if same else np.array(progress, dtype=np.uint8)
            return self._fast.fill_run(self._address, self.segment, HEADER_LEN, chunks.address, chunks.total,
                                       self.chunk, n, first, count, chunks.classes_address,
                                       None if same else buckets.ctypes.data, progress[0], _VARYING, _LAST)  # fmt: skip
        if r:
            seqs = np.array(retx + list(range(first, first + count)))
            classes = chunks.classes[seqs]
        else:  # a run of new chunks: slices, no gathers
            seqs = np.arange(first, first + count)
            classes = chunks.classes[first : first + count]
        full = chunks.full
        n_full = len(full)
        whole_retx = retx if not r or retx[-1] < n_full else retx[:-1]
        if whole_retx:
            self.payload[: len(whole_retx)] = full[whole_retx]
        new_whole = max(0, min(first + count, n_full) - first)
        if new_whole:
            self.payload[r : r + new_whole] = full[first : first + new_whole]
        total = k * self.segment
        if n_full < n and seqs[-1] == n - 1:  # the short last chunk, always the batch's last segment
            self.payload[k - 1, : len(chunks.tail)] = chunks.tail
            total -= self.chunk - len(chunks.tail)
        last = seqs[-1] == n - 1
        if r or last:
            flags = np.zeros(k, dtype=np.uint8)
            flags[:r] = Flags.RETX
            flags[k - 1] |= Flags.LAST if last else 0
        else:
            flags = 0
        bucket = progress[0] if progress[0] == progress[-1] else np.array(progress, dtype=np.uint8)  # monotone
        _PER_SEGMENT(self._columns, k, seqs, flags, classes, bucket)
        return total


class Chunks:
    """A tensor's bytes as the batch copies them: the whole chunks as a (count, chunk) array, the short
    last chunk apart, and the importance classes as an array."""

    def __init__(self, mv: memoryview, chunk: int, classes: bytearray) -> None:
        data = np.frombuffer(mv, dtype=np.uint8)
        n_full = len(data) // chunk
        self.full = data[: n_full * chunk].reshape(n_full, chunk)
        self.tail = data[n_full * chunk :]
        self.classes = np.frombuffer(classes, dtype=np.uint8)
        self.total = len(data)
        self.address, self.classes_address = data.ctypes.data, self.classes.ctypes.data  # for fastpath


# What differs between the DATA headers of one tensor: per chunk, and the queue telemetry the switches wrote
_PER_PACKET = ("chunk_seq", "flags", "importance", "progress", "rate_class", "queue_bytes")


def _constant_mask() -> bytes:
    """1-bytes where every DATA header of one tensor has the same bytes (all but ``_PER_PACKET``)."""
    mask, offset = bytearray(HEADER_LEN), 0
    for bits, members in DATA_HEADER.slots:
        varies = any(name in _PER_PACKET for name, _, _ in members)
        mask[offset : offset + bits // 8] = (b"\x00" if varies else b"\xff") * (bits // 8)
        offset += bits // 8
    return bytes(mask)


RUN_CONSTANT = _constant_mask()  # what the segments of a run must share (RunParser, fastpath's place_run)
_CONSTANT = np.frombuffer(RUN_CONSTANT, dtype=np.uint8)
_PER_SEGMENT = DATA_HEADER.row_packer("chunk_seq", "flags", "importance", "progress")
_VARYING_FIELDS = fastpath.fields(DATA_HEADER, "chunk_seq", "flags", "importance", "progress")  # kept alive
_VARYING = ctypes.addressof(_VARYING_FIELDS)
_LAST = int(Flags.LAST)


@dataclass(frozen=True)
class Run:
    """A GRO datagram whose segments are DATA chunks of one tensor with consecutive numbers."""

    header: DataHeader  # the first segment's
    count: int
    protected: int  # segments with a protected importance class
    payload: np.ndarray  # (count, segment - HEADER_LEN): the payloads (the last row holds last_len bytes)
    last_len: int  # payload bytes of the last segment

    @property
    def first(self) -> int:
        return self.header.chunk_seq


class RunParser:
    """Finds runs (see ``Run``) in GRO datagrams read into ``buf``, with whole-array operations over views
    of ``buf`` made once per segment size."""

    def __init__(self, buf: bytearray) -> None:
        self.buf = buf
        self._bytes = np.frombuffer(buf, dtype=np.uint8)
        self._views: dict[int, tuple] = {}
        self._steps = np.arange(len(buf) // HEADER_LEN + 1)

    def _view(self, segment: int) -> tuple:
        view = self._views.get(segment)
        if view is None:
            count = len(self.buf) // segment
            segments = self._bytes[: count * segment].reshape(count, segment)
            view = (segments, DATA_HEADER.columns(DATA_HEADER.rows(self.buf, count, segment)))
            self._views[segment] = view
        return view

    def parse(self, nbytes: int, segment: int) -> Run | None:
        """``buf[:nbytes]`` as a run, or None when it is not one (any segment not DATA, of another tensor,
        out of order, or sized unlike the descriptor's chunk)."""
        buf = self.buf
        count = -(-nbytes // segment)
        last_len = nbytes - (count - 1) * segment - HEADER_LEN
        if count < 2 or last_len < 0 or buf[0] != DATA_B0:
            return None
        header = DataHeader._make(DATA_HEADER.unpack_from(buf))
        if segment != HEADER_LEN + header.chunk_size:
            return None
        segments, columns = self._view(segment)
        heads = segments[:count, :HEADER_LEN]
        if ((heads ^ heads[0]) & _CONSTANT).any():
            return None
        seqs, importance = _SEQ_AND_IMPORTANCE(columns, count)
        if not np.array_equal(seqs - header.chunk_seq, self._steps[:count]):
            return None
        protected = int(np.count_nonzero(loss.is_protected(importance)))
        return Run(header, count, protected, segments[:count, HEADER_LEN:], last_len)


_SEQ_AND_IMPORTANCE = DATA_HEADER.row_unpacker("chunk_seq", "importance")
