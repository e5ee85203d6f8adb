"""The dataplane benchmarks' packet and entries (bench/dataplane_packets.py): a layout from before the queue
telemetry gets the 16-byte version-1 shim it parses as tagged and no rate class; the first telemetry layout its
port_rate entry; the current one the rate class in its route. No switch here."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import dataplane_packets as dp
from scapy.layers.inet import UDP
from scapy.layers.l2 import Ether

from mlfc import contract
from mlfc.controller import compile as cc
from mlfc.controller.pipeline import Pipeline
from mlfc.wire import SHIM_LEN, MlfcShim


def test_frames_carry_the_shim_of_the_layouts_version_at_the_same_size() -> None:
    now, before = dp.frame(200), dp.frame(200, telemetry=False)
    assert len(now) == len(before) == 200
    shim_now = MlfcShim(bytes(Ether(now)[UDP].payload)[:SHIM_LEN])
    assert (shim_now.version, shim_now.job_id, shim_now.importance) == (2, 1, 9)
    old = bytes(Ether(before)[UDP].payload)
    assert old[0] >> 4 == 1 and old[:16][1:] == bytes(Ether(now)[UDP].payload)[1:16]  # the same first 16 bytes


def test_a_checksummed_frame_carries_a_valid_udp_checksum() -> None:
    assert Ether(dp.frame(200))[UDP].chksum == 0
    pkt = Ether(dp.frame(200, udp_checksum=True))
    fresh = pkt.copy()
    del fresh[UDP].chksum
    assert pkt[UDP].chksum != 0 and Ether(bytes(fresh))[UDP].chksum == pkt[UDP].chksum


def test_each_layout_gets_the_rate_class_where_it_has_a_place_for_it() -> None:
    def route(entries: list) -> dict:
        return dict(next(e for e in entries if e.table == contract.ROUTES_V4).params)

    klass = cc.port_rate_class(dp.PORT_BPS)
    now = dp.entries_for("mlfc", dp.Layout())
    assert route(now)["rate_class"] == klass and dp.FIRST_TELEMETRY_PORT_RATE not in {e.table for e in now}
    first = dp.entries_for("mlfc", dp.Layout(telemetry=True, route_rate_class=False, port_rate_table=True))
    assert "rate_class" not in route(first)
    assert dict(next(e for e in first if e.table == dp.FIRST_TELEMETRY_PORT_RATE).params) == {"rate_class": klass}
    before = dp.entries_for("mlfc", dp.Layout(telemetry=False, route_rate_class=False))
    assert "rate_class" not in route(before) and dp.FIRST_TELEMETRY_PORT_RATE not in {e.table for e in before}
    assert [e.table for e in dp.entries_for("l3fwd")] == [contract.ROUTES_V4]
    assert "rate_class" not in route(dp.entries_for("l3fwd"))


def test_the_committed_programs_layouts() -> None:
    build = contract.P4_BUILD
    mlfc = Pipeline.load(build / "mlfc.p4info.txtpb", build / "mlfc.json", checked=False)
    l3fwd = Pipeline.load(build / "l3fwd.p4info.txtpb", build / "l3fwd.json", checked=False)
    assert dp.layout_of(mlfc) == dp.Layout(telemetry=True, route_rate_class=True, port_rate_table=False)
    assert dp.layout_of(l3fwd) == dp.Layout(telemetry=False, route_rate_class=False, port_rate_table=False)
