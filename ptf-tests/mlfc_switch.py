"""The switch as PTF tests see it: the controller's own P4Runtime client, entry compiler and queue client
(BMv2's Thrift port, or the reference switch's admin port). Entries are kept as a desired set and
reconciled, so cleanup is one reconcile to the empty set; counters are reported as deltas since the test
began."""

from __future__ import annotations

import ipaddress

from mlfc import contract
from mlfc.controller import compile as cc
from mlfc.controller import validate
from mlfc.controller.entries import Lpm, TableEntry, entry
from mlfc.controller.queues import QueueClient
from mlfc.controller.sync import SwitchConnection
from mlfc.policy.drop import DropPolicy
from mlfc.policy.ecn import MarkingProfile
from mlfc.policy.maif import Window

# The tests' short counter names: the last component of the P4Info name.
JOB_COUNTERS = {name.rsplit(".", 1)[-1]: name for name in contract.JOB_COUNTERS}
PORT_COUNTERS = {name.rsplit(".", 1)[-1]: name for name in contract.PORT_COUNTERS}
UNLIMITED_PPS = 1_000_000
DEFAULT_DEPTH = 64


def _mac(text: str) -> int:
    return int(text.replace(":", ""), 16)


class TestSwitch:
    def __init__(self, grpc_addr: str, device_id: int, queues: QueueClient) -> None:
        self.grpc_addr, self.device_id, self.queues = grpc_addr, device_id, queues
        self.conn: SwitchConnection | None = None
        self.routes: list[tuple[ipaddress.IPv4Network, int, int, int]] = []  # prefix, port, src and dst MAC
        self.jobs: dict[int, validate.Job] = {}
        self.ecn: dict[tuple[int, int | None], MarkingProfile] = {}  # (port, class or None: every class)
        self.drop: DropPolicy | None = None
        self.port_rates: dict[int, float] = {}  # bits/s: the rate classes its routes carry (the telemetry)
        self.queues_touched: set[tuple[int, int]] = set()
        self.baseline: dict[str, dict[int, tuple[int, int]]] = {}

    # -- lifecycle ------------------------------------------------------------------------------

    def connect(self) -> None:
        self.conn = SwitchConnection(self.grpc_addr, self.device_id).connect()
        self.conn.load_pipeline()
        self.conn.reconcile([])
        for short, name in {**JOB_COUNTERS, **PORT_COUNTERS}.items():
            self.baseline[short] = {i: (v.packets, v.bytes) for i, v in self.conn.read_counters(name).items()}

    def cleanup(self) -> None:
        if self.conn is not None:
            self.conn.reconcile([])
        resets = []
        for port, prio in sorted(self.queues_touched):
            resets += [
                f"set_queue_rate {UNLIMITED_PPS} {port} {prio}",
                f"set_queue_depth {DEFAULT_DEPTH} {port} {prio}",
            ]
        if resets:
            self.cli(*resets)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    # -- desired state --------------------------------------------------------------------------

    def _sync(self) -> None:
        assert self.conn is not None
        jobs = tuple(self.jobs[j] for j in sorted(self.jobs))
        desired = [*self._route_entries(), *cc.flow_entries(jobs), *cc.job_priority_entries(jobs, interleaving=False)]
        if self.ecn:
            desired += cc.ecn_entries(self.ecn)
        if self.drop is not None:
            desired += cc.drop_entries(self.drop)
        self.conn.reconcile(desired)

    def _route_entries(self) -> list[TableEntry]:
        return [
            entry(
                contract.ROUTES_V4,
                {contract.IPV4_DST: Lpm(int(net.network_address), net.prefixlen)},
                contract.SET_NEXT_HOP,
                {
                    "port": port,
                    "src_mac": src,
                    "dst_mac": dst,
                    "rate_class": cc.port_rate_class(self.port_rates.get(port, 0.0)),
                },
            )
            for net, port, src, dst in self.routes
        ]

    def add_route(self, prefix: str, port: int, src_mac: str, dst_mac: str) -> None:
        self.routes.append((ipaddress.IPv4Network(prefix), port, _mac(src_mac), _mac(dst_mac)))
        self._sync()

    def _job(self, job: int) -> validate.Job:
        return self.jobs.get(job, validate.Job(job, 1))

    def add_job_priority(self, job: int, priority: int, iterations: tuple[int, int] | None = None) -> None:
        current = self._job(job)
        if iterations is None:
            self.jobs[job] = validate.Job(job, priority, current.windows, current.flows)
        else:
            window = Window(iterations[0], iterations[1], priority)
            self.jobs[job] = validate.Job(job, current.priority, (*current.windows, window), current.flows)
        self._sync()

    def add_flow(
        self, job: int, src: str = "", dst: str = "", protocol: int = 0, src_port: int = 0, dst_port: int = 0
    ) -> None:
        current = self._job(job)
        flow = validate.FlowMatch(
            ipaddress.IPv4Network(src) if src else None,
            ipaddress.IPv4Network(dst) if dst else None,
            protocol,
            src_port,
            dst_port,
        )
        self.jobs[job] = validate.Job(job, current.priority, current.windows, (*current.flows, flow))
        self._sync()

    def set_ecn_profile(self, port: int, profile: MarkingProfile, priority: int | None = None) -> None:
        """``profile`` on ``port`` for the priority queue ``priority`` (None: every class), compiled in
        packets of 1500 bytes (BMv2's and the reference switch's depth unit at the default packet size)."""
        self.ecn[(port, priority)] = profile
        self._sync()

    def set_port_rate(self, port: int, bits_per_second: float) -> None:
        """The rate class ``port`` writes into the telemetry of the DATA it forwards (mlfc.policy.telemetry): its
        routes carry it."""
        self.port_rates[port] = bits_per_second
        self._sync()

    def set_drop_policy(self, policy: DropPolicy) -> None:
        self.drop = policy
        self._sync()

    # -- counters -------------------------------------------------------------------------------

    def _delta(self, short: str, name: str, index: int) -> tuple[int, int]:
        assert self.conn is not None
        packets, nbytes = self.conn.read_counter(name, index)
        p0, b0 = self.baseline.get(short, {}).get(index, (0, 0))
        return packets - p0, nbytes - b0

    def job_counter(self, short: str, job: int) -> tuple[int, int]:
        """(packets, bytes) counted for ``job`` since the test began."""
        return self._delta(short, JOB_COUNTERS[short], job)

    def port_counter(self, short: str, port: int) -> int:
        return self._delta(short, PORT_COUNTERS[short], port)[0]

    # -- queues (Thrift, or the refswitch admin port) ---------------------------------------------

    def cli(self, *commands: str) -> str:
        for c in commands:
            parts = c.split()
            if parts[0] in ("set_queue_rate", "set_queue_depth") and len(parts) == 4:
                self.queues_touched.add((int(parts[2]), int(parts[3])))
        return "\n".join(self.queues.run(list(commands)))
