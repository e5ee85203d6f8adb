"""The mlfc wire format: one definition, used by hosts, PTF tests, the reference switch and unit tests.

A gradient packet is IPv4 / UDP / shim / payload. The shim is recognised by the UDP *destination*
port: any port in ``SHIM_PORT_BASE .. SHIM_PORT_BASE + 255`` (matched on the switch as
``dst_port &&& SHIM_PORT_MASK``). Both ends of an mlfc transfer bind ports in that range, so data
(sender -> receiver) and ACK/CNP (receiver -> sender) are both tagged. See docs/wire-format.md.

``SHIM_FIELDS`` is the single field table. The scapy classes and the fast ``struct`` codec used on
the transport's hot path are both generated from it, and a test checks p4src/shared/header.p4
against it field for field.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field

from scapy.fields import BitField, ByteField, FieldLenField, IntField, PacketListField, ShortField
from scapy.layers.inet import UDP
from scapy.packet import Packet, bind_layers

SHIM_VERSION = 1
SHIM_PORT_BASE = 0x4D00  # 19712: "M" in the high byte
SHIM_PORT_MASK = 0xFF00  # 256 ports, 19712..19967
SHIM_LEN = 16
PROGRESS_BUCKETS = 16  # 4-bit progress bucket
IMPORTANCE_LEVELS = 16  # 4-bit importance class, 0 = least important
IMPORTANCE_PROTECTED = 8  # classes >= 8 are never dropped by the switch's selective-drop policy
MAX_SACK_BLOCKS = 32

# (name, width in bits) in wire order. Widths add up to SHIM_LEN * 8.
SHIM_FIELDS: tuple[tuple[str, int], ...] = (
    ("version", 4),
    ("msg_type", 4),
    ("flags", 8),
    ("job_id", 16),
    ("iteration", 32),
    ("tensor_id", 16),
    ("importance", 4),
    ("progress", 4),
    ("reserved", 8),
    ("chunk_seq", 32),
)
assert sum(w for _, w in SHIM_FIELDS) == SHIM_LEN * 8


class MsgType(enum.IntEnum):
    DATA = 0  # a gradient chunk
    ACK = 1  # cumulative + selective acknowledgement, receiver -> sender
    CNP = 2  # congestion notification (DCQCN), receiver -> sender


class Flags(enum.IntFlag):
    NONE = 0
    LAST = 0x01  # DATA: last chunk of the tensor
    RETX = 0x02  # DATA: retransmission
    ECE = 0x04  # ACK: the acknowledged data carried CE (ECN echo for window-based CC)
    FIN = 0x08  # ACK: the receiver considers the tensor complete (delivered or zero-filled)


class ShimError(ValueError):
    """Raised for bytes that are not a valid mlfc shim. Subclasses say why."""


class TruncatedShim(ShimError):
    pass


class UnknownVersion(ShimError):
    pass


class BadMessageType(ShimError):
    pass


class FieldRange(ShimError):
    pass


_STRUCT = struct.Struct("!BBHIHBBI")
_ACK_HEAD = struct.Struct("!BBH")  # num_blocks, reserved, reserved
_BLOCK = struct.Struct("!II")


@dataclass(frozen=True, slots=True)
class Shim:
    """A decoded shim header (transport hot path; scapy is for tests and tools)."""

    msg_type: MsgType
    job_id: int
    iteration: int
    tensor_id: int = 0
    chunk_seq: int = 0
    importance: int = 0
    progress: int = 0
    flags: int = 0
    version: int = SHIM_VERSION

    def pack(self) -> bytes:
        for name, width in SHIM_FIELDS:
            if name == "reserved":
                continue
            value = int(getattr(self, name))
            if not 0 <= value < (1 << width):
                raise FieldRange(f"{name}={value} does not fit in {width} bits")
        return _STRUCT.pack(
            (self.version << 4) | int(self.msg_type),
            self.flags,
            self.job_id,
            self.iteration,
            self.tensor_id,
            (self.importance << 4) | self.progress,
            0,
            self.chunk_seq,
        )


def unpack_shim(data: bytes | memoryview) -> Shim:
    """Decode the first SHIM_LEN bytes of a UDP payload, with typed errors."""
    if len(data) < SHIM_LEN:
        raise TruncatedShim(f"shim needs {SHIM_LEN} bytes, got {len(data)}")
    b0, flags, job, iteration, tensor, imp_prog, _rsvd, seq = _STRUCT.unpack_from(data)
    version = b0 >> 4
    if version != SHIM_VERSION:
        raise UnknownVersion(f"shim version {version}, expected {SHIM_VERSION}")
    try:
        msg_type = MsgType(b0 & 0x0F)
    except ValueError:
        raise BadMessageType(f"unknown message type {b0 & 0x0F}") from None
    return Shim(msg_type, job, iteration, tensor, seq, imp_prog >> 4, imp_prog & 0x0F, flags, version)


@dataclass(frozen=True, slots=True)
class AckBody:
    """SACK blocks [start, end) of chunk sequence numbers received above the cumulative ack."""

    blocks: tuple[tuple[int, int], ...] = field(default_factory=tuple)

    def pack(self) -> bytes:
        if len(self.blocks) > MAX_SACK_BLOCKS:
            raise FieldRange(f"{len(self.blocks)} SACK blocks, at most {MAX_SACK_BLOCKS}")
        out = [_ACK_HEAD.pack(len(self.blocks), 0, 0)]
        for start, end in self.blocks:
            if not 0 <= start < end <= 0xFFFFFFFF:
                raise FieldRange(f"bad SACK block [{start}, {end})")
            out.append(_BLOCK.pack(start, end))
        return b"".join(out)


def unpack_ack_body(data: bytes | memoryview) -> AckBody:
    if len(data) < _ACK_HEAD.size:
        raise TruncatedShim("ACK body needs 4 bytes")
    count = data[0]
    if count > MAX_SACK_BLOCKS:
        raise FieldRange(f"{count} SACK blocks, at most {MAX_SACK_BLOCKS}")
    need = _ACK_HEAD.size + count * _BLOCK.size
    if len(data) < need:
        raise TruncatedShim(f"ACK with {count} blocks needs {need} bytes, got {len(data)}")
    blocks = []
    for i in range(count):
        start, end = _BLOCK.unpack_from(data, _ACK_HEAD.size + i * _BLOCK.size)
        if start >= end:
            raise FieldRange(f"bad SACK block [{start}, {end})")
        blocks.append((start, end))
    return AckBody(tuple(blocks))


def progress_bucket(bytes_ratio: float) -> int:
    """Quantise bytes sent / bytes per iteration into the 4-bit progress field."""
    if bytes_ratio != bytes_ratio:  # NaN
        return 0
    return max(0, min(PROGRESS_BUCKETS - 1, int(bytes_ratio * PROGRESS_BUCKETS)))


def is_shim_port(port: int) -> bool:
    return (port & SHIM_PORT_MASK) == SHIM_PORT_BASE


# ---- scapy classes (tests, PTF, tools) -------------------------------------------------------

_SCAPY_TYPES = {8: ByteField, 16: ShortField, 32: IntField}


def _scapy_fields() -> list:
    fields = []
    for name, width in SHIM_FIELDS:
        default = SHIM_VERSION if name == "version" else 0
        cls = _SCAPY_TYPES.get(width)
        fields.append(cls(name, default) if cls else BitField(name, default, width))
    return fields


class MlfcShim(Packet):
    name = "mlfc"
    fields_desc = _scapy_fields()

    def guess_payload_class(self, payload: bytes):
        if self.version == SHIM_VERSION and self.msg_type == MsgType.ACK:
            return MlfcAck
        return Packet.guess_payload_class(self, payload)


class SackBlock(Packet):
    name = "sack"
    fields_desc = [IntField("start", 0), IntField("end", 0)]

    def extract_padding(self, s: bytes):
        return b"", s


class MlfcAck(Packet):
    name = "mlfc-ack"
    fields_desc = [
        FieldLenField("num_blocks", None, count_of="blocks", fmt="B"),
        ByteField("reserved1", 0),
        ShortField("reserved2", 0),
        PacketListField("blocks", [], SackBlock, count_from=lambda p: p.num_blocks),
    ]


for _port in range(SHIM_PORT_BASE, SHIM_PORT_BASE + (~SHIM_PORT_MASK & 0xFFFF) + 1):
    bind_layers(UDP, MlfcShim, dport=_port)
