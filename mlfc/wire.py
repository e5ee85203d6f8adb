"""The mlfc wire format: one definition, used by hosts, PTF tests, the reference switch and unit tests.

A gradient packet is IPv4 / UDP / shim / payload. The shim is recognised by the UDP *destination*
port: any port in ``SHIM_PORT_BASE .. SHIM_PORT_BASE + 255`` (matched on the switch as
``dst_port &&& SHIM_PORT_MASK``). Both ends of an mlfc transfer bind ports in that range, so data
(sender -> receiver) and ACK/CNP (receiver -> sender) are both tagged. See docs/wire-format.md.

``SHIM_FIELDS`` is the single field table (``ACK_HEAD_FIELDS`` and ``SACK_BLOCK_FIELDS`` for the ACK
body). ``Layout`` derives the codec from a table: the struct format, a generated ``pack_into`` /
``unpack_from`` for the hot path (one ``struct`` call) and range-checked ``pack``; the scapy classes
are generated from the same tables, and a test checks p4src/shared/header.p4 against ``SHIM_FIELDS``
field for field. The transport's DATA descriptor is another ``Layout`` (mlfc.hosts.transport.packet).

One file (over 400 lines) on purpose: it is the single definition of the format; the field tables,
the Layout that derives codecs from them and the scapy classes must not drift apart.
"""

from __future__ import annotations

import enum
import functools
import struct
from dataclasses import dataclass, field

from scapy.fields import BitField, ByteField, FieldLenField, IntField, LongField, PacketListField, ShortField
from scapy.layers.inet import UDP
from scapy.packet import Packet, bind_layers

SHIM_VERSION = 2  # 2: the queue telemetry (rate_class, queue_bytes); 1 had 16 bytes (CHANGELOG)
SHIM_PORT_BASE = 0x4D00  # 19712: "M" in the high byte
SHIM_PORT_MASK = 0xFF00  # 256 ports, 19712..19967
SHIM_LEN = 20
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
    # Queue telemetry (docs/wire-format.md): on DATA the switches write the deepest egress queue the packet
    # met (bytes) and the rate class of that port, the maximum along the path; on an ACK the receiver echoes
    # the latest DATA's values. Senders write 0.
    ("rate_class", 8),
    ("chunk_seq", 32),
    ("queue_bytes", 32),
)
assert sum(w for _, w in SHIM_FIELDS) == SHIM_LEN * 8

# An ACK's body after the shim: this head, then num_blocks SACK blocks.
ACK_HEAD_FIELDS: tuple[tuple[str, int], ...] = (("num_blocks", 8), ("reserved1", 8), ("reserved2", 16))
SACK_BLOCK_FIELDS: tuple[tuple[str, int], ...] = (("start", 32), ("end", 32))


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


_SLOT_CODES = {8: "B", 16: "H", 32: "I", 64: "Q"}


class Layout:
    """A fixed-size header described by a field table ``(name, bits)`` in wire order, network byte order.

    The codec is derived from the table: consecutive fields are grouped into the smallest run that ends on
    an 8/16/32/64-bit boundary (a run of sub-byte fields fills one byte, most significant bits first, as P4
    and scapy lay out bit fields), each run is one ``struct`` slot, and ``pack_into``/``unpack_from`` are
    generated for those slots so the hot path is one ``struct`` call with shifts. ``source`` shows them.
    Fields whose name starts with ``reserved`` are written as 0 by ``pack`` and ignored by readers.
    """

    def __init__(self, fields: tuple[tuple[str, int], ...]) -> None:
        self.fields = tuple(fields)
        self.names = tuple(name for name, _ in self.fields)
        if len(set(self.names)) != len(self.names):
            raise ValueError(f"duplicate field names in {self.names}")
        slots: list[tuple[int, tuple[tuple[str, int, int], ...]]] = []  # (bits, ((name, shift, width), ...))
        run: list[tuple[str, int]] = []
        for name, width in self.fields:
            if not name.isidentifier() or name in ("buf", "offset") or not 0 < width <= 64:
                raise ValueError(f"bad field {name!r} of {width} bits")
            run.append((name, width))
            bits = sum(w for _, w in run)
            if bits in _SLOT_CODES:
                members, shift = [], bits
                for n, w in run:
                    shift -= w
                    members.append((n, shift, w))
                slots.append((bits, tuple(members)))
                run = []
            elif bits > 64:
                raise ValueError(f"fields {[n for n, _ in run]} do not pack into a whole 8/16/32/64-bit slot")
        if run:
            raise ValueError(f"fields {[n for n, _ in run]} do not end on a byte boundary")
        self.slots = tuple(slots)
        self.slot_names = tuple("_".join(name for name, _, _ in members) for _, members in self.slots)
        self._slot_of = {name: i for i, (_, members) in enumerate(self.slots) for name, _, _ in members}
        self.format = "!" + "".join(_SLOT_CODES[bits] for bits, _ in slots)
        self.struct = struct.Struct(self.format)
        self.size = self.struct.size
        self.source = self._generate()
        namespace: dict = {"_pack_into": self.struct.pack_into, "_unpack_from": self.struct.unpack_from}
        exec(self.source, namespace)  # the generated code of the field table above, as dataclasses does
        self.pack_into = namespace["pack_into"]  # (buf, offset, *values in field order); no range checks
        self.unpack_from = namespace["unpack_from"]  # (buf, offset=0) -> values in field order
        self.fits = namespace["fits"]  # (*values in field order) -> every value fits its width

    def _generate(self) -> str:
        slot_exprs, reads = [], []
        for i, (_, members) in enumerate(self.slots):
            slot_exprs.append(" | ".join(f"({n} << {s})" if s else n for n, s, _ in members))
            for k, (_, s, w) in enumerate(members):
                value = f"(s{i} >> {s})" if s else f"s{i}"
                reads.append(value if k == 0 else f"{value} & {(1 << w) - 1:#x}")  # the top bits need no mask
        slot_vars = ", ".join(f"s{i}" for i in range(len(self.slots)))
        fits = " and ".join(f"0 <= {n} < {1 << w:#x}" for n, w in self.fields)
        return (
            f"def fits({', '.join(self.names)}):\n"
            f"    return {fits}\n"
            f"def pack_into(buf, offset, {', '.join(self.names)}):\n"
            f"    _pack_into(buf, offset, {', '.join(slot_exprs)})\n"
            f"def unpack_from(buf, offset=0):\n"
            f"    {slot_vars}, = _unpack_from(buf, offset)\n"
            f"    return ({', '.join(reads)},)\n"
        )

    def byte_offset(self, name: str) -> int:
        """Where field ``name`` starts, in bytes from the header's start (a whole-byte field's own bytes)."""
        bits = sum(w for _, w in self.fields[: self.names.index(name)])
        if bits % 8:
            raise ValueError(f"{name} starts inside a byte")
        return bits // 8

    def check(self, values: tuple[int, ...] | list[int]) -> None:
        """Raise FieldRange naming the first value (in field order) that does not fit its width."""
        if not self.fits(*values):
            for value, (name, width) in zip(values, self.fields, strict=True):
                if not 0 <= value < (1 << width):
                    raise FieldRange(f"{name}={value} does not fit in {width} bits")

    def pack(self, **values: int) -> bytes:
        """Range-checked packing; omitted fields are 0, reserved ones always are."""
        unknown = set(values) - set(self.names)
        if unknown:
            raise TypeError(f"unknown fields {sorted(unknown)}")
        ordered = [0 if n.startswith("reserved") else int(values.get(n, 0)) for n in self.names]
        self.check(ordered)
        buf = bytearray(self.size)
        self.pack_into(buf, 0, *ordered)
        return bytes(buf)

    def unpack(self, data: bytes | memoryview, offset: int = 0) -> dict[str, int]:
        if len(data) - offset < self.size:
            raise TruncatedShim(f"{self.size} bytes needed, got {max(0, len(data) - offset)}")
        return dict(zip(self.names, self.unpack_from(data, offset), strict=True))

    def locate(self, name: str) -> tuple[int, int, int, int]:
        """Where field ``name`` sits: (byte offset of its slot, slot bytes, shift within the slot, width),
        the slot big-endian; for code outside Python (hosts/fastpath.c) that reads or writes it."""
        i = self._slot_of[name]
        offset = sum(bits for bits, _ in self.slots[:i]) // 8
        bits, members = self.slots[i]
        shift, width = next((s, w) for m, s, w in members if m == name)
        return offset, bits // 8, shift, width

    # -- many headers at once (numpy), for batches of segments ------------------------------------------

    @functools.cached_property
    def dtype(self):
        """A numpy structured dtype of the header: one big-endian unsigned field per slot, named by its
        members joined with ``_`` (``version_msg_type``, ``job_id``, ...), no padding."""
        import numpy as np  # only batch users pay for numpy

        codes = {8: ">u1", 16: ">u2", 32: ">u4", 64: ">u8"}
        return np.dtype([(self.slot_names[i], codes[bits]) for i, (bits, _) in enumerate(self.slots)])

    def rows(self, buf, count: int, stride: int, offset: int = 0):
        """A structured array view of ``count`` headers in ``buf``, one every ``stride`` bytes."""
        import numpy as np

        return np.ndarray((count,), dtype=self.dtype, buffer=buf, offset=offset, strides=(stride,))

    def pack_rows(self, rows, **columns) -> None:
        """Write fields into a ``rows`` view, each a scalar or an array of len(rows); every member of a slot
        written must be given (the slot is rewritten whole). Runs per batch of segments: one assignment per
        slot, shifts in the slot's own width."""
        import numpy as np

        done: set[int] = set()
        for name in columns:
            i = self._slot_of.get(name)
            if i is None:
                raise KeyError(f"unknown field {name!r}")
            if i in done:
                continue
            done.add(i)
            bits, members = self.slots[i]
            if len(members) == 1:
                rows[self.slot_names[i]] = columns[name]
                continue
            if any(m not in columns for m, _, _ in members):
                raise ValueError(f"slot {self.slot_names[i]} needs all of {[m for m, _, _ in members]}")
            native = np.dtype(f"u{bits // 8}")
            value = 0
            for m, shift, _ in members:
                value = value | (np.asarray(columns[m], dtype=native) << shift)
            rows[self.slot_names[i]] = value

    def columns(self, rows) -> tuple:
        """One view per slot of a ``rows`` view (field lookups done once, for ``row_packer``)."""
        return tuple(rows[name] for name in self.slot_names)

    def row_packer(self, *names: str):
        """A generated ``pack(columns, count, *values)`` writing exactly these fields (whole slots) into the
        first ``count`` rows of ``columns(rows)``, for the hot path: one assignment per slot, no checks.
        Values are scalars or arrays; a member shifted past 8 bits is widened to its slot's width first, so
        a narrow array cannot overflow."""
        slots = sorted({self._slot_of[n] for n in names})
        lines = []
        for i in slots:
            bits, members = self.slots[i]
            if any(m not in names for m, _, _ in members):
                raise ValueError(f"slot {self.slot_names[i]} needs all of {[m for m, _, _ in members]}")
            parts = []
            for m, shift, width in members:
                value = f"_np.asarray({m}, dtype=_np.uint{bits})" if shift + width > 8 and len(members) > 1 else m
                parts.append(f"({value} << {shift})" if shift else value)
            lines.append(f"    columns[{i}][:count] = {' | '.join(parts)}")
        source = f"def pack(columns, count, {', '.join(names)}):\n" + "\n".join(lines) + "\n"
        import numpy as np

        namespace: dict = {"_np": np}
        exec(source, namespace)  # generated from the field table, as pack_into is
        return namespace["pack"]

    def row_unpacker(self, *names: str):
        """A generated ``unpack(columns, count) -> tuple of arrays`` of these fields over the first ``count``
        rows of ``columns(rows)``, the counterpart of ``row_packer``."""
        reads = []
        for name in names:
            i = self._slot_of[name]
            members = self.slots[i][1]
            shift, width = next((s, w) for m, s, w in members if m == name)
            value = f"columns[{i}][:count]"
            if len(members) > 1:
                value = f"({value} >> {shift})" if shift else value
                value = value if members[0][0] == name else f"({value} & {(1 << width) - 1:#x})"
            reads.append(value)
        source = f"def unpack(columns, count):\n    return ({', '.join(reads)},)\n"
        namespace: dict = {}
        exec(source, namespace)  # generated from the field table, as unpack_from is
        return namespace["unpack"]


SHIM = Layout(SHIM_FIELDS)
assert SHIM.size == SHIM_LEN
ACK_HEAD = Layout(ACK_HEAD_FIELDS)
SACK_BLOCK = Layout(SACK_BLOCK_FIELDS)


@dataclass(frozen=True, slots=True)
class Shim:
    """A decoded shim header (transport and reference switch; scapy is for tests and tools)."""

    msg_type: MsgType
    job_id: int
    iteration: int
    tensor_id: int = 0
    chunk_seq: int = 0
    importance: int = 0
    progress: int = 0
    flags: int = 0
    version: int = SHIM_VERSION
    rate_class: int = 0  # telemetry (DATA: written by the switches; ACK: the echo)
    queue_bytes: int = 0

    def pack(self) -> bytes:
        values = [getattr(self, name, 0) for name in SHIM.names]  # reserved fields are not attributes: 0
        SHIM.check(values)
        buf = bytearray(SHIM_LEN)
        SHIM.pack_into(buf, 0, *values)
        return bytes(buf)


# Shim's attributes are SHIM_FIELDS minus the reserved ones; _SHIM_INDEX maps them, in Shim's order, to
# their position in the field table (unpack_shim builds a Shim positionally: it runs per packet).
_SHIM_INDEX = tuple(SHIM.names.index(name) for name in Shim.__dataclass_fields__)
assert {n for n in SHIM.names if not n.startswith("reserved")} == set(Shim.__dataclass_fields__)
_VERSION, _MSG_TYPE = SHIM.names.index("version"), SHIM.names.index("msg_type")
_MSG_TYPES = {int(t): t for t in MsgType}


def unpack_shim(data: bytes | memoryview) -> Shim:
    """Decode the first SHIM_LEN bytes of a UDP payload, with typed errors."""
    if len(data) < SHIM_LEN:
        raise TruncatedShim(f"shim needs {SHIM_LEN} bytes, got {len(data)}")
    values = list(SHIM.unpack_from(data))
    if values[_VERSION] != SHIM_VERSION:
        raise UnknownVersion(f"shim version {values[_VERSION]}, expected {SHIM_VERSION}")
    msg_type = _MSG_TYPES.get(values[_MSG_TYPE])
    if msg_type is None:
        raise BadMessageType(f"unknown message type {values[_MSG_TYPE]}")
    values[_MSG_TYPE] = msg_type
    return Shim(*[values[i] for i in _SHIM_INDEX])


@dataclass(frozen=True, slots=True)
class AckBody:
    """SACK blocks [start, end) of chunk sequence numbers received above the cumulative ack."""

    blocks: tuple[tuple[int, int], ...] = field(default_factory=tuple)

    def pack(self) -> bytes:
        if len(self.blocks) > MAX_SACK_BLOCKS:
            raise FieldRange(f"{len(self.blocks)} SACK blocks, at most {MAX_SACK_BLOCKS}")
        out = bytearray(ACK_HEAD.size + len(self.blocks) * SACK_BLOCK.size)
        ACK_HEAD.pack_into(out, 0, *(len(self.blocks) if n == "num_blocks" else 0 for n in ACK_HEAD.names))
        for i, (start, end) in enumerate(self.blocks):
            if not 0 <= start < end <= 0xFFFFFFFF:
                raise FieldRange(f"bad SACK block [{start}, {end})")
            SACK_BLOCK.pack_into(out, ACK_HEAD.size + i * SACK_BLOCK.size, start, end)
        return bytes(out)


def unpack_ack_body(data: bytes | memoryview) -> AckBody:
    if len(data) < ACK_HEAD.size:
        raise TruncatedShim(f"ACK body needs {ACK_HEAD.size} bytes")
    count = ACK_HEAD.unpack(data)["num_blocks"]
    if count > MAX_SACK_BLOCKS:
        raise FieldRange(f"{count} SACK blocks, at most {MAX_SACK_BLOCKS}")
    need = ACK_HEAD.size + count * SACK_BLOCK.size
    if len(data) < need:
        raise TruncatedShim(f"ACK with {count} blocks needs {need} bytes, got {len(data)}")
    blocks = []
    for i in range(count):
        start, end = SACK_BLOCK.unpack_from(data, ACK_HEAD.size + i * SACK_BLOCK.size)
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

_SCAPY_TYPES = {8: ByteField, 16: ShortField, 32: IntField, 64: LongField}


def _scapy_fields(table: tuple[tuple[str, int], ...], defaults: dict[str, int] | None = None) -> list:
    fields = []
    for name, width in table:
        default = (defaults or {}).get(name, 0)
        cls = _SCAPY_TYPES.get(width)
        fields.append(cls(name, default) if cls else BitField(name, default, width))
    return fields


class MlfcShim(Packet):
    name = "mlfc"
    fields_desc = _scapy_fields(SHIM_FIELDS, {"version": SHIM_VERSION})

    def guess_payload_class(self, payload: bytes):
        if self.version == SHIM_VERSION and self.msg_type == MsgType.ACK:
            return MlfcAck
        return Packet.guess_payload_class(self, payload)


class SackBlock(Packet):
    name = "sack"
    fields_desc = _scapy_fields(SACK_BLOCK_FIELDS)

    def extract_padding(self, s: bytes):
        return b"", s


class MlfcAck(Packet):
    name = "mlfc-ack"
    # num_blocks counts the list that follows the head (scapy fills it in when building)
    fields_desc = [
        *(
            FieldLenField(name, None, count_of="blocks", fmt="B") if name == "num_blocks" else f
            for name, f in zip(ACK_HEAD.names, _scapy_fields(ACK_HEAD_FIELDS), strict=True)
        ),
        PacketListField("blocks", [], SackBlock, count_from=lambda p: p.num_blocks),
    ]


for _port in range(SHIM_PORT_BASE, SHIM_PORT_BASE + (~SHIM_PORT_MASK & 0xFFFF) + 1):
    bind_layers(UDP, MlfcShim, dport=_port)
