"""Training jobs on the emulated network: what a job is, how its processes start, what they report.

A job is a parameter server and its workers, each in its Mininet host's namespace. Each worker runs
under ``mlfc-agent`` (in the root namespace, where it reaches the coordinator on loopback), which
wraps the job process started with ``mnexec`` inside the host. The workload is either the emulator
(lab/emulator.py: sleeps for compute, a synthetic accuracy curve; cheap, for transport experiments) or
real PyTorch training (mlfc.hosts.training: real gradients, real accuracy) when the spec carries a
``Training``. Both print one JSON line per iteration; ``WorkerLog`` turns them into ``IterationRecord``s.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mlfc import contract
from mlfc.hosts.training.launch import TrainingJob, ps_argv, worker_argv
from mlfc.hosts.transport.recovery import DEFAULT_TOLERATED_LOSS
from mlfc.lab.emulator import JobProfile
from mlfc.lab.results import CHUNK_COUNTS, IterationRecord
from mlfc.launch.daemons import tool
from mlfc.launch.process import terminate
from mlfc.policy.mltcp import MltcpParams, format_params
from mlfc.policy.withhold import WithholdPolicy
from mlfc.topologies import Topology


@dataclass(frozen=True)
class Training:
    """Real training instead of the emulator: the task and its hyper-parameters (mlfc.hosts.training)."""

    task: str = "digits"
    width: int | None = None
    lr: float | None = None
    batch_size: int | None = None
    seed: int = 0
    eval_every: int = 5
    # Pad real compute up to the profile's compute_s, so the communication fraction is the profile's
    # (CPU compute here takes milliseconds); recorded per iteration as pad_s.
    pad_to_profile: bool = True
    compress: str = "none"  # rigid compression of every push: none | fp16 | topk:F (mlfc.hosts.training.compress)
    loss_feedback: bool = True  # zero-filled gradient elements go out with the next push (ClientConfig)
    withhold: bool = False  # the network decides how much of a push is withheld (ClientConfig.withhold)
    withhold_signal: str = WithholdPolicy().signal  # and by which congestion signal (mlfc.policy.withhold)
    precision: bool = False  # the withheld share shed by precision first (ClientConfig.precision)
    pull_loss_bound: float = 0.0  # approximate pulls: the PS leaves out up to this share under congestion
    pull_precision: bool = False  # and sends the change at fp16/int8 first (ServerConfig.pull_precision)
    repair_drops: bool = False  # only what is shed by plan is tolerated, network drops retransmitted (both ways)


@dataclass(frozen=True)
class JobSpec:
    job: int
    profile: JobProfile
    workers: int = 1
    start_delay: float = 0.0
    straggle: float = 1.0  # compute-time multiplier of worker 0 (a straggler) from iteration straggle_from
    straggle_from: int = 0
    straggle_random: bool = False  # the multiplier is drawn per iteration from [1, straggle] (seeded by job, rank)
    acc_max: float = 0.9
    tau: float = 10.0
    importance: int | None = None  # one class for all chunks; None: by gradient magnitude
    loss_bound: float = 0.02  # share of a tensor the receiver may zero-fill (unprotected chunks only)
    training: Training | None = None  # None: the emulator


@dataclass(frozen=True)
class Transport:
    """How every job of a run sends: congestion control, MLTCP, the bottleneck's line rate."""

    cc: str = "reno"
    mltcp: bool = False
    mltcp_params: MltcpParams = field(default_factory=MltcpParams)
    line_rate: float = 100e6
    mltcp_tune: bool = False  # every sender tunes slope/intercept online from mltcp_params (emulator jobs)
    ack_delay: float | None = None  # receivers' ReceiverConfig.ack_delay (None: its default; emulator jobs)
    tolerated_loss: str = DEFAULT_TOLERATED_LOSS  # SenderConfig.tolerated_loss: the window's reaction


@dataclass
class RunningJob:
    spec: JobSpec
    ps: subprocess.Popen
    workers: list[subprocess.Popen]

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM to every process (its group if it leads one), SIGKILL after ``grace_s``; workers first,
        so none is left knocking at a PS that is gone."""
        for p in [*self.workers, self.ps]:
            terminate(p, signal.SIGTERM, grace_s)


def agent_argv(
    job: int,
    coordinator: str,
    token: Path,
    rank: int,
    worker_ips: Sequence[str],
    final_iteration: int,
    *,
    bytes_per_iteration: int | None = None,
    ack_log: Path | None = None,
    replace: bool = False,
) -> list[str]:
    """``mlfc-agent ... --`` for worker ``rank`` (the wrapped command follows). Rank 0 registers the job
    with every worker's address (``replace``: takes over a job a previous agent registered); the others
    only report."""
    cmd = [tool("mlfc-agent"), "--job", str(job), "--coordinator", coordinator, "--token-file", str(token)]
    if bytes_per_iteration is not None:
        cmd += ["--bytes-per-iteration", str(bytes_per_iteration)]
    cmd += ["--final-iteration", str(final_iteration), "--report-worker", str(rank)]
    if ack_log is not None:
        cmd += ["--ack-log", str(ack_log)]
    if rank == 0:
        cmd += ["--replace"] if replace else []
        cmd += [arg for r, ip in enumerate(worker_ips) for arg in ("--worker", f"{r}={ip}")]
    else:
        cmd.append("--no-register")
    return [*cmd, "--"]


def emulator_args(spec: JobSpec, iterations: int, transport: Transport) -> list[str]:
    """The arguments the PS and every worker of ``spec`` share."""
    args = ["--job", str(spec.job), "--iterations", str(iterations), "--cc", transport.cc]
    args += ["--line-rate", str(transport.line_rate), "--push-bytes", str(spec.profile.push_bytes)]
    args += ["--pull-bytes", str(spec.profile.pull_bytes), "--loss-bound", str(spec.loss_bound)]
    if transport.tolerated_loss != DEFAULT_TOLERATED_LOSS:
        args += ["--tolerated-loss", transport.tolerated_loss]
    if transport.mltcp:
        p = transport.mltcp_params
        args += ["--mltcp", "--f", format_params(p)]
        if transport.mltcp_tune:
            args.append("--mltcp-tune")
    if spec.importance is not None:
        args += ["--importance", str(spec.importance)]
    if transport.ack_delay is not None:
        args += ["--ack-delay", str(transport.ack_delay)]
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
    if spec.training is not None:
        return _start_training(net, spec, iterations, transport, coordinator, token, run_dir, start_at, ps_host,
                               worker_hosts)  # fmt: skip
    common = emulator_args(spec, iterations, transport)
    ps_cmd = [sys.executable, "-m", "mlfc.lab.emulator", "ps", *common, "--bind", ps_host.ip]
    ps_cmd += ["--workers", str(spec.workers), "--worker-ips", ",".join(h.ip for h in worker_hosts)]
    ps = net.get(ps_host.name).popen(
        ps_cmd,
        stdout=subprocess.DEVNULL,
        stderr=(run_dir / f"job{spec.job}-ps.err").open("wb"),
        cwd=str(contract.REPO_ROOT),
    )
    workers = []
    for rank, wh in enumerate(worker_hosts):
        inner = [sys.executable, "-m", "mlfc.lab.emulator", "worker", *common, "--bind", wh.ip, "--ps", ps_host.ip]
        inner += ["--rank", str(rank), "--compute-s", str(spec.profile.compute_s)]
        inner += ["--start-delay", str(spec.start_delay), "--start-at", str(start_at)]
        inner += ["--straggle", str(spec.straggle if rank == 0 else 1.0), "--straggle-from", str(spec.straggle_from)]
        if spec.straggle_random:
            inner.append("--straggle-random")
        inner += ["--acc-max", str(spec.acc_max), "--tau", str(spec.tau)]
        workers.append(_start_worker(net, spec, rank, wh.name, worker_hosts, inner, iterations, coordinator, token,
                                     run_dir))  # fmt: skip
    return RunningJob(spec, ps, workers)


def _start_worker(
    net,
    spec: JobSpec,
    rank: int,
    host: str,
    worker_hosts: list,
    inner: list[str],
    iterations: int,
    coordinator: str,
    token: Path,
    run_dir: Path,
) -> subprocess.Popen:
    """``inner`` under mnexec in the worker's host, wrapped by mlfc-agent in the root namespace."""
    agent = agent_argv(spec.job, coordinator, token, rank, [h.ip for h in worker_hosts], iterations - 1,
                       bytes_per_iteration=spec.profile.push_bytes)  # fmt: skip
    return subprocess.Popen(
        [*agent, "mnexec", "-a", str(net.get(host).pid), *inner],
        stdout=subprocess.PIPE,
        stderr=(run_dir / f"job{spec.job}-w{rank}.err").open("wb"),
        text=True,
        cwd=str(contract.REPO_ROOT),
        start_new_session=True,
    )


# A job's transfers wait this long for a peer. The peer timeout too: strict priority (MAIF's classes) starves
# the lowest classes for minutes while the jobs above them communicate, and a 10 s silence would then read
# as a lost peer (the job re-joins, and its pulls are lost to the same starvation). These experiments inject
# no faults; the chaos experiment keeps its own short timeouts (lab/chaos/schedule.py).
LAB_JOB_TIMEOUT_S = 600.0


def training_job(spec: JobSpec, iterations: int, transport: Transport) -> TrainingJob:
    t = spec.training
    assert t is not None
    p = transport.mltcp_params
    return TrainingJob(
        job=spec.job, workers=spec.workers, iterations=iterations, task=t.task, width=t.width, lr=t.lr,
        batch_size=t.batch_size, seed=t.seed, eval_every=t.eval_every, loss_bound=spec.loss_bound,
        compute_s=spec.profile.compute_s if t.pad_to_profile else 0.0, cc=transport.cc, mltcp=transport.mltcp,
        f=format_params(p), line_rate=transport.line_rate,
        timeout=LAB_JOB_TIMEOUT_S, peer_timeout=LAB_JOB_TIMEOUT_S,
        compress=t.compress, loss_feedback=t.loss_feedback, withhold=t.withhold,
        withhold_signal=t.withhold_signal, precision=t.precision,
        pull_loss_bound=t.pull_loss_bound, pull_precision=t.pull_precision, repair_drops=t.repair_drops,
        tolerated_loss=transport.tolerated_loss,
    )  # fmt: skip


def _start_training(
    net,
    spec: JobSpec,
    iterations: int,
    transport: Transport,
    coordinator: str,
    token: Path,
    run_dir: Path,
    start_at: float,
    ps_host,
    worker_hosts: list,
) -> RunningJob:
    job = training_job(spec, iterations, transport)
    ps = net.get(ps_host.name).popen(
        ps_argv(job, ps_host.ip), stdout=subprocess.DEVNULL, stderr=(run_dir / f"job{spec.job}-ps.err").open("wb"),
        cwd=str(contract.REPO_ROOT),
    )  # fmt: skip
    workers = []
    for rank, wh in enumerate(worker_hosts):
        inner = worker_argv(job, rank, wh.ip, ps_host.ip, start_at=start_at, start_delay=spec.start_delay)
        workers.append(_start_worker(net, spec, rank, wh.name, worker_hosts, inner, iterations, coordinator, token,
                                     run_dir))  # fmt: skip
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
            float(row["accuracy"]) if row.get("accuracy") is not None else None,
            int(row.get("lost_chunks", 0)),
            str(row.get("mltcp_f") or ""),
            int(row["sent_bytes"]) if "sent_bytes" in row else None,
            int(row["pull_sent_bytes"]) if "pull_sent_bytes" in row else None,
            **{k: int(row.get(k, 0)) for k in CHUNK_COUNTS},
        )

    def describe(self, iterations: int) -> str:
        with self.lock:
            parts = [f"job {j} w{r}: {it + 1}/{iterations}" for (j, r), it in sorted(self.progress.items())]
        return "  ".join(parts) or "starting"


ProgressFn = Callable[[str], None]
