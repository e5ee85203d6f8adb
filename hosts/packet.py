"""Packet codecs for the transport, on top of mlfc.wire.

DATA: shim (16 B, mlfc.wire) + a 12-byte tensor descriptor + payload. The descriptor lets a receiver
place any chunk it gets first, without shared state: total tensor length (u32), chunk payload size
(u16), the tensor's loss bound in basis points (u16, 0..10000) and the number of protected chunks (u32,
so the receiver knows when none is missing). The switch parses only the shim.

ACK: shim (chunk_seq = cumulative ack: the next chunk expected; flags ECE, FIN) + ``AckBody`` SACK
blocks. CNP: a bare shim (chunk_seq = the CE-marked chunk).

The hot path packs shim and descriptor with one struct, laid out as mlfc.wire's shim (a test checks
it byte for byte against ``Shim.pack``/``unpack_shim``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from mlfc.wire import SHIM_LEN, SHIM_VERSION, AckBody, Flags, MsgType, Shim, unpack_ack_body, unpack_shim

DATA_HEADER = struct.Struct("!BBHIHBBI" + "IHHI")
DESCRIPTOR_LEN = DATA_HEADER.size - SHIM_LEN
assert DESCRIPTOR_LEN == 12
DATA_B0 = (SHIM_VERSION << 4) | int(MsgType.DATA)
MAX_CHUNK_PAYLOAD = 0xFFFF
MAX_TENSOR_BYTES = 0xFFFFFFFF
LOSS_BOUND_SCALE = 10000  # basis points


class PacketError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class DataHeader:
    job_id: int
    iteration: int
    tensor_id: int
    chunk_seq: int
    importance: int
    progress: int
    flags: int
    total_len: int
    chunk_size: int
    loss_bound_bp: int
    n_protected: int


def pack_data_header_into(buf: bytearray, h: DataHeader) -> None:
    DATA_HEADER.pack_into(
        buf, 0, DATA_B0, h.flags, h.job_id, h.iteration, h.tensor_id, (h.importance << 4) | h.progress, 0,
        h.chunk_seq, h.total_len, h.chunk_size, h.loss_bound_bp, h.n_protected,
    )  # fmt: skip


def parse_data(data: bytes | memoryview) -> DataHeader:
    """Decode a DATA packet's headers; raises mlfc.wire.ShimError or PacketError."""
    shim = unpack_shim(data)
    if shim.msg_type != MsgType.DATA:
        raise PacketError(f"expected DATA, got {shim.msg_type.name}")
    if len(data) < DATA_HEADER.size:
        raise PacketError(f"DATA needs {DATA_HEADER.size} header bytes, got {len(data)}")
    total, chunk, bound, nprot = struct.unpack_from("!IHHI", data, SHIM_LEN)
    return DataHeader(
        shim.job_id, shim.iteration, shim.tensor_id, shim.chunk_seq, shim.importance, shim.progress, shim.flags,
        total, chunk, bound, nprot,
    )  # fmt: skip


def build_ack(
    job_id: int, iteration: int, tensor_id: int, cum_ack: int, blocks: tuple[tuple[int, int], ...], flags: int
) -> bytes:
    shim = Shim(MsgType.ACK, job_id, iteration, tensor_id, chunk_seq=cum_ack, flags=flags)
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

    @property
    def ece(self) -> bool:
        return bool(self.flags & Flags.ECE)

    @property
    def fin(self) -> bool:
        return bool(self.flags & Flags.FIN)


def parse_feedback(data: bytes | memoryview) -> Feedback:
    """Decode an ACK or CNP; raises mlfc.wire.ShimError or PacketError."""
    shim = unpack_shim(data)
    if shim.msg_type == MsgType.ACK:
        blocks = unpack_ack_body(data[SHIM_LEN:]).blocks
    elif shim.msg_type == MsgType.CNP:
        blocks = ()
    else:
        raise PacketError(f"expected ACK or CNP, got {shim.msg_type.name}")
    return Feedback(shim.msg_type, shim.job_id, shim.iteration, shim.tensor_id, shim.chunk_seq, shim.flags, blocks)


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
