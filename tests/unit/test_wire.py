"""The wire format: round trips over every field range, typed errors on bad input, and the
scapy classes agreeing with the fast codec."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scapy.layers.inet import IP, UDP

from mlfc import wire
from mlfc.wire import AckBody, MlfcAck, MlfcShim, MsgType, SackBlock, Shim


def _bits(name: str) -> int:
    return dict(wire.SHIM_FIELDS)[name]


def _field(name: str):
    return st.integers(0, (1 << _bits(name)) - 1)


shims = st.builds(
    Shim,
    msg_type=st.sampled_from(list(MsgType)),
    job_id=_field("job_id"),
    iteration=_field("iteration"),
    tensor_id=_field("tensor_id"),
    chunk_seq=_field("chunk_seq"),
    importance=_field("importance"),
    progress=_field("progress"),
    flags=_field("flags"),
    rate_class=_field("rate_class"),
    queue_bytes=_field("queue_bytes"),
)


@given(shims)
def test_shim_round_trip(shim: Shim) -> None:
    data = shim.pack()
    assert len(data) == wire.SHIM_LEN
    assert wire.unpack_shim(data) == shim


@given(shims, st.binary(max_size=64))
def test_scapy_and_struct_agree(shim: Shim, payload: bytes) -> None:
    data = shim.pack()
    parsed = MlfcShim(data + payload)
    for name, _ in wire.SHIM_FIELDS:
        assert getattr(parsed, name) == int(getattr(shim, name)), name
    built = bytes(MlfcShim(**{n: int(getattr(shim, n)) for n, _ in wire.SHIM_FIELDS}))
    assert built == data


@given(st.binary(max_size=wire.SHIM_LEN - 1))
def test_truncated_shim_is_a_typed_error(data: bytes) -> None:
    with pytest.raises(wire.TruncatedShim):
        wire.unpack_shim(data)


@given(
    st.integers(0, 15).filter(lambda v: v != wire.SHIM_VERSION),
    st.binary(min_size=wire.SHIM_LEN - 1, max_size=wire.SHIM_LEN - 1),
)
def test_unknown_version_is_a_typed_error(version: int, rest: bytes) -> None:
    with pytest.raises(wire.UnknownVersion):
        wire.unpack_shim(bytes([version << 4]) + rest)


@given(st.integers(len(MsgType), 15), st.binary(min_size=wire.SHIM_LEN - 1, max_size=wire.SHIM_LEN - 1))
def test_unknown_message_type_is_a_typed_error(msg_type: int, rest: bytes) -> None:
    with pytest.raises(wire.BadMessageType):
        wire.unpack_shim(bytes([(wire.SHIM_VERSION << 4) | msg_type]) + rest)


@given(st.binary(max_size=80))
def test_arbitrary_bytes_never_crash(data: bytes) -> None:
    with contextlib.suppress(wire.ShimError):
        wire.unpack_shim(data)
    with contextlib.suppress(wire.ShimError):
        wire.unpack_ack_body(data)


@pytest.mark.parametrize(
    ("name", "value"), [("job_id", 1 << 16), ("importance", 16), ("progress", -1), ("iteration", 1 << 32)]
)
def test_pack_rejects_out_of_range_fields(name: str, value: int) -> None:
    kwargs = {"msg_type": MsgType.DATA, "job_id": 1, "iteration": 0, name: value}
    with pytest.raises(wire.FieldRange, match=name):
        Shim(**kwargs).pack()


blocks = st.lists(
    st.tuples(st.integers(0, (1 << 32) - 2), st.integers(1, 1 << 20)).map(
        lambda t: (t[0], min(t[0] + t[1], (1 << 32) - 1))
    ),
    max_size=wire.MAX_SACK_BLOCKS,
)


@given(blocks)
def test_ack_body_round_trip_and_scapy(blk: list[tuple[int, int]]) -> None:
    body = AckBody(tuple(blk))
    data = body.pack()
    assert wire.unpack_ack_body(data) == body
    parsed = MlfcAck(data)
    assert [(b.start, b.end) for b in parsed.blocks] == blk
    assert bytes(MlfcAck(blocks=[SackBlock(start=s, end=e) for s, e in blk])) == data


def test_ack_body_truncated_and_oversized() -> None:
    data = AckBody(((1, 5), (9, 12))).pack()
    with pytest.raises(wire.TruncatedShim):
        wire.unpack_ack_body(data[:-1])
    with pytest.raises(wire.FieldRange):
        wire.unpack_ack_body(bytes([wire.MAX_SACK_BLOCKS + 1, 0, 0, 0]))
    with pytest.raises(wire.FieldRange):
        AckBody(((5, 5),)).pack()


def test_udp_binding_covers_the_port_range_only() -> None:
    shim = Shim(MsgType.DATA, job_id=7, iteration=3).pack()
    for port in (wire.SHIM_PORT_BASE, wire.SHIM_PORT_BASE + 0xFF):
        pkt = IP(bytes(IP() / UDP(sport=1234, dport=port) / shim))
        assert pkt.haslayer(MlfcShim) and pkt[MlfcShim].job_id == 7
    for port in (wire.SHIM_PORT_BASE - 1, wire.SHIM_PORT_BASE + 0x100):
        assert not IP(bytes(IP() / UDP(sport=1234, dport=port) / shim)).haslayer(MlfcShim)
    assert wire.is_shim_port(wire.SHIM_PORT_BASE + 5) and not wire.is_shim_port(80)


def test_ack_packets_dissect_their_sack_blocks() -> None:
    raw = Shim(MsgType.ACK, job_id=1, iteration=2, chunk_seq=10).pack() + AckBody(((12, 20),)).pack()
    pkt = IP(bytes(IP() / UDP(dport=wire.SHIM_PORT_BASE) / raw))
    assert pkt[MlfcAck].num_blocks == 1 and pkt[SackBlock].start == 12


@pytest.mark.parametrize(
    ("ratio", "bucket"),
    [(0.0, 0), (0.0624, 0), (0.0625, 1), (0.5, 8), (1.0, 15), (7.0, 15), (-1.0, 0), (float("nan"), 0)],
)
def test_progress_bucket(ratio: float, bucket: int) -> None:
    assert wire.progress_bucket(ratio) == bucket


def test_codec_is_derived_from_the_field_table() -> None:
    # the sub-byte pairs (version/msg_type, importance/progress) share a byte, high nibble first
    assert wire.SHIM.format == "!BBHIHBBII" and wire.SHIM.size == wire.SHIM_LEN == 20
    assert [name for name, _, _ in wire.SHIM.slots[0][1]] == ["version", "msg_type"]
    assert wire.ACK_HEAD.size == 4 and wire.SACK_BLOCK.size == 8
    data = Shim(MsgType.ACK, job_id=0x0102, iteration=3, importance=0xA, progress=0x5, flags=0x08, rate_class=0x3C,
                queue_bytes=0x01020304).pack()  # fmt: skip
    assert data[0] == 0x21 and data[1] == 0x08 and data[2:4] == b"\x01\x02" and data[10] == 0xA5
    # the telemetry: the rate class in byte 11 (the 16-bit word importance|progress|rate_class), the depth last
    assert data[11] == 0x3C and data[16:20] == b"\x01\x02\x03\x04"


def test_layout_groups_bit_fields_into_whole_slots() -> None:
    lay = wire.Layout((("a", 4), ("b", 12), ("c", 8), ("d", 3), ("e", 5), ("f", 64)))
    assert lay.format == "!HBBQ" and lay.size == 12
    data = lay.pack(a=0x1, b=0x234, c=0xFF, d=0b101, e=0b10011, f=1 << 63)
    assert data[:4] == bytes([0x12, 0x34, 0xFF, 0b10110011]) and data[4:] == (1 << 63).to_bytes(8, "big")
    assert lay.unpack(data) == {"a": 1, "b": 0x234, "c": 0xFF, "d": 5, "e": 0b10011, "f": 1 << 63}
    buf = bytearray(lay.size + 2)
    lay.pack_into(buf, 2, 1, 0x234, 0xFF, 5, 0b10011, 1 << 63)
    assert bytes(buf[2:]) == data and lay.unpack_from(buf, 2) == tuple(lay.unpack(data).values())
    with pytest.raises(wire.FieldRange, match="b=4096"):
        lay.pack(b=1 << 12)
    with pytest.raises(TypeError, match="zz"):
        lay.pack(zz=1)
    with pytest.raises(wire.TruncatedShim):
        lay.unpack(data[:-1])


@pytest.mark.parametrize(
    "table",
    [
        (("a", 4),),  # ends mid-byte
        (("a", 4), ("b", 64)),  # no 8/16/32/64-bit slot holds them
        (("a", 8), ("a", 8)),  # duplicate
        (("offset", 8),),  # clashes with the generated functions' arguments
        (("a", 0),),
    ],
)
def test_layout_rejects_tables_it_cannot_pack(table) -> None:
    with pytest.raises(ValueError):
        wire.Layout(table)


@given(st.fixed_dictionaries({n: st.integers(0, (1 << w) - 1) for n, w in wire.SHIM_FIELDS}))
def test_layout_round_trip_matches_scapy(values: dict[str, int]) -> None:
    data = wire.SHIM.pack(**values)
    assert wire.SHIM.unpack(data) == values
    assert bytes(MlfcShim(**values)) == data


def test_rows_view_packs_and_reads_many_headers_like_the_scalar_codec() -> None:
    np = pytest.importorskip("numpy")
    stride = wire.SHIM_LEN + 5  # a header every 21 bytes, payload between
    buf = bytearray(4 * stride)
    rows = wire.SHIM.rows(buf, 4, stride)
    assert rows.dtype.names[0] == "version_msg_type" and rows.dtype.itemsize == wire.SHIM_LEN
    seqs = np.arange(10, 14, dtype=np.uint32)
    wire.SHIM.pack_rows(rows, version=wire.SHIM_VERSION, msg_type=int(MsgType.DATA), job_id=7, chunk_seq=seqs,
                        importance=np.array([0, 8, 15, 3]), progress=2)  # fmt: skip
    for i in range(4):
        shim = wire.unpack_shim(memoryview(buf)[i * stride :])
        assert (shim.job_id, shim.chunk_seq, shim.progress) == (7, 10 + i, 2)
        assert shim.importance == [0, 8, 15, 3][i]
    importance, seq, version = wire.SHIM.row_unpacker("importance", "chunk_seq", "version")(wire.SHIM.columns(rows), 4)
    assert (
        importance.tolist() == [0, 8, 15, 3]
        and seq.tolist() == [10, 11, 12, 13]
        and version.tolist() == [wire.SHIM_VERSION] * 4
    )
    with pytest.raises(ValueError, match="importance_progress"):
        wire.SHIM.pack_rows(rows, importance=1)  # half a slot
    with pytest.raises(KeyError):
        wire.SHIM.row_unpacker("nope")


def test_generated_row_packer_and_unpacker() -> None:
    np = pytest.importorskip("numpy")
    lay = wire.Layout((("a", 4), ("b", 12), ("c", 8), ("d", 4), ("e", 4)))
    buf = bytearray(3 * lay.size)
    cols = lay.columns(lay.rows(buf, 3, lay.size))
    pack = lay.row_packer("a", "b", "d", "e")
    pack(cols, 2, np.array([1, 15], dtype=np.uint8), np.array([0xFFF, 0x234], dtype=np.uint16), 0xA, 5)
    assert lay.unpack(buf) == {"a": 1, "b": 0xFFF, "c": 0, "d": 0xA, "e": 5}
    assert lay.unpack(buf, lay.size)["a"] == 15 and lay.unpack(buf, 2 * lay.size)["a"] == 0  # count = 2
    a, b, e = lay.row_unpacker("a", "b", "e")(cols, 2)
    assert a.tolist() == [1, 15] and b.tolist() == [0xFFF, 0x234] and e.tolist() == [5, 5]
    with pytest.raises(ValueError, match="a_b"):
        lay.row_packer("a")
