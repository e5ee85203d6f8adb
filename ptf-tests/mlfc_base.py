"""Base class and helpers for mlfc's PTF tests.

The harness (`python -m mlfc.lab.ptf_runner`, `make ptf`) starts simple_switch_grpc with
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
from scapy.layers.l2 import Ether

from mlfc.controller.queues import queue_client

# Hosts and packet builders live in the package, shared with the reference switch's tests.
from mlfc.testing.packets import (  # noqa: F401 - re-exported for the test modules
    HOST_IP,
    HOST_MAC,
    PORTS,
    SWITCH_MAC,
    forwarded,
    shim_packet,
    tcp_packet,
    truncated_shim,
)
from mlfc.wire import MlfcShim


def param(name: str, default=None):
    value = tu.test_param_get(name, default)
    if value is None:
        raise RuntimeError(f"PTF test param {name!r} missing: run through `make ptf`")
    return value


class MlfcTest(BaseTest):
    """Connects to the switch, loads the pipeline, routes every test host, cleans up after."""

    def setUp(self) -> None:
        super().setUp()
        self.dataplane = ptf.dataplane_instance
        self.dataplane.flush()
        self.sw = TestSwitch(
            grpc_addr=param("grpc_addr"),
            device_id=int(param("device_id", 1)),
            queues=queue_client(str(param("target")), int(param("queue_port"))),
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
