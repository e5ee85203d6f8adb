"""The switch as PTF tests see it: the controller's own P4Runtime client and entry compiler, plus
simple_switch_CLI's queue commands (to BMv2's Thrift port, or to the reference switch's admin port when
the `dataplane` test param is `ref`). Entries are kept as a desired set and reconciled, so cleanup is one
reconcile to the empty set; counters are reported as deltas since the test began."""

from __future__ import annotations

import ipaddress
import subprocess

from mlfc.controller import compile as cc
from mlfc.controller import pipeline as names
from mlfc.controller.entries import Lpm, TableEntry, entry
from mlfc.controller.sync import SwitchConnection
from mlfc.policy.drop import DropPolicy
from mlfc.policy.ecn import EcnProfile

JOB_COUNTERS = {
    "job_packets": "MlfcIngress.stats.job_packets",
    "job_drops": "MlfcIngress.selective_drop.job_drops",
    "job_ecn_marks": "MlfcEgress.ecn.job_ecn_marks",
}
PORT_COUNTERS = {
    "shim_bad_header": "MlfcIngress.stats.shim_bad_header",
    "shim_truncated": "MlfcIngress.stats.shim_truncated",
}
UNLIMITED_PPS = 1_000_000
DEFAULT_DEPTH = 64


def _mac(text: str) -> int:
    return int(text.replace(":", ""), 16)


def _dataplane_param() -> str:
    """The `dataplane` PTF test param (bmv2 when absent or outside PTF)."""
    try:
        import ptf.testutils as tu
    except ImportError:
        return "bmv2"
    return str(tu.test_param_get("dataplane", "bmv2") or "bmv2")


class TestSwitch:
    def __init__(self, grpc_addr: str, device_id: int, thrift_port: int, dataplane: str | None = None) -> None:
        """``thrift_port``: where queue commands go (BMv2 Thrift, or the refswitch admin port)."""
        self.grpc_addr, self.device_id, self.thrift_port = grpc_addr, device_id, thrift_port
        self.dataplane = dataplane or _dataplane_param()
        if self.dataplane not in ("bmv2", "ref"):
            raise ValueError(f"dataplane {self.dataplane!r}: expected bmv2 or ref")
        self.conn: SwitchConnection | None = None
        self.routes: list[TableEntry] = []
        self.jobs: dict[int, cc.Job] = {}
        self.ecn: dict[int, EcnProfile] = {}
        self.drop: DropPolicy | None = None
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
        desired = [*self.routes, *cc.flow_entries(jobs), *cc.job_priority_entries(jobs, interleaving=False)]
        if self.ecn:
            desired += cc.ecn_entries(self.ecn)
        if self.drop is not None:
            desired += cc.drop_entries(self.drop)
        self.conn.reconcile(desired)

    def add_route(self, prefix: str, port: int, src_mac: str, dst_mac: str) -> None:
        net = ipaddress.IPv4Network(prefix)
        self.routes.append(
            entry(
                names.ROUTES_V4,
                {"hdr.ipv4.dst_addr": Lpm(int(net.network_address), net.prefixlen)},
                names.SET_NEXT_HOP,
                {"port": port, "src_mac": _mac(src_mac), "dst_mac": _mac(dst_mac)},
            )
        )
        self._sync()

    def _job(self, job: int) -> cc.Job:
        return self.jobs.get(job, cc.Job(job, 1))

    def add_job_priority(self, job: int, priority: int, iterations: tuple[int, int] | None = None) -> None:
        current = self._job(job)
        if iterations is None:
            self.jobs[job] = cc.Job(job, priority, current.windows, current.flows)
        else:
            window = cc.Window(iterations[0], iterations[1], priority)
            self.jobs[job] = cc.Job(job, current.priority, (*current.windows, window), current.flows)
        self._sync()

    def add_flow(
        self, job: int, src: str = "", dst: str = "", protocol: int = 0, src_port: int = 0, dst_port: int = 0
    ) -> None:
        current = self._job(job)
        flow = cc.FlowMatch(
            ipaddress.IPv4Network(src) if src else None,
            ipaddress.IPv4Network(dst) if dst else None,
            protocol,
            src_port,
            dst_port,
        )
        self.jobs[job] = cc.Job(job, current.priority, current.windows, (*current.flows, flow))
        self._sync()

    def set_ecn_profile(self, port: int, profile: EcnProfile) -> None:
        self.ecn[port] = profile
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
        if self.dataplane == "ref":
            return self._ref_cli(commands)
        res = subprocess.run(
            ["simple_switch_CLI", "--thrift-port", str(self.thrift_port)],
            input="\n".join(commands) + "\n",
            capture_output=True,
            text=True,
            timeout=30,
        )
        if res.returncode != 0 or "Error" in res.stdout or "Invalid" in res.stdout:
            raise RuntimeError(f"simple_switch_CLI {commands}: {res.stdout} {res.stderr}")
        return res.stdout

    def _ref_cli(self, commands: tuple[str, ...]) -> str:
        from mlfc.refswitch.admin import run_commands

        replies = run_commands(self.thrift_port, list(commands), timeout=30)
        failed = [f"{c}: {r}" for c, r in zip(commands, replies, strict=True) if r.startswith("Error")]
        if failed:
            raise RuntimeError(f"refswitch admin {'; '.join(failed)}")
        return "\n".join(replies)
