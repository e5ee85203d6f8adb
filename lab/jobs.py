"""Training jobs on the emulated network: what a job is, how its processes start, what they report.

A job is a parameter server and its workers, each in its Mininet host's namespace. Each worker runs
under ``mlfc-agent`` (in the root namespace, where it reaches the coordinator on loopback), which
wraps the job process started with ``mnexec`` inside the host. Workers print one JSON line per
iteration (lab/emulator.py); ``read_worker`` turns them into ``IterationRecord`` rows.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mlfc.contract import REPO_ROOT
from mlfc.lab.emulator import JobProfile
from mlfc.lab.results import IterationRecord
from mlfc.launch.daemons import tool
from mlfc.policy.mltcp import MltcpParams
from mlfc.topology import Topology


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
class Transport:
    """How every job of a run sends: congestion control, MLTCP, the bottleneck's line rate."""

    cc: str = "reno"
    mltcp: bool = False
    mltcp_params: MltcpParams = field(default_factory=MltcpParams)
    line_rate: float = 100e6


@dataclass
class RunningJob:
    spec: JobSpec
    ps: subprocess.Popen
    workers: list[subprocess.Popen]


def emulator_args(spec: JobSpec, iterations: int, transport: Transport) -> list[str]:
    """The arguments the PS and every worker of ``spec`` share."""
    args = ["--job", str(spec.job), "--iterations", str(iterations), "--cc", transport.cc]
    args += ["--line-rate", str(transport.line_rate), "--push-bytes", str(spec.profile.push_bytes)]
    args += ["--pull-bytes", str(spec.profile.pull_bytes), "--loss-bound", str(spec.loss_bound)]
    if transport.mltcp:
        p = transport.mltcp_params
        args += ["--mltcp", "--slope", str(p.slope), "--intercept", str(p.intercept)]
    if spec.importance is not None:
        args += ["--importance", str(spec.importance)]
    return args


def start_job(
    net,
    topo: Topology,
    spec: JobSpec,
    iterations: int,
    transport: Transport,
    coordinator: str,
    token: Path,
    run_dir: Path,
    start_at: float,
) -> RunningJob:
    hosts = topo.job_hosts(spec.job)
    ps_host = next(h for h in hosts if h.role == "ps")
    worker_hosts = [h for h in hosts if h.role == "worker"][: spec.workers]
    if len(worker_hosts) < spec.workers:
        raise ValueError(f"job {spec.job} needs {spec.workers} workers, the topology has {len(worker_hosts)}")
    common = emulator_args(spec, iterations, transport)
    ps_cmd = [sys.executable, "-m", "mlfc.lab.emulator", "ps", *common, "--bind", ps_host.ip]
    ps_cmd += ["--workers", str(spec.workers), "--worker-ips", ",".join(h.ip for h in worker_hosts)]
    ps = net.get(ps_host.name).popen(
        ps_cmd, stdout=subprocess.DEVNULL, stderr=(run_dir / f"job{spec.job}-ps.err").open("wb"), cwd=str(REPO_ROOT)
    )
    workers = []
    for rank, wh in enumerate(worker_hosts):
        inner = [sys.executable, "-m", "mlfc.lab.emulator", "worker", *common, "--bind", wh.ip, "--ps", ps_host.ip]
        inner += ["--rank", str(rank), "--compute-s", str(spec.profile.compute_s)]
        inner += ["--start-delay", str(spec.start_delay), "--start-at", str(start_at)]
        inner += ["--straggle", str(spec.straggle if rank == 0 else 1.0), "--straggle-from", str(spec.straggle_from)]
        inner += ["--acc-max", str(spec.acc_max), "--tau", str(spec.tau)]
        agent = [tool("mlfc-agent"), "--job", str(spec.job), "--coordinator", coordinator, "--token-file", str(token)]
        agent += ["--bytes-per-iteration", str(spec.profile.push_bytes), "--final-iteration", str(iterations - 1)]
        agent += ["--report-worker", str(rank)]
        if rank == 0:  # rank 0 registers the job with all its workers; the others only report
            agent += [arg for r, h in enumerate(worker_hosts) for arg in ("--worker", f"{r}={h.ip}")]
        else:
            agent.append("--no-register")
        workers.append(
            subprocess.Popen(
                [*agent, "--", "mnexec", "-a", str(net.get(wh.name).pid), *inner],
                stdout=subprocess.PIPE,
                stderr=(run_dir / f"job{spec.job}-w{rank}.err").open("wb"),
                text=True,
                cwd=str(REPO_ROOT),
                start_new_session=True,
            )
        )
    return RunningJob(spec, ps, workers)


@dataclass
class WorkerLog:
    """What the reader threads collect from every worker's stdout (shared, under ``lock``)."""

    scenario: str
    t0: float
    records: list[IterationRecord] = field(default_factory=list)
    summaries: list[dict] = field(default_factory=list)
    progress: dict[tuple[int, int], int] = field(default_factory=dict)  # (job, rank) -> last iteration
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reader(self, proc: subprocess.Popen, job: int, rank: int) -> threading.Thread:
        th = threading.Thread(target=self._read, args=(proc, job, rank), daemon=True, name=f"job{job}-w{rank}")
        th.start()
        return th

    def _read(self, proc: subprocess.Popen, job: int, rank: int) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                row = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                if row.get("summary"):
                    self.summaries.append(row)
                    continue
                self.records.append(self._record(row, job, rank))
                self.progress[(job, rank)] = int(row["iteration"])

    def _record(self, row: dict, job: int, rank: int) -> IterationRecord:
        t0 = self.t0
        return IterationRecord(
            self.scenario,
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

    def describe(self, iterations: int) -> str:
        with self.lock:
            parts = [f"job {j} w{r}: {it + 1}/{iterations}" for (j, r), it in sorted(self.progress.items())]
        return "  ".join(parts) or "starting"


ProgressFn = Callable[[str], None]
