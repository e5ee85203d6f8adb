"""The device configs for Tofino P4Runtime servers, decoded independently of the packer: Stratum-bfrt's
BfPipelineConfig through a descriptor built from bf.proto's field numbers, the PI format by hand."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from mlfc.controller.tofino_pipeline import TofinoArtifacts, pack_pi, pack_stratum_bfrt

_T = descriptor_pb2.FieldDescriptorProto


def _bf_pipeline_config_class():  # type: ignore[no-untyped-def]
    """stratum.hal.barefoot.BfPipelineConfig (stratum/hal/lib/barefoot/bf.proto), rebuilt from its fields."""
    f = descriptor_pb2.FileDescriptorProto(name="bf_test.proto", package="stratum.hal.barefoot", syntax="proto3")
    msg = f.message_type.add(name="BfPipelineConfig")
    prof = msg.nested_type.add(name="Profile")
    for name, number, typ, label in (
        ("profile_name", 1, _T.TYPE_STRING, _T.LABEL_OPTIONAL),
        ("context", 2, _T.TYPE_BYTES, _T.LABEL_OPTIONAL),
        ("binary", 3, _T.TYPE_BYTES, _T.LABEL_OPTIONAL),
        ("pipe_scope", 4, _T.TYPE_UINT32, _T.LABEL_REPEATED),
    ):
        prof.field.add(name=name, number=number, type=typ, label=label)
    msg.field.add(name="p4_name", number=1, type=_T.TYPE_STRING, label=_T.LABEL_OPTIONAL)
    msg.field.add(name="bfruntime_info", number=2, type=_T.TYPE_BYTES, label=_T.LABEL_OPTIONAL)
    msg.field.add(
        name="profiles",
        number=3,
        type=_T.TYPE_MESSAGE,
        label=_T.LABEL_REPEATED,
        type_name=".stratum.hal.barefoot.BfPipelineConfig.Profile",
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("stratum.hal.barefoot.BfPipelineConfig"))


def test_stratum_bfrt_format_is_a_bf_pipeline_config() -> None:
    bfrt, context, binary = b'{"tables": []}', b'{"context": 1}', bytes(range(256)) * 300
    cfg = _bf_pipeline_config_class().FromString(pack_stratum_bfrt("mlfc", bfrt, context, binary))
    assert cfg.p4_name == "mlfc" and cfg.bfruntime_info == bfrt
    assert len(cfg.profiles) == 1
    p = cfg.profiles[0]
    assert (p.profile_name, p.context, p.binary, list(p.pipe_scope)) == ("pipe", context, binary, [])


def test_stratum_bfrt_pipe_scope_is_packed_uint32() -> None:
    raw = pack_stratum_bfrt("mlfc", b"{}", b"{}", b"\x00", pipe_scope=(0, 1, 300))
    assert list(_bf_pipeline_config_class().FromString(raw).profiles[0].pipe_scope) == [0, 1, 300]


def test_pi_format_is_three_length_prefixed_parts() -> None:
    raw = pack_pi("mlfc", b"BIN" * 1000, b'{"ctx": 2}')
    parts, off = [], 0
    while off < len(raw):
        (n,) = struct.unpack_from("<I", raw, off)
        parts.append(raw[off + 4 : off + 4 + n])
        off += 4 + n
    assert parts == [b"mlfc", b"BIN" * 1000, b'{"ctx": 2}']


def test_artifacts_say_what_is_missing(tmp_path: Path) -> None:
    a = TofinoArtifacts(tmp_path / "p4info", tmp_path / "bfrt.json", tmp_path / "ctx.json", tmp_path / "tofino.bin")
    assert len(a.missing()) == 4
    pi = TofinoArtifacts(a.p4info, a.bfrt, a.context, a.binary, device_config_format="pi")
    assert str(a.bfrt) not in pi.missing()  # the PI format carries no bfrt.json
    for p in (a.p4info, a.bfrt, a.context, a.binary):
        p.write_bytes(p.name.encode())
    assert a.missing() == []
    assert _bf_pipeline_config_class().FromString(a.device_config()).bfruntime_info == b"bfrt.json"
    with pytest.raises(ValueError, match="device_config_format"):
        TofinoArtifacts(a.p4info, device_config_format="tar").device_config()


def test_the_committed_outputs_load_and_pack_for_both_servers() -> None:
    a = TofinoArtifacts()
    if a.missing():
        pytest.skip(f"Tofino outputs not committed: {', '.join(a.missing())}")
    cfg = _bf_pipeline_config_class().FromString(a.device_config())
    assert cfg.p4_name == "mlfc" and cfg.bfruntime_info == a.bfrt.read_bytes()
    (profile,) = cfg.profiles
    assert (profile.binary, profile.context) == (a.binary.read_bytes(), a.context.read_bytes())
    pi = TofinoArtifacts(device_config_format="pi").device_config()
    assert len(pi) == 3 * 4 + len(b"mlfc") + a.binary.stat().st_size + a.context.stat().st_size
