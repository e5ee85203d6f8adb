"""The whole mlfc stack on an emulated network: switches, controller daemon, coordinator, agents and
training jobs. Used by `make run`, `make e2e`, `make sweep` and the end-to-end test.

The lab drives the product only through its public interfaces: it writes the controller's deployment
file with ``controller.config.write_config``, talks to the controller with ``IntentClient`` and to the
coordinator over its RPCs. Everything is torn down on success, failure and Ctrl-C: job processes,
daemons, switch processes and Mininet's namespaces and veths (``cleanup.leftovers()`` checks).
"""

from __future__ import annotations

import contextlib
import ipaddress
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from mlfc import contract
from mlfc.controller.client import IntentClient
from mlfc.controller.config import (
    ControllerSettings,
    Defaults,
    DeploymentConfig,
    PortConfig,
    Route,
    SwitchConfig,
    write_config,
)
from mlfc.controller.queues import QueueSettings
from mlfc.coordinator.client import CoordinatorClient
from mlfc.hosts.transport.recovery import DEFAULT_TOLERATED_LOSS
from mlfc.lab.dataplanes import Dataplane
from mlfc.lab.jobs import JobSpec, ProgressFn, RunningJob, Transport, WorkerLog, start_job
from mlfc.lab.network import mininet_network
from mlfc.lab.probe import PAYLOAD as PROBE_PAYLOAD
from mlfc.lab.probe import ProbeResult
from mlfc.lab.results import IterationRecord
from mlfc.lab.validity import (
    CpuMonitor,
    CpuUse,
    link_utilisation,
    pps_equivalent,
    probe_bottleneck,
    require_carried,
)
from mlfc.launch.daemons import CommandProcess, ControllerProcess, tool
from mlfc.launch.process import free_port
from mlfc.launch.switches import SwitchProcess
from mlfc.policy.drop import DropPolicy
from mlfc.policy.ecn import MarkingProfile, RedProfile
from mlfc.policy.mltcp import MltcpParams
from mlfc.proto import intent_pb2 as ipb
from mlfc.topologies import Topology

CONTROLLER_STATE = "controller-state.json"  # next to deployment.yaml


class StackError(RuntimeError):
    pass


@dataclass(frozen=True)
class StackConfig:
    name: str
    jobs: tuple[JobSpec, ...]
    iterations: int = 15
    cc: str = "reno"
    mltcp: bool = False
    mltcp_params: MltcpParams = field(default_factory=MltcpParams)
    mltcp_tune: bool = False  # senders tune slope/intercept online, starting from mltcp_params
    ack_delay: float | None = None  # receivers' ACK delay (hosts.transport.ReceiverConfig; None: its default)
    tolerated_loss: str = DEFAULT_TOLERATED_LOSS  # senders' reaction to a loss within the bound (SenderConfig)
    priorities: str = "none"  # none | maif | interleave
    bottleneck_pps: int = 1500
    # The reference switch's bottleneck as a link of this many bit/s (its ``set_queue_rate_bps``: a packet of
    # L bytes takes L*8/rate s, so an ACK costs less than a data packet). None: bottleneck_pps. BMv2 has no
    # byte rate: a BMv2 network always uses bottleneck_pps.
    bottleneck_bps: int | None = None
    queue_depth: int = 64
    ecn: MarkingProfile = field(default_factory=RedProfile)  # the switches' marking (a step: DCTCP's)
    drop_policy: DropPolicy = field(default_factory=DropPolicy)
    line_rate: float = 100e6
    # Stop before the jobs when a calibration burst shows the switches cannot carry bottleneck_pps
    # (lab/validity.py). Behaviour tests turn it off; experiments must not.
    check_bottleneck: bool = True
    coordinator_args: tuple[str, ...] = ()  # extra `mlfc-coordinator run` options (MAIF policy: --horizon ...)
    # Seconds from launching the jobs to their common first iteration (None: 2 s + 0.5 s per job, enough for
    # the emulator; real training imports torch in every process, which takes far longer on a loaded machine).
    start_lead_s: float | None = None

    def bytes_link(self, target: str) -> bool:
        """Whether the bottleneck on switches of ``target`` is a link in bit/s (else packets/s)."""
        return self.bottleneck_bps is not None and target == "refswitch"

    def bottleneck_queue(self, target: str) -> QueueSettings:
        """A bottleneck port's queue settings on a switch of ``target`` (deployment ``target``)."""
        if self.bytes_link(target):
            return QueueSettings(rate_bps=self.bottleneck_bps, depth_pkts=self.queue_depth)
        return QueueSettings(self.bottleneck_pps, self.queue_depth)

    @property
    def transport(self) -> Transport:
        return Transport(
            self.cc, self.mltcp, self.mltcp_params, self.line_rate, self.mltcp_tune, self.ack_delay, self.tolerated_loss
        )


@dataclass
class StackRun:
    records: list[IterationRecord]
    counters: dict[int, dict[str, int]]  # job -> packets/bytes/ecn_marks/drops, summed over switches
    worker_summaries: list[dict]
    errors: list[str]
    duration: float
    # switch -> table -> the most entries seen while the jobs ran (sampled every second)
    switch_entries: dict[str, dict[str, int]] = field(default_factory=dict)
    cpu: CpuUse | None = None
    # pushes' packet rate while any push ran / the configured rate (on a link in bit/s: their frames' bits)
    utilisation: float = float("nan")
    # Seconds after the start when the run's ``until`` condition held and the jobs were stopped (None: every
    # job ran to its last iteration).
    stopped_at: float | None = None


@dataclass
class Control:
    """A running network with its controller: what ``network_with_control`` yields."""

    net: object  # mininet.net.Mininet
    switches: dict[str, SwitchProcess]
    controller: ControllerProcess
    run_dir: Path
    probe: ProbeResult | None = None  # the calibration burst (lab/validity.py)

    @property
    def intent_addr(self) -> str:
        return self.controller.intent_addr

    @property
    def client(self) -> IntentClient:
        return self.controller.client


def deployment_for(
    topo: Topology, switches: dict[str, SwitchProcess], cfg: StackConfig, run_dir: Path
) -> DeploymentConfig:
    """The controller's deployment for this network: routes from the topology, the bottleneck rate on
    the ports of bottleneck links, the run's ECN and drop defaults (docs/controller.md)."""
    bottlenecks = set(topo.bottleneck_ports())
    out = []
    for name, sw in switches.items():
        plain, bottleneck = QueueSettings(None, cfg.queue_depth), cfg.bottleneck_queue(sw.target)
        ports = tuple(
            PortConfig(port, bottleneck if (name, port) in bottlenecks else plain) for port in sorted(sw.interfaces)
        )
        routes = tuple(
            Route(ipaddress.IPv4Network(r.prefix), r.port, _mac(r.src_mac), _mac(r.dst_mac)) for r in topo.routes(name)
        )
        out.append(
            SwitchConfig(name, sw.grpc_addr, sw.device_id, sw.target, sw.queue_port, ports=ports, routes_v4=routes)
        )
    return DeploymentConfig(
        switches=tuple(out),
        p4info=contract.P4INFO,
        device_config=contract.BMV2_JSON,
        defaults=Defaults(cfg.ecn, cfg.drop_policy, False, QueueSettings(None, cfg.queue_depth)),
        controller=ControllerSettings(
            intent_addr=f"127.0.0.1:{free_port()}",
            metrics_addr=f"127.0.0.1:{free_port()}",
            counter_interval_s=1.0,
            state_file=run_dir / CONTROLLER_STATE,
        ),
    )


def _mac(text: str) -> int:
    return int(text.replace(":", ""), 16)


@contextlib.contextmanager
def network_with_control(topo: Topology, cfg: StackConfig, run_dir: Path, plane: Dataplane) -> Iterator[Control]:
    """Mininet network + switches + controller daemon (pipeline loaded, routes and queues installed)."""
    run_dir = run_dir.resolve()  # the deployment file resolves relative paths against its own folder
    run_dir.mkdir(parents=True, exist_ok=True)
    with mininet_network(topo, plane.switch) as (net, switches):
        (run_dir / CONTROLLER_STATE).unlink(missing_ok=True)  # a new network starts from the defaults
        config_path = write_config(deployment_for(topo, switches, cfg, run_dir), run_dir / "deployment.yaml")
        ctl = ControllerProcess(config_path, run_dir / "controller.log")
        try:
            ctl.start(timeout=30)
            try:
                ctl.client.wait_synced(timeout_s=60, switches=set(switches))
            except TimeoutError as exc:
                raise StackError(f"{exc}\n{ctl.tail()}") from None
            check_queues(ctl.client.status())
            probe = probe_bottleneck(net, topo, probe_rate_pps(cfg, switches))
            if cfg.check_bottleneck:
                require_carried(probe)
            yield Control(net, switches, ctl, run_dir, probe)
        finally:
            ctl.stop()


def _bytes_link(cfg: StackConfig, switches: dict[str, SwitchProcess]) -> bool:
    return bool(switches) and all(cfg.bytes_link(sw.target) for sw in switches.values())


def probe_rate_pps(cfg: StackConfig, switches: dict[str, SwitchProcess]) -> int:
    """The calibration burst's reference rate: bottleneck_pps, or the probe's frames per second on a link in
    bit/s (lab/probe.py: PAYLOAD bytes of UDP, + 28 UDP/IPv4 + 14 Ethernet)."""
    if _bytes_link(cfg, switches):
        return max(1, round(pps_equivalent(cfg.bottleneck_bps or 0, PROBE_PAYLOAD + 28 + 14)))
    return cfg.bottleneck_pps


def utilisation(records: list[IterationRecord], cfg: StackConfig, switches: dict[str, SwitchProcess]) -> float:
    """``link_utilisation`` in the bottleneck's unit: bytes on a link in bit/s, packets otherwise."""
    if _bytes_link(cfg, switches):
        return link_utilisation(records, rate_bps=cfg.bottleneck_bps)
    return link_utilisation(records, cfg.bottleneck_pps)


def check_queues(status: ipb.StatusReply) -> None:
    """A run whose bottleneck was never shaped measures the wrong thing: stop it here, saying why."""
    bad = [f"{s.name}: {s.queue_error}" for s in status.switches if s.queue_error]
    if bad:
        raise StackError("queue settings not applied, the bottleneck is not the configured one: " + "; ".join(bad))


@dataclass(frozen=True)
class RunCoordinator:
    """A run's coordinator: its process (``check()`` raises once it died), address and token file."""

    process: CommandProcess
    address: str
    token: Path


@contextlib.contextmanager
def run_coordinator(ctl: Control, cfg: StackConfig) -> Iterator[RunCoordinator]:
    """A coordinator for one run, on a fresh database, driving the controller under MAIF (otherwise the run's
    intent, without classes, is applied here); stopped on leaving."""
    run_dir = ctl.run_dir
    token = run_dir / "token"
    token.write_text(secrets.token_hex(16))
    coord_port = free_port()
    coord_addr = f"127.0.0.1:{coord_port}"
    # A fresh database per run: an earlier run's jobs (finished, same ids) would make the
    # coordinator refuse this run's registrations.
    db = run_dir / "coordinator.db"
    for stale in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        stale.unlink(missing_ok=True)
    coord_cmd = [tool("mlfc-coordinator"), "run", "--db", str(db), "--listen", coord_addr]
    coord_cmd += ["--token-file", str(token), "--silence", "600", *cfg.coordinator_args]
    if cfg.priorities == "maif":
        coord_cmd += ["--controller", ctl.intent_addr]
    coord = CommandProcess("coordinator", coord_cmd, run_dir / "coordinator.log", ports=[coord_port])
    # The run's drop policy goes with the intent (a MAIF run's intents come from the coordinator, without one:
    # the deployment's default applies there).
    dp = ipb.DropPolicy(level_depths=cfg.drop_policy.level_depths, min_importance=cfg.drop_policy.min_importance)
    if cfg.priorities == "interleave":
        ctl.client.apply(ipb.Intent(interleaving=True, drop_policy=dp, source="mlfc-run"))
    elif cfg.priorities == "none":
        ctl.client.apply(ipb.Intent(drop_policy=dp, source="mlfc-run"))
    try:
        coord.start(timeout=20)
        yield RunCoordinator(coord, coord_addr, token)
    finally:
        coord.stop()


def run_jobs(
    ctl: Control,
    topo: Topology,
    cfg: StackConfig,
    progress: ProgressFn | None = None,
    timeout: float = 900.0,
    on_coordinator: Callable[[str, Path], None] | None = None,
    until: Callable[[list[IterationRecord]], bool] | None = None,
) -> StackRun:
    """Start coordinator, agents and jobs; wait for every job to finish; return what they recorded.
    ``on_coordinator(address, token_file)`` is called once the coordinator listens (e.g. to watch its
    decisions over its Status RPC while the jobs run). ``until(records)``, asked about once a second with
    the records so far, ends the run early when it says so: the jobs are stopped, and a stopped job's exit
    and its last unreported iterations are not errors."""
    run_dir = ctl.run_dir
    t0 = time.time()
    log = WorkerLog(cfg.name, t0)
    errors: list[str] = []
    running: list[RunningJob] = []
    peak: dict[str, dict[str, int]] = {}
    counters: dict[int, dict[str, int]] = {}
    cpu = CpuMonitor()
    stopped_at = None
    cpu.__enter__()
    try:
        with run_coordinator(ctl, cfg) as coord:
            try:
                if on_coordinator is not None:
                    on_coordinator(coord.address, coord.token)
                lead = 2.0 + 0.5 * len(cfg.jobs) if cfg.start_lead_s is None else cfg.start_lead_s
                start_at = time.time() + lead  # after every process has started
                for spec in cfg.jobs:
                    running.append(start_job(ctl.net, topo, spec, cfg.iterations, cfg.transport, coord.address,
                                             coord.token, run_dir, start_at))  # fmt: skip
                readers = [log.reader(proc, job.spec.job, rank) for job in running
                           for rank, proc in enumerate(job.workers)]  # fmt: skip
                stopped_at = _wait_for_jobs(running, coord.process, ctl, cfg, log, peak, errors, progress, timeout,
                                            t0, until)  # fmt: skip
                if stopped_at is not None:
                    for job in running:
                        job.stop()
                for th in readers:
                    th.join(timeout=5)
                if stopped_at is None:
                    errors += _exit_errors(running, run_dir)
                counters = job_counters(ctl.client)
                if not errors and stopped_at is None:
                    with CoordinatorClient(coord.address, token_file=coord.token) as client:
                        errors += unreported_workers(client.worker_progress(), cfg)
            finally:
                for job in running:
                    job.stop()
    finally:
        cpu.__exit__()
    records = sorted(log.records, key=lambda r: (r.job, r.worker, r.iteration))
    return StackRun(
        records,
        counters,
        log.summaries,
        errors,
        time.time() - t0,
        peak,
        cpu.result(),
        utilisation(records, cfg, ctl.switches),
        stopped_at,
    )


def _wait_for_jobs(
    running: list[RunningJob],
    coord: CommandProcess,
    ctl: Control,
    cfg: StackConfig,
    log: WorkerLog,
    peak: dict[str, dict[str, int]],
    errors: list[str],
    progress: ProgressFn | None,
    timeout: float,
    t0: float,
    until: Callable[[list[IterationRecord]], bool] | None = None,
) -> float | None:
    """Wait until every job's workers have exited; return None then, or the seconds since ``t0`` at which
    ``until`` held (the caller stops the jobs)."""
    deadline = time.monotonic() + timeout
    last_print = last_sample = last_until = 0.0
    while any(p.poll() is None for j in running for p in j.workers):
        if time.monotonic() > deadline:
            errors.append(f"jobs did not finish within {timeout:.0f} s")
            return None
        coord.check()
        if until is not None and time.monotonic() - last_until > 1.0:
            last_until = time.monotonic()
            if until(list(log.records)):
                if progress:
                    progress(f"[{cfg.name}] {time.time() - t0:6.1f} s  stopping the jobs: the run's goal is met")
                return time.time() - t0
        if progress and time.monotonic() - last_print > 2.0:
            last_print = time.monotonic()
            progress(f"[{cfg.name}] {time.time() - t0:6.1f} s  " + log.describe(cfg.iterations))
        if time.monotonic() - last_sample > 1.0:  # what the switches held while the jobs ran
            last_sample = time.monotonic()
            for sw, tables in switch_entries(ctl.client).items():
                for table, n in tables.items():
                    peak.setdefault(sw, {})[table] = max(n, peak.get(sw, {}).get(table, 0))
        time.sleep(0.2)
    return None


def _exit_errors(running: list[RunningJob], run_dir: Path) -> list[str]:
    errors = []
    for job in running:
        for rank, proc in enumerate(job.workers):
            if proc.returncode not in (0, None):
                errors.append(
                    f"job {job.spec.job} worker {rank} exited {proc.returncode}: "
                    + _tail(run_dir / f"job{job.spec.job}-w{rank}.err")
                )
        try:
            job.ps.wait(timeout=15)
        except Exception:
            errors.append(f"job {job.spec.job} parameter server did not finish")
        if job.ps.returncode not in (0, None):
            errors.append(
                f"job {job.spec.job} PS exited {job.ps.returncode}: " + _tail(run_dir / f"job{job.spec.job}-ps.err")
            )
    return errors


def job_counters(client: IntentClient) -> dict[int, dict[str, int]]:
    """Per-job switch counters, summed over switches, as the controller last read them."""
    try:
        st = client.status(timeout_s=3.0)
    except grpc.RpcError:
        return {}
    return {
        j.job_id: {"packets": j.packets, "bytes": j.bytes, "ecn_marks": j.ecn_marks, "drops": j.drops} for j in st.jobs
    }


def switch_entries(client: IntentClient) -> dict[str, dict[str, int]]:
    try:
        st = client.status(timeout_s=3.0)
    except grpc.RpcError:
        return {}
    return {s.name: dict(s.entries) for s in st.switches}


def unreported_workers(progress: dict[int, dict[int, int]], cfg: StackConfig) -> list[str]:
    """Workers whose every iteration did not reach the coordinator (``progress``: job -> worker -> last
    iteration it saw). The agents let the job carry on when the coordinator refuses or misses them, so a
    run would otherwise look fine while the coordinator (and MAIF) never saw the job."""
    last = cfg.iterations - 1
    out = []
    for spec in cfg.jobs:
        seen = progress.get(spec.job, {})
        for rank in range(spec.workers):
            if seen.get(rank) != last:
                got = "not at all" if rank not in seen else f"up to iteration {seen[rank]}"
                out.append(f"coordinator saw job {spec.job} worker {rank} {got}, not {last}")
    return out


def _tail(path: Path, n: int = 1500) -> str:
    try:
        return path.read_text(errors="replace")[-n:].strip()
    except OSError:
        return ""
