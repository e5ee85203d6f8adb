"""Tofino switches in the deployment file, and the same intents compiled for the TNA program: the
entry set equals the BMv2 one except that every queue-depth range is in 80-byte cells and every
iteration window is written as ternary prefixes, and every
entry encodes against the committed Tofino P4Info (offline, finsy's P4Schema; no switch)."""

from __future__ import annotations

import pytest
from controller_helpers import make_config, switch_doc
from test_controller_encoding import RICH

from mlfc import contract
from mlfc.controller import compile as comp
from mlfc.controller.config import queue_settings
from mlfc.controller.entries import Range, TableEntry, Ternary, ranges_as_ternaries
from mlfc.controller.errors import ValidationError
from mlfc.controller.pipeline import Pipeline
from mlfc.controller.queues import NoQueues, queue_client
from mlfc.policy import depth
from mlfc.proto import intent_pb2 as pb
from mlfc.testing.tofino import stale_committed_outputs

DEPTH_FIELDS = {contract.ENQ_QDEPTH, contract.DEQ_QDEPTH}


def tofino_doc(name: str = "t1", grpc_port: int = 9559, device_id: int = 1, **extra: object) -> dict:
    doc = switch_doc(name, grpc_port, device_id, target="tofino")
    doc["ports"] = [1, 2, 3]
    del doc["thrift_port"]
    return {**doc, **extra}


def test_a_tofino_switch_refuses_queue_settings_and_a_thrift_port() -> None:
    with pytest.raises(ValidationError, match=r"switches\[0\]\.ports: queue rate/depth on a tofino switch"):
        make_config({**tofino_doc(), "ports": [{"port": 1, "rate_pps": 100}]})
    with pytest.raises(ValidationError, match=r"switches\[0\]\.thrift_port: a tofino switch has no Thrift"):
        make_config(tofino_doc(thrift_port=9090))
    cfg = make_config(tofino_doc(), defaults={"queue": {"depth_pkts": 64}})
    assert queue_settings(cfg.switches[0], cfg.defaults.queue) == {}  # traffic-manager configuration
    assert isinstance(queue_client("tofino", None), NoQueues)


def test_device_config_format_and_packet_size_are_checked() -> None:
    with pytest.raises(ValidationError, match=r"pipeline\.tofino\.device_config_format: 'tar' is not one of"):
        make_config(tofino_doc(), pipeline={"tofino": {"device_config_format": "tar"}})
    with pytest.raises(ValidationError, match=r"defaults\.packet_bytes"):
        make_config(tofino_doc(), defaults={"packet_bytes": 20})
    cfg = make_config(tofino_doc(), switch_doc("b1", 50051, 2), defaults={"packet_bytes": 800})
    assert cfg.architectures == ("tna", "v1model")
    assert [cfg.cells_per_packet(sw) for sw in cfg.switches] == [10, 1]
    assert cfg.tofino.device_config_format == "stratum-bfrt"


def _in_cells(e: TableEntry, cells: int) -> TableEntry | None:
    """``e`` (compiled for BMv2) with its depth ranges converted as the controller does for Tofino."""
    match = dict(e.match)
    for name in DEPTH_FIELDS & match.keys():
        r = match[name]
        converted = depth.packets_to_cells(r.lo, r.hi, cells)
        if converted is None:
            return None
        match[name] = Range(*converted)
    return TableEntry(e.table, tuple(sorted(match.items())), e.action, e.params, e.priority)


@pytest.mark.parametrize("packet_bytes", [1500, 80, 9000])
def test_the_same_intent_gives_the_same_entries_up_to_depth_units(packet_bytes: int) -> None:
    bmv2 = switch_doc("s1", 50051, 1)
    tofino = {**tofino_doc("s1", 9559, 1), "routes_v4": bmv2["routes_v4"]}
    entries = {}
    for doc in (bmv2, tofino):
        cfg = make_config(doc, switch_doc("s2", 50052, 2), defaults={"packet_bytes": packet_bytes})
        entries[doc.get("target", "bmv2")] = comp.compile_intent(RICH, cfg).entries["s1"]
    cells = depth.cells_per_packet(packet_bytes)
    # a port's rate is queue configuration the controller makes on BMv2 only (a Tofino's is the traffic
    # manager's), so only BMv2's routes could carry a rate class; none of switch_doc's routes takes the rated port
    want = [c for c in (_in_cells(e, cells) for e in entries["bmv2"]) if c is not None]
    want = ranges_as_ternaries(want, comp.TOFINO_TERNARY_WIDTHS)
    assert [e.key for e in entries["tofino"]] == [e.key for e in want]
    assert list(entries["tofino"]) == want
    assert any(isinstance(v, Range) and v.lo > 0 for e in entries["tofino"] for k, v in e.match if k in DEPTH_FIELDS)
    windows = [v for e in entries["tofino"] for k, v in e.match if k == contract.ITERATION]
    assert windows and all(isinstance(v, Ternary) for v in windows)


@pytest.fixture(scope="module")
def tofino_pipeline() -> Pipeline:
    if not contract.TOFINO_P4INFO.is_file():
        pytest.skip(f"{contract.TOFINO_P4INFO} missing: the Tofino compiler's outputs are not committed")
    if stale := stale_committed_outputs():
        pytest.skip(stale)
    return Pipeline.load_tofino(device_config=False)


def test_every_intent_field_encodes_for_tofino(tofino_pipeline: Pipeline) -> None:
    intent = pb.Intent()
    intent.CopyFrom(RICH)
    intent.ecn.append(pb.PortEcn(port=2, profile=pb.EcnProfile(kmin=0, kmax=0, pmax=1.0)))
    cfg = make_config(tofino_doc("s1"), tofino_doc("s2", 9560, 2))
    compiled = comp.compile_intent(intent, cfg, tofino_pipeline)
    for entries in compiled.entries.values():
        assert {e.table for e in entries} == set(contract.TABLES)
        for e in entries:
            assert tofino_pipeline.decode(tofino_pipeline.encode(e)) == e, str(e)
