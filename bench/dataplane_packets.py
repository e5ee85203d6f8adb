"""The dataplane benchmarks' packet and entries (bench/dataplane_bench.py, bench/bmv2_ops.py): a tagged
ECT(0) gradient packet and, for mlfc.p4, a route plus a full policy so that every table is looked up.

Design comparisons load program layouts from other commits, so the entries follow each layout's P4Info
(``Layout``): before the queue telemetry (version-1 shim), its first layout (an egress ``port_rate`` table)
and the current one (the rate class in the route's ``set_next_hop``)."""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from mlfc import contract
from mlfc.controller import compile as cc
from mlfc.controller import validate
from mlfc.controller.entries import Exact, Lpm, entry
from mlfc.controller.pipeline import Pipeline
from mlfc.policy.drop import DropPolicy
from mlfc.policy.ecn import EcnProfile
from mlfc.policy.maif import Window
from mlfc.wire import SHIM_LEN, SHIM_PORT_BASE, SHIM_VERSION, MlfcShim, MsgType

DST_IP = "10.0.1.2"
SWITCH_MAC, HOST_MAC = "00:aa:bb:00:00:01", "00:00:00:00:00:02"
PORT_BPS = 10e9  # the egress port's rate class in the telemetry (any configured rate costs the same)


# The first telemetry layout's egress table and action (in git from 6e5f5ee; the contract no longer has them).
FIRST_TELEMETRY_PORT_RATE = "MlfcEgress.telemetry.port_rate"
FIRST_TELEMETRY_SET_RATE_CLASS = "MlfcEgress.telemetry.set_rate_class"


@dataclass(frozen=True)
class Layout:
    telemetry: bool = True  # version-2 shim: the program writes the queue telemetry
    route_rate_class: bool = True  # set_next_hop takes the egress port's rate class (the current layout)
    port_rate_table: bool = False  # the first telemetry layout's egress port_rate table


def layout_of(pipeline: Pipeline) -> Layout:
    hop = pipeline.schema.actions.get(contract.SET_NEXT_HOP)
    in_route = hop is not None and any(p.name == "rate_class" for p in hop.params)
    table = pipeline.schema.tables.get(FIRST_TELEMETRY_PORT_RATE) is not None
    return Layout(in_route or table, in_route, table)


def frame(size: int, *, telemetry: bool = True, udp_checksum: bool = False) -> bytes:
    """A tagged ECT(0) DATA frame of ``size`` bytes. ``telemetry``: the shim as it is now (version 2, with the
    queue telemetry); else version 1's 16 bytes (the same fields with ``reserved`` for ``rate_class`` and
    without ``queue_bytes``), the shim a layout from before the telemetry parses as tagged. ``udp_checksum``:
    with a UDP checksum, as the kernel sends the transport's datagrams (else 0, none)."""
    shim = bytes(MlfcShim(msg_type=MsgType.DATA, job_id=1, iteration=7, importance=9, progress=3))
    if not telemetry:
        assert shim[0] >> 4 == SHIM_VERSION == 2 and len(shim) == SHIM_LEN == 20  # version is the first nibble
        shim = bytes([(1 << 4) | (shim[0] & 0x0F)]) + shim[1:16]
    pkt = (
        Ether(src="00:00:00:00:00:01", dst=SWITCH_MAC)
        / IP(src="10.0.1.1", dst=DST_IP, tos=2)
        / UDP(sport=SHIM_PORT_BASE + 1, dport=SHIM_PORT_BASE + 2, chksum=None if udp_checksum else 0)
        / Raw(shim)
    )
    return bytes(pkt / (b"\x00" * max(0, size - len(pkt))))


def entries_for(program: str, layout: Layout = Layout()) -> list:
    """The egress port gets its rate class where ``layout`` has a place for it, so every tagged packet's
    telemetry write finds it."""
    route = entry(
        contract.ROUTES_V4,
        {contract.IPV4_DST: Lpm(int.from_bytes(socket.inet_aton(DST_IP)), 32)},
        contract.SET_NEXT_HOP,
        {
            "port": 1,
            "src_mac": int(SWITCH_MAC.replace(":", ""), 16),
            "dst_mac": int(HOST_MAC.replace(":", ""), 16),
            **({"rate_class": cc.port_rate_class(PORT_BPS)} if layout.route_rate_class and program == "mlfc" else {}),
        },
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
        *(
            [
                entry(
                    FIRST_TELEMETRY_PORT_RATE,
                    {"egress_port": Exact(1)},
                    FIRST_TELEMETRY_SET_RATE_CLASS,
                    {"rate_class": cc.port_rate_class(PORT_BPS)},
                )
            ]
            if layout.port_rate_table
            else []
        ),
    ]
