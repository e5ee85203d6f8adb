"""The transport's packets, on top of mlfc.wire.

DATA: shim (20 B) + a 12-byte tensor descriptor (``DESCRIPTOR_FIELDS``) + payload. The descriptor lets a
receiver place any chunk it gets first, without shared state: total tensor length, chunk payload size,
the tensor's loss bound in basis points (mlfc.policy.loss) and the number of protected chunks (so the
receiver knows when none is missing). The switch parses only the shim.

ACK: shim (chunk_seq = cumulative ack: the next chunk expected; flags ECE, FIN; rate_class and
queue_bytes: the queue telemetry of the latest DATA received, echoed) + ``AckBody`` SACK blocks. CNP: a
bare shim (chunk_seq = the CE-marked chunk).

``DATA_HEADER`` is the shim's field table followed by the descriptor's, one mlfc.wire.Layout: the hot
path packs or reads a DATA packet's headers with one struct call.
"""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass

from mlfc.policy.loss import LOSS_BOUND_SCALE
from mlfc.wire import (
    ACK_HEAD_FIELDS,
    SHIM_FIELDS,
    SHIM_LEN,
    SHIM_VERSION,
    AckBody,
    Flags,
    Layout,
    MsgType,
    Shim,
    unpack_ack_body,
    unpack_shim,
)

DESCRIPTOR_FIELDS: tuple[tuple[str, int], ...] = (
    ("total_len", 32),  # tensor bytes
    ("chunk_size", 16),  # payload bytes of every chunk but the last
    ("loss_bound_bp", 16),  # 0..LOSS_BOUND_SCALE
    ("n_protected", 32),  # chunks of importance >= IMPORTANCE_PROTECTED
)
DATA_HEADER = Layout(SHIM_FIELDS + DESCRIPTOR_FIELDS)
HEADER_LEN = DATA_HEADER.size
DESCRIPTOR_LEN = HEADER_LEN - SHIM_LEN
DATA_B0 = (SHIM_VERSION << 4) | int(MsgType.DATA)  # the first byte of every DATA packet
MAX_CHUNK_PAYLOAD = (1 << dict(DESCRIPTOR_FIELDS)["chunk_size"]) - 1
MAX_TENSOR_BYTES = (1 << dict(DESCRIPTOR_FIELDS)["total_len"]) - 1
assert 1 << dict(DESCRIPTOR_FIELDS)["loss_bound_bp"] > LOSS_BOUND_SCALE

# A DATA packet's headers by name, in DATA_HEADER's field order (fields absent when built default to a
# version-1 DATA shim with zeros).
DataHeader = namedtuple(
    "DataHeader", DATA_HEADER.names, defaults=[SHIM_VERSION, MsgType.DATA] + [0] * (len(DATA_HEADER.names) - 2)
)

FIELD_INDEX = {name: i for i, name in enumerate(DATA_HEADER.names)}  # position in DATA_HEADER's values


_ECE, _FIN = int(Flags.ECE), int(Flags.FIN)  # plain ints: IntFlag operators are slow on the hot path


class PacketError(ValueError):
    pass


def pack_data_header_into(buf: bytearray | memoryview, h: DataHeader, offset: int = 0) -> None:
    DATA_HEADER.pack_into(buf, offset, *h)


def parse_data(data: bytes | memoryview) -> DataHeader:
    """Decode a DATA packet's headers; raises mlfc.wire.ShimError or PacketError."""
    shim = unpack_shim(data)
    if shim.msg_type != MsgType.DATA:
        raise PacketError(f"expected DATA, got {shim.msg_type.name}")
    if len(data) < HEADER_LEN:
        raise PacketError(f"DATA needs {HEADER_LEN} header bytes, got {len(data)}")
    return DataHeader._make(DATA_HEADER.unpack_from(data))


def build_ack(
    job_id: int,
    iteration: int,
    tensor_id: int,
    cum_ack: int,
    blocks: tuple[tuple[int, int], ...],
    flags: int,
    rate_class: int = 0,
    queue_bytes: int = 0,
) -> bytes:
    """An ACK; ``rate_class``/``queue_bytes``: the telemetry the acknowledged DATA carried, echoed."""
    shim = Shim(MsgType.ACK, job_id, iteration, tensor_id, chunk_seq=cum_ack, flags=flags,
                rate_class=rate_class, queue_bytes=queue_bytes)  # fmt: skip
    return shim.pack() + AckBody(blocks).pack()


def build_cnp(job_id: int, iteration: int, tensor_id: int, chunk_seq: int) -> bytes:
    return Shim(MsgType.CNP, job_id, iteration, tensor_id, chunk_seq=chunk_seq).pack()


@dataclass(frozen=True, slots=True)
class Feedback:
    """A decoded ACK or CNP."""

    msg_type: MsgType
    job_id: int
    iteration: int
    tensor_id: int
    cum_ack: int
    flags: int
    blocks: tuple[tuple[int, int], ...]
    rate_class: int = 0  # the echoed queue telemetry (mlfc.wire; 0, 0 on a CNP)
    queue_bytes: int = 0

    @property
    def ece(self) -> bool:
        return bool(self.flags & _ECE)

    @property
    def fin(self) -> bool:
        return bool(self.flags & _FIN)


# A plain ACK: shim + an ACK head with no SACK blocks, no flags (ECE, FIN). A sender reads thousands per
# second; ``plain_ack`` reads one with a single struct call, and everything else goes to parse_feedback.
_PLAIN_ACK = Layout(SHIM_FIELDS + ACK_HEAD_FIELDS)
PLAIN_ACK_LEN = _PLAIN_ACK.size
_V, _T, _F, _B, _J, _I, _TID, _SEQ, _RC, _QB = (_PLAIN_ACK.names.index(n) for n in (
    "version", "msg_type", "flags", "num_blocks", "job_id", "iteration", "tensor_id", "chunk_seq", "rate_class",
    "queue_bytes"))  # fmt: skip
_ACK = int(MsgType.ACK)


def plain_ack(data: bytes | bytearray | memoryview, n: int) -> tuple[int, int, int, int, int, int] | None:
    """(job_id, iteration, tensor_id, cumulative ack, rate_class, queue_bytes) when the ``n`` bytes of ``data``
    are a plain ACK, else None (parse_feedback then says what they are)."""
    if n != PLAIN_ACK_LEN:
        return None
    v = _PLAIN_ACK.unpack_from(data)
    if v[_V] != SHIM_VERSION or v[_T] != _ACK or v[_F] or v[_B]:
        return None
    return v[_J], v[_I], v[_TID], v[_SEQ], v[_RC], v[_QB]


def parse_feedback(data: bytes | memoryview) -> Feedback:
    """Decode an ACK or CNP; raises mlfc.wire.ShimError or PacketError."""
    shim = unpack_shim(data)
    if shim.msg_type == MsgType.ACK:
        blocks = unpack_ack_body(data[SHIM_LEN:]).blocks
    elif shim.msg_type == MsgType.CNP:
        blocks = ()
    else:
        raise PacketError(f"expected ACK or CNP, got {shim.msg_type.name}")
    return Feedback(shim.msg_type, shim.job_id, shim.iteration, shim.tensor_id, shim.chunk_seq, shim.flags, blocks,
                    shim.rate_class, shim.queue_bytes)  # fmt: skip


def _run_around(received: bytearray, floor: int, seq: int) -> tuple[int, int]:
    """The run of received chunks containing ``seq``, not extending below ``floor``."""
    start = received.rfind(0, floor, seq) + 1 or floor
    end = received.find(0, seq)
    return max(start, floor), (len(received) if end < 0 else end)


def sack_blocks(received: bytearray, start: int, limit: int, latest: int | None = None) -> tuple[tuple[int, int], ...]:
    """SACK blocks: runs of received chunks (byte 1) at or above ``start``, at most ``limit``.

    With holes that will never be filled (zero-filled chunks) there may be more runs than fit, so, as TCP
    does (RFC 2018), the first block is the run holding the chunk that triggered the ACK (``latest``), and
    the rest are the highest runs: every arrival is reported at least once, and the sender's scoreboard
    keeps what it learned earlier. Without ``latest``, the lowest runs in order."""
    n = len(received)
    blocks: list[tuple[int, int]] = []
    if latest is None:
        pos = start
        while len(blocks) < limit:
            s = received.find(1, pos)
            if s < 0:
                break
            e = received.find(0, s)
            e = n if e < 0 else e
            blocks.append((s, e))
            pos = e
        return tuple(blocks)
    if start <= latest < n and received[latest]:
        blocks.append(_run_around(received, start, latest))
    top = received.rfind(1, start)
    while top >= start and len(blocks) < limit:
        run = _run_around(received, start, top)
        if run not in blocks:
            blocks.append(run)
        top = received.rfind(1, start, run[0])
    return tuple(blocks)
