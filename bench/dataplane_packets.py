"""The dataplane benchmarks' packet and entries (bench/dataplane_bench.py, bench/bmv2_ops.py): a tagged
ECT(0) gradient packet and, for mlfc.p4, a route plus a full policy so that every table is looked up."""

from __future__ import annotations

import ipaddress
import socket

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from mlfc import contract
from mlfc.controller import compile as cc
from mlfc.controller import validate
from mlfc.controller.entries import Lpm, entry
from mlfc.controller.pipeline import Pipeline
from mlfc.policy.drop import DropPolicy
from mlfc.policy.ecn import EcnProfile
from mlfc.policy.maif import Window
from mlfc.wire import SHIM_LEN, SHIM_PORT_BASE, SHIM_VERSION, MlfcShim, MsgType

DST_IP = "10.0.1.2"
SWITCH_MAC, HOST_MAC = "00:aa:bb:00:00:01", "00:00:00:00:00:02"
PORT_BPS = 10e9  # the egress port's rate class in the telemetry (any configured rate costs the same)


def has_telemetry(pipeline: Pipeline) -> bool:
    return pipeline.schema.tables.get(contract.PORT_RATE) is not None


def frame(size: int, *, telemetry: bool = True) -> bytes:
    """A tagged ECT(0) DATA frame of ``size`` bytes. ``telemetry``: the shim as it is now (version 2, with the
    queue telemetry); else version 1's 16 bytes (the same fields with ``reserved`` for ``rate_class`` and
    without ``queue_bytes``), the shim a layout from before the telemetry parses as tagged."""
    shim = bytes(MlfcShim(msg_type=MsgType.DATA, job_id=1, iteration=7, importance=9, progress=3))
    if not telemetry:
        assert shim[0] >> 4 == SHIM_VERSION == 2 and len(shim) == SHIM_LEN == 20  # version is the first nibble
        shim = bytes([(1 << 4) | (shim[0] & 0x0F)]) + shim[1:16]
    pkt = (
        Ether(src="00:00:00:00:00:01", dst=SWITCH_MAC)
        / IP(src="10.0.1.1", dst=DST_IP, tos=2)
        / UDP(sport=SHIM_PORT_BASE + 1, dport=SHIM_PORT_BASE + 2, chksum=0)
        / Raw(shim)
    )
    return bytes(pkt / (b"\x00" * max(0, size - len(pkt))))


def entries_for(program: str, *, telemetry: bool = True) -> list:
    """``telemetry``: the program has the port_rate table (issue 46's telemetry; older layouts lack it), so
    the egress port gets its rate class and every tagged packet's telemetry write finds an entry."""
    route = entry(
        contract.ROUTES_V4,
        {contract.IPV4_DST: Lpm(int.from_bytes(socket.inet_aton(DST_IP)), 32)},
        contract.SET_NEXT_HOP,
        {"port": 1, "src_mac": int(SWITCH_MAC.replace(":", ""), 16), "dst_mac": int(HOST_MAC.replace(":", ""), 16)},
    )
    if program == "l3fwd":
        return [route]
    flow = validate.FlowMatch(None, ipaddress.IPv4Network("10.0.9.0/24"), 6, 0, 5001)
    jobs = (
        validate.Job(1, 4, (Window(100, 200, 6),), (flow,)),
        validate.Job(2, 2),
    )
    return [
        route,
        *cc.flow_entries(jobs),
        *cc.job_priority_entries(jobs, interleaving=False),
        *cc.ecn_entries({0: EcnProfile(), 1: EcnProfile(kmin=8, kmax=40, pmax=0.1)}),
        *cc.drop_entries(DropPolicy()),
        *(cc.port_rate_entries({1: PORT_BPS}) if telemetry else []),
    ]
