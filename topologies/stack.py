"""Start and stop the whole mlfc stack on an emulated network: switches, controller daemon,
coordinator, agents and training jobs. Used by `make run`, `make e2e` and the end-to-end test.

Everything is torn down on success, failure and Ctrl-C: job processes, daemons, switch processes
and Mininet's namespaces and veths (checked by `leftovers()`).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import yaml

from mlfc.coordinator.store import Store
from mlfc.policy.drop import DropPolicy
from mlfc.policy.ecn import EcnProfile
from mlfc.policy.mltcp import MltcpParams
from mlfc.proto import intent_pb2 as ipb
from mlfc.proto import intent_pb2_grpc as ipb_grpc
from mlfc.topologies.bmv2 import P4_BUILD, REPO, free_port, wait_for_port
from mlfc.topologies.emulator import JobProfile
from mlfc.topologies.mininet_net import SwitchHandle, mininet_network
from mlfc.topologies.results import IterationRecord
from mlfc.topologies.spec import Topology

VENV_BIN = Path(sys.executable).parent
CONTROLLER_STATE = "controller-state.json"  # next to deployment.yaml


class StackError(RuntimeError):
    pass


@dataclass(frozen=True)
class JobSpec:
    job: int
    profile: JobProfile
    workers: int = 1
    start_delay: float = 0.0
    straggle: float = 1.0  # compute-time multiplier of worker 0 (a straggler) from iteration straggle_from
    straggle_from: int = 0
    acc_max: float = 0.9
    tau: float = 10.0
    importance: int | None = None  # one class for all chunks; None: by gradient magnitude
    loss_bound: float = 0.02  # share of a tensor the receiver may zero-fill (unprotected chunks only)


@dataclass(frozen=True)
class StackConfig:
    name: str
    jobs: tuple[JobSpec, ...]
    iterations: int = 15
    cc: str = "reno"
    mltcp: bool = False
    mltcp_params: MltcpParams = field(default_factory=MltcpParams)
    priorities: str = "none"  # none | maif | interleave
    bottleneck_pps: int = 1500
    queue_depth: int = 64
    ecn: EcnProfile = field(default_factory=EcnProfile)
    drop_policy: DropPolicy = field(default_factory=DropPolicy)
    line_rate: float = 100e6


def tool(name: str) -> str:
    path = VENV_BIN / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if not found:
        raise StackError(f"{name} not found: run `make install`")
    return found


def deployment(
    topo: Topology,
    switches: dict[str, SwitchHandle],
    cfg: StackConfig,
    intent_addr: str,
    metrics_addr: str,
    target: str,
) -> dict:
    """The controller's deployment file for this network (docs/controller.md)."""
    bottlenecks = set(topo.bottleneck_ports())
    out_switches = []
    for name, sw in switches.items():
        ports = []
        for port in sorted(sw.ports):
            entry: dict = {"port": port, "depth_pkts": cfg.queue_depth}
            if (name, port) in bottlenecks:
                entry["rate_pps"] = cfg.bottleneck_pps
            ports.append(entry)
        out_switches.append(
            {
                "name": name,
                "grpc_addr": sw.grpc_addr,
                "device_id": sw.device_id,
                "target": target,
                "thrift_port": sw.queue_port,
                "ports": ports,
                "routes_v4": [
                    {"prefix": r.prefix, "port": r.port, "src_mac": r.src_mac, "dst_mac": r.dst_mac}
                    for r in topo.routes(name)
                ],
            }
        )
    return {
        "pipeline": {"p4info": str(P4_BUILD / "mlfc.p4info.txtpb"), "device_config": str(P4_BUILD / "mlfc.json")},
        "listen": {"intent": intent_addr, "metrics": metrics_addr},
        "controller": {"counter_interval_s": 1.0, "state_file": CONTROLLER_STATE},
        "defaults": {
            "ecn": {"kmin": cfg.ecn.kmin, "kmax": cfg.ecn.kmax, "pmax": cfg.ecn.pmax},
            "drop_policy": {
                "level_depths": list(cfg.drop_policy.level_depths),
                "min_importance": list(cfg.drop_policy.min_importance),
            },
            "interleaving": False,
            "queue": {"depth_pkts": cfg.queue_depth},
        },
        "switches": out_switches,
    }


class Daemon:
    """A background process with its output in a log file."""

    def __init__(self, name: str, cmd: list[str], log: Path) -> None:
        self.name, self.cmd, self.log = name, cmd, log
        self._out = log.open("wb")
        self.proc = subprocess.Popen(cmd, stdout=self._out, stderr=subprocess.STDOUT, start_new_session=True)

    def check(self) -> None:
        if self.proc.poll() is not None:
            tail = self.log.read_text(errors="replace")[-3000:]
            raise StackError(f"{self.name} exited with status {self.proc.returncode}:\n{tail}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        self._out.close()


def controller_status(intent_addr: str, timeout: float = 3.0) -> ipb.StatusReply:
    with grpc.insecure_channel(intent_addr) as ch:
        return ipb_grpc.IntentServiceStub(ch).Status(ipb.StatusRequest(), timeout=timeout)


def apply_intent(intent_addr: str, intent: ipb.Intent, timeout: float = 30.0) -> ipb.ApplyReply:
    with grpc.insecure_channel(intent_addr) as ch:
        return ipb_grpc.IntentServiceStub(ch).Apply(intent, timeout=timeout)


def wait_switches_ready(intent_addr: str, names: set[str], daemon: Daemon, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        daemon.check()
        try:
            st = controller_status(intent_addr)
            ready = {s.name for s in st.switches if s.connected and s.primary and s.pipeline}
            if names <= ready:
                return
            last = ", ".join(
                f"{s.name}: connected={s.connected} primary={s.primary} {s.last_error}" for s in st.switches
            )
        except grpc.RpcError as exc:
            last = exc.details() or str(exc.code())
        time.sleep(0.3)
    raise StackError(f"switches not ready after {timeout:.0f} s: {last}")


@dataclass
class RunningJob:
    spec: JobSpec
    ps: subprocess.Popen
    workers: list[subprocess.Popen]


@dataclass
class StackRun:
    records: list[IterationRecord]
    counters: dict[int, dict[str, int]]  # job -> packets/bytes/ecn_marks/drops, summed over switches
    worker_summaries: list[dict]
    errors: list[str]
    duration: float
    # switch -> table -> the most entries seen while the jobs ran (sampled every second)
    switch_entries: dict[str, dict[str, int]] = field(default_factory=dict)


@contextlib.contextmanager
def network_with_control(
    topo: Topology, cfg: StackConfig, run_dir: Path, switch_factory, target: str
) -> Iterator[tuple[object, dict[str, SwitchHandle], str, Path]]:
    """Mininet network + switches + controller daemon (pipeline loaded, routes and queues installed)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with mininet_network(topo, switch_factory) as (net, switches):
        intent_addr = f"127.0.0.1:{free_port()}"
        metrics_addr = f"127.0.0.1:{free_port()}"
        config_path = run_dir / "deployment.yaml"
        (run_dir / CONTROLLER_STATE).unlink(missing_ok=True)  # a new network starts from the defaults
        config_path.write_text(
            yaml.safe_dump(deployment(topo, switches, cfg, intent_addr, metrics_addr, target), sort_keys=False)
        )
        ctl = Daemon(
            "controller", [tool("mlfc-controller"), "run", "--config", str(config_path)], run_dir / "controller.log"
        )
        try:
            wait_for_port(int(intent_addr.rsplit(":", 1)[1]), 30, ctl.proc)
            wait_switches_ready(intent_addr, set(switches), ctl)
            yield net, switches, intent_addr, run_dir
        finally:
            ctl.stop()


def run_jobs(
    net,
    topo: Topology,
    cfg: StackConfig,
    intent_addr: str,
    run_dir: Path,
    progress: Callable[[str], None] | None = None,
    timeout: float = 900.0,
) -> StackRun:
    """Start coordinator, agents and jobs; wait for every job to finish; return what they recorded."""
    token = run_dir / "token"
    token.write_text(secrets.token_hex(16))
    coord_addr = f"127.0.0.1:{free_port()}"
    # A fresh database per run: an earlier run's jobs (finished, same ids) would make the
    # coordinator refuse this run's registrations.
    db = run_dir / "coordinator.db"
    for stale in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        stale.unlink(missing_ok=True)
    coord_cmd = [
        tool("mlfc-coordinator"),
        "run",
        "--db",
        str(db),
        "--listen",
        coord_addr,
        "--token-file",
        str(token),
        "--silence",
        "600",
    ]
    if cfg.priorities == "maif":
        coord_cmd += ["--controller", intent_addr]
    coord = Daemon("coordinator", coord_cmd, run_dir / "coordinator.log")
    if cfg.priorities == "interleave":
        apply_intent(intent_addr, ipb.Intent(interleaving=True, source="mlfc-run"))
    elif cfg.priorities == "none":
        apply_intent(intent_addr, ipb.Intent(source="mlfc-run"))
    records: list[IterationRecord] = []
    summaries: list[dict] = []
    errors: list[str] = []
    lock = threading.Lock()
    progress_state: dict[tuple[int, int], int] = {}
    running: list[RunningJob] = []
    readers: list[threading.Thread] = []
    t0 = time.time()
    try:
        wait_for_port(int(coord_addr.rsplit(":", 1)[1]), 20, coord.proc)
        start_at = time.time() + 2.0 + 0.5 * len(cfg.jobs)  # after every process has started
        for spec in cfg.jobs:
            running.append(_start_job(net, topo, cfg, spec, coord_addr, token, run_dir, start_at))
        for job in running:
            for rank, proc in enumerate(job.workers):
                th = threading.Thread(
                    target=_read_worker,
                    daemon=True,
                    args=(proc, job.spec.job, rank, cfg.name, t0, records, summaries, lock, progress_state),
                )
                th.start()
                readers.append(th)
        deadline = time.monotonic() + timeout
        last_print = last_sample = 0.0
        peak: dict[str, dict[str, int]] = {}
        while any(p.poll() is None for j in running for p in j.workers):
            if time.monotonic() > deadline:
                errors.append(f"jobs did not finish within {timeout:.0f} s")
                break
            coord.check()
            if progress and time.monotonic() - last_print > 2.0:
                last_print = time.monotonic()
                with lock:
                    parts = [
                        f"job {j} w{r}: {it + 1}/{cfg.iterations}" for (j, r), it in sorted(progress_state.items())
                    ]
                progress(f"[{cfg.name}] {time.time() - t0:6.1f} s  " + ("  ".join(parts) or "starting"))
            if time.monotonic() - last_sample > 1.0:  # what the switches held while the jobs ran
                last_sample = time.monotonic()
                for sw, tables in _switch_entries(intent_addr).items():
                    for table, n in tables.items():
                        peak.setdefault(sw, {})[table] = max(n, peak.get(sw, {}).get(table, 0))
            time.sleep(0.2)
        for th in readers:
            th.join(timeout=5)
        for job in running:
            for rank, proc in enumerate(job.workers):
                if proc.returncode not in (0, None):
                    errors.append(
                        f"job {job.spec.job} worker {rank} exited {proc.returncode}: "
                        + _tail(run_dir / f"job{job.spec.job}-w{rank}.err")
                    )
            try:
                job.ps.wait(timeout=15)
            except subprocess.TimeoutExpired:
                errors.append(f"job {job.spec.job} parameter server did not finish")
            if job.ps.returncode not in (0, None):
                errors.append(
                    f"job {job.spec.job} PS exited {job.ps.returncode}: " + _tail(run_dir / f"job{job.spec.job}-ps.err")
                )
        counters = _job_counters(intent_addr)
    finally:
        for job in running:
            for p in [*job.workers, job.ps]:
                _kill(p)
        coord.stop()
    if not errors:
        errors += _unreported_jobs(db, cfg)
    return StackRun(
        sorted(records, key=lambda r: (r.job, r.worker, r.iteration)),
        counters,
        summaries,
        errors,
        time.time() - t0,
        peak,
    )


def _emulator_args(cfg: StackConfig, spec: JobSpec) -> list[str]:
    args = [
        "--job",
        str(spec.job),
        "--iterations",
        str(cfg.iterations),
        "--cc",
        cfg.cc,
        "--line-rate",
        str(cfg.line_rate),
        "--push-bytes",
        str(spec.profile.push_bytes),
        "--pull-bytes",
        str(spec.profile.pull_bytes),
        "--loss-bound",
        str(spec.loss_bound),
    ]
    if cfg.mltcp:
        args += ["--mltcp", "--slope", str(cfg.mltcp_params.slope), "--intercept", str(cfg.mltcp_params.intercept)]
    if spec.importance is not None:
        args += ["--importance", str(spec.importance)]
    return args


def _start_job(
    net,
    topo: Topology,
    cfg: StackConfig,
    spec: JobSpec,
    coord_addr: str,
    token: Path,
    run_dir: Path,
    start_at: float,
) -> RunningJob:
    hosts = topo.job_hosts(spec.job)
    ps_host = next(h for h in hosts if h.role == "ps")
    worker_hosts = [h for h in hosts if h.role == "worker"][: spec.workers]
    if len(worker_hosts) < spec.workers:
        raise StackError(f"job {spec.job} needs {spec.workers} workers, topology has {len(worker_hosts)}")
    py = sys.executable
    ps_cmd = [
        py,
        "-m",
        "mlfc.topologies.emulator",
        "ps",
        *_emulator_args(cfg, spec),
        "--bind",
        ps_host.ip,
        "--workers",
        str(spec.workers),
        "--worker-ips",
        ",".join(h.ip for h in worker_hosts),
    ]
    ps = net.get(ps_host.name).popen(
        ps_cmd, stdout=subprocess.DEVNULL, stderr=(run_dir / f"job{spec.job}-ps.err").open("wb"), cwd=str(REPO)
    )
    workers = []
    for rank, wh in enumerate(worker_hosts):
        straggle = spec.straggle if rank == 0 else 1.0
        inner = [
            py,
            "-m",
            "mlfc.topologies.emulator",
            "worker",
            *_emulator_args(cfg, spec),
            "--bind",
            wh.ip,
            "--ps",
            ps_host.ip,
            "--rank",
            str(rank),
            "--compute-s",
            str(spec.profile.compute_s),
            "--start-delay",
            str(spec.start_delay),
            "--start-at",
            str(start_at),
            "--straggle",
            str(straggle),
            "--straggle-from",
            str(spec.straggle_from),
            "--acc-max",
            str(spec.acc_max),
            "--tau",
            str(spec.tau),
        ]
        # The agent runs in the root namespace (it reaches the coordinator on loopback) and wraps the job,
        # which mnexec runs inside the worker host's namespace.
        agent = [
            tool("mlfc-agent"),
            "--job",
            str(spec.job),
            "--coordinator",
            coord_addr,
            "--token-file",
            str(token),
            "--bytes-per-iteration",
            str(spec.profile.push_bytes),
            "--final-iteration",
            str(cfg.iterations - 1),
            "--report-worker",
            str(rank),
        ]
        if rank == 0:  # rank 0 registers the job with all its workers; the others only report
            agent += [arg for r, h in enumerate(worker_hosts) for arg in ("--worker", f"{r}={h.ip}")]
        else:
            agent.append("--no-register")
        cmd = [*agent, "--", "mnexec", "-a", str(net.get(wh.name).pid), *inner]
        workers.append(
            subprocess.Popen(
                cmd,
                stdout=subprocess.PIPE,
                stderr=(run_dir / f"job{spec.job}-w{rank}.err").open("wb"),
                text=True,
                cwd=str(REPO),
                start_new_session=True,
            )
        )
    return RunningJob(spec, ps, workers)


def _read_worker(
    proc: subprocess.Popen,
    job: int,
    rank: int,
    scenario: str,
    t0: float,
    records: list[IterationRecord],
    summaries: list[dict],
    lock: threading.Lock,
    progress_state: dict[tuple[int, int], int],
) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        with lock:
            if row.get("summary"):
                summaries.append(row)
                continue
            records.append(
                IterationRecord(
                    scenario,
                    job,
                    f"w{rank}",
                    int(row["iteration"]),
                    row["start"] - t0,
                    row["comm_start"] - t0,
                    row["comm_end"] - t0,
                    row["end"] - t0,
                    int(row["bytes"]),
                    int(row.get("retransmits", 0)),
                    int(row.get("zero_filled", 0)),
                    row["push_end"] - t0 if "push_end" in row else None,
                )
            )
            progress_state[(job, rank)] = int(row["iteration"])


def _job_counters(intent_addr: str) -> dict[int, dict[str, int]]:
    try:
        st = controller_status(intent_addr)
    except grpc.RpcError:
        return {}
    return {
        j.job_id: {"packets": j.packets, "bytes": j.bytes, "ecn_marks": j.ecn_marks, "drops": j.drops} for j in st.jobs
    }


def _unreported_jobs(db: Path, cfg: StackConfig) -> list[str]:
    """Workers whose every iteration did not reach the coordinator. The agents let the job carry on
    when the coordinator refuses or misses them, so a run would otherwise look fine while the
    coordinator (and MAIF) never saw the job."""
    last = cfg.iterations - 1
    store = Store(db, readonly=True)
    try:
        progress = {spec.job: store.worker_progress(spec.job) for spec in cfg.jobs}
    finally:
        store.close()
    return [
        f"coordinator saw job {spec.job} worker {rank} "
        + ("not at all" if rank not in progress[spec.job] else f"up to iteration {progress[spec.job][rank]}")
        + f", not {last}"
        for spec in cfg.jobs
        for rank in range(spec.workers)
        if progress[spec.job].get(rank) != last
    ]


def _switch_entries(intent_addr: str) -> dict[str, dict[str, int]]:
    try:
        st = controller_status(intent_addr)
    except grpc.RpcError:
        return {}
    return {s.name: dict(s.entries) for s in st.switches}


def _tail(path: Path, n: int = 1500) -> str:
    try:
        return path.read_text(errors="replace")[-n:].strip()
    except OSError:
        return ""


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM) if _own_group(proc) else proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def _own_group(proc: subprocess.Popen) -> bool:
    try:
        return os.getpgid(proc.pid) == proc.pid
    except ProcessLookupError:
        return False


def leftovers() -> list[str]:
    """Processes, namespaces or interfaces an mlfc run could have left behind."""
    found = []
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout.splitlines()
    for line in ps[1:]:
        if (
            any(
                k in line
                for k in ("simple_switch_grpc", "mlfc.topologies.emulator", "mlfc-refswitch", "mlfc.refswitch")
            )
            and "pytest" not in line
        ):
            found.append(f"process: {line.strip()}")
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    for line in links.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if "-eth" in name and (name.startswith("s") or name.startswith("leaf") or name.startswith("spine")):
            found.append(f"interface: {name}")
    return found
