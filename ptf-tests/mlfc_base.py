"""Base class and helpers for mlfc's PTF tests.

The harness (`python -m mlfc.topologies.ptf_runner`, `make ptf`) starts simple_switch_grpc with
ports 0..2 on veths and passes its addresses as PTF test params. Every test loads the pipeline
through the controller's own P4Runtime client, installs what it needs, and has every entry it
wrote deleted and every queue setting reset in tearDown, so tests do not leak into each other.
"""

from __future__ import annotations

import time

import ptf
import ptf.testutils as tu
from mlfc_switch import TestSwitch
from ptf.base_tests import BaseTest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether

from mlfc.wire import SHIM_PORT_BASE, MlfcShim, MsgType

PORTS = (0, 1, 2)
HOST_MAC = {0: "00:00:00:00:00:10", 1: "00:00:00:00:00:11", 2: "00:00:00:00:00:12"}
HOST_IP = {0: "10.0.0.10", 1: "10.0.0.11", 2: "10.0.0.12"}
SWITCH_MAC = "00:aa:bb:00:00:01"


def param(name: str, default=None):
    value = tu.test_param_get(name, default)
    if value is None:
        raise RuntimeError(f"PTF test param {name!r} missing: run through `make ptf`")
    return value


def shim_packet(
    src_port: int = 0,
    dst_port: int = 1,
    *,
    job: int = 1,
    iteration: int = 0,
    importance: int = 0,
    progress: int = 0,
    msg_type: int = MsgType.DATA,
    seq: int = 0,
    ecn: int = 2,
    version: int = 1,
    payload: bytes = b"",
    size: int = 200,
    udp_dport: int = SHIM_PORT_BASE + 1,
) -> Ether:
    """A tagged packet from host ``src_port`` to host ``dst_port``, as that host would send it."""
    pkt = (
        Ether(src=HOST_MAC[src_port], dst=SWITCH_MAC)
        / IP(src=HOST_IP[src_port], dst=HOST_IP[dst_port], ttl=64, tos=ecn)
        / UDP(sport=SHIM_PORT_BASE + 2, dport=udp_dport, chksum=0)
        / MlfcShim(
            version=version,
            msg_type=msg_type,
            job_id=job,
            iteration=iteration,
            importance=importance,
            progress=progress,
            chunk_seq=seq,
        )
        / payload
    )
    pad = size - len(pkt)
    return pkt / (b"\x00" * pad) if pad > 0 else pkt


def forwarded(pkt: Ether, out_port: int, *, ce: bool = False) -> Ether:
    """What the switch emits for ``pkt`` routed to host ``out_port``: MACs rewritten, TTL - 1."""
    out = pkt.copy()
    out[Ether].src = SWITCH_MAC
    out[Ether].dst = HOST_MAC[out_port]
    out[IP].ttl -= 1
    if ce:
        out[IP].tos = (out[IP].tos & 0xFC) | 3
    del out[IP].chksum
    return Ether(bytes(out))


def tcp_packet(src_port: int, dst_port: int, sport: int, dport: int, size: int = 200) -> Ether:
    pkt = (
        Ether(src=HOST_MAC[src_port], dst=SWITCH_MAC)
        / IP(src=HOST_IP[src_port], dst=HOST_IP[dst_port], ttl=64)
        / TCP(sport=sport, dport=dport, flags="A")
    )
    return pkt / (b"\x00" * max(0, size - len(pkt)))


class MlfcTest(BaseTest):
    """Connects to the switch, loads the pipeline, routes every test host, cleans up after."""

    def setUp(self) -> None:
        super().setUp()
        self.dataplane = ptf.dataplane_instance
        self.dataplane.flush()
        self.sw = TestSwitch(
            grpc_addr=param("grpc_addr"),
            device_id=int(param("device_id", 1)),
            thrift_port=int(param("thrift_port")),
        )
        self.sw.connect()
        for port in PORTS:
            self.sw.add_route(f"{HOST_IP[port]}/32", port, SWITCH_MAC, HOST_MAC[port])

    def tearDown(self) -> None:
        try:
            self.sw.cleanup()
        finally:
            self.sw.close()
            super().tearDown()

    # -- helpers ------------------------------------------------------------------------------

    def send(self, port: int, pkt, count: int = 1) -> None:
        tu.send_packet(self, port, pkt, count)

    def receive_all(self, port: int, expect: int, timeout: float = 10.0) -> list[Ether]:
        """Collect packets from ``port`` until ``expect`` arrived or ``timeout`` passed."""
        got: list[Ether] = []
        deadline = time.monotonic() + timeout
        while len(got) < expect and time.monotonic() < deadline:
            res = self.dataplane.poll(port_number=port, timeout=min(0.5, deadline - time.monotonic()))
            if isinstance(res, self.dataplane.PollSuccess):
                got.append(Ether(res.packet))
        return got

    def shims_received(self, port: int, expect: int, timeout: float = 10.0) -> list[Ether]:
        return [p for p in self.receive_all(port, expect, timeout) if p.haslayer(MlfcShim)]
