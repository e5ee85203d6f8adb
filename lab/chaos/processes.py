"""The chaos job's processes in the Mininet hosts: parameter server, workers and their agents, started,
frozen, killed and restarted by the chaos run (lab/chaos/run.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mlfc.hosts.training.launch import TrainingJob, ps_argv, worker_argv
from mlfc.lab.chaos.schedule import JOB, WORKERS
from mlfc.lab.jobs import agent_argv
from mlfc.lab.stack import Control
from mlfc.launch.process import ManagedProcess
from mlfc.topologies import Topology

# ---- the job's processes --------------------------------------------------------------------------------


class InHost(ManagedProcess):
    """A command run inside a Mininet host's namespace (mnexec -a), optionally wrapped (mlfc-agent ... --)."""

    def __init__(self, name: str, wrap: Callable[[], list[str]], inner: list[str], host_pid: int, log: Path) -> None:
        super().__init__(name, log)
        self.wrap, self.inner, self.host_pid = wrap, inner, host_pid
        self.program = name

    def command(self) -> list[str]:
        return [*self.wrap(), "mnexec", "-a", str(self.host_pid), *self.inner]

    def ready(self) -> bool:
        return True  # back once it runs: the training stall measures when it is useful again


def _children(pid: int) -> list[int]:
    with contextlib.suppress(OSError):
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    return []


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _wait_group_gone(proc: subprocess.Popen | None, timeout: float) -> None:
    """Until every process of ``proc``'s group exited (then nothing holds the fixed ports); SIGKILL to the
    group after ``timeout``. The leader is reaped on the way (a zombie still counts as a group member)."""
    if proc is None:
        return
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        proc.poll()
        if not _group_alive(proc.pid):
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    while time.monotonic() < end + 5:
        proc.poll()
        if not _group_alive(proc.pid):
            return
        time.sleep(0.05)


@dataclass
class JobProcesses:
    ps: InHost
    agents: list[InHost]  # by rank: mlfc-agent wrapping the worker
    ack_logs: list[Path]
    done: set[str] = field(default_factory=set)  # names that exited 0
    failed: dict[str, int] = field(default_factory=dict)  # name -> last non-zero exit status
    unplanned: list[tuple[float, str, int]] = field(default_factory=list)  # restarts after an exit we did not cause

    def all(self) -> list[InHost]:
        return [self.ps, *self.agents]


def start_job(
    ctl: Control, topo: Topology, job: TrainingJob, coord_addr: str, token: Path, run_dir: Path
) -> JobProcesses:
    hosts = topo.job_hosts(JOB)
    ps_host = next(h for h in hosts if h.role == "ps")
    worker_hosts = [h for h in hosts if h.role == "worker"][:WORKERS]
    net = ctl.net
    ps = InHost("ps", list, ps_argv(job, ps_host.ip), net.get(ps_host.name).pid, run_dir / "ps.log")  # type: ignore[attr-defined]
    agents, logs = [], []
    for rank, wh in enumerate(worker_hosts):
        ack = run_dir / f"acks-w{rank}.jsonl"
        ack.unlink(missing_ok=True)
        logs.append(ack)

        def wrap(rank: int = rank, ack: Path = ack) -> list[str]:
            # rank 0 registers the job; a restarted agent takes it over (a new instance), history kept
            ips = [h.ip for h in worker_hosts]
            return agent_argv(JOB, coord_addr, token, rank, ips, job.iterations - 1, ack_log=ack, replace=True)

        inner = worker_argv(job, rank, wh.ip, ps_host.ip)
        agents.append(InHost(f"agent{rank}", wrap, inner, net.get(wh.name).pid, run_dir / f"w{rank}.log"))  # type: ignore[attr-defined]
    procs = JobProcesses(ps, agents, logs)
    for p in procs.all():
        p.start()
    return procs
