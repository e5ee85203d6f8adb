"""The DDP jobs of the gloo experiment (lab/mltcp/gloo.py): the unmodified training script, each job's
layout (gradient bytes, compute, step), its ranks in the worker and server namespaces, their gloo
connections and congestion control, and one run of some jobs through the bottleneck."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mlfc.hosts.kernel import KernelMltcpError, namespaces
from mlfc.lab.mltcp.kernel_net import (
    SERVER_ADDR,
    Bottleneck,
    RecordMetrics,
    loss_events,
)
from mlfc.lab.results import IterationRecord, summarise
from mlfc.policy.mltcp import MltcpParams
from mlfc.testing.netns import NetnsLab, in_netns, run

FAMILIES = {"reno": "mltcp_reno", "cubic": "mltcp_cubic"}  # plain -> MLTCP (the kernel has both plain ones)
PORT_BASE = 29500  # job j's rendezvous (TCPStore, rank 0) on SERVER_ADDR:PORT_BASE + j
BATCH = 64
CLASSES = 10
# The communication share a of one job alone, per number of jobs: sum 0.8, compatible (they could interleave).
COMM_SHARE = {2: 0.40, 4: 0.20}
# A step's time alone, per number of jobs: the kernel lab's compat-2 (0.2 + 0.3 s) and compat-4 (0.08 + 0.32 s).
STEP_S = {2: 0.50, 4: 0.40}

# The training script: an ordinary DDP script. It prints its step timestamps as JSON lines; before training it
# times a backward without the allreduce (DDP's no_sync, gradient accumulation's API) and waits for the
# launcher's start time on stdin, so that every job starts its first step at the same instant.
WORKER = textwrap.dedent(
    """
    import json, sys, time, torch, torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    master, rank, steps, width, compute = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), \\
        float(sys.argv[5])
    dist.init_process_group("gloo", init_method=f"tcp://{master}", rank=rank, world_size=2)
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, width), torch.randint(0, 10, (64,))
    nbytes = sum(p.numel() * p.element_size() for p in model.parameters())
    took = []
    for _ in range(5):  # backward's compute alone: no allreduce under no_sync
        with model.no_sync():
            loss = torch.nn.functional.cross_entropy(model(x), y)
            t = time.time()
            loss.backward()
            took.append(time.time() - t)
        opt.zero_grad()
    dist.barrier()
    print(json.dumps({"ready": True, "grad_bytes": nbytes, "backward_s": sorted(took)[len(took) // 2]}), flush=True)
    start_at = float(sys.stdin.readline())
    time.sleep(max(0.0, start_at - time.time()))
    for step in range(steps):
        start = time.time()
        time.sleep(compute)  # the rest of a real step (data loading, a bigger forward pass)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        backward_start = time.time()
        loss.backward()  # DDP's hooks allreduce the gradients (gloo) before it returns
        backward_end = time.time()
        opt.step()
        print(json.dumps({"step": step, "start": start, "backward_start": backward_start,
                          "backward_end": backward_end, "end": time.time()}), flush=True)
    dist.barrier()
    dist.destroy_process_group()
    """
)


def say(msg: str) -> None:
    print(msg, flush=True)


# ---- the jobs -----------------------------------------------------------------------------------


def grad_bytes(width: int) -> int:
    """The MLP's float32 parameters (= gradient bytes per step): Linear(width, width) + Linear(width, 10)."""
    return 4 * (width * width + width + CLASSES * width + CLASSES)


@dataclass(frozen=True)
class Layout:
    """One job's shape: ``width`` of the MLP, ``compute_s`` slept per step, the communication it aims at."""

    jobs: int
    width: int
    compute_s: float
    comm_s: float  # the target: its gradient bytes at the bottleneck rate, alone
    step_s: float

    @property
    def comm_share(self) -> float:
        return self.comm_s / self.step_s


def layout(jobs: int, rate_bps: float, step_s: float | None = None) -> Layout:
    """The job for ``jobs`` compatible jobs at ``rate_bps``: communication a = COMM_SHARE[jobs] of a step alone
    of ``step_s`` (STEP_S[jobs] by default), the rest slept.

    Gloo's 2-rank ring allreduce sends about the gradient's size G each way per step, so G bytes cross the
    shaped w -> s direction: comm = 8 G / R, G ~ 4 width^2 (float32; the other 11 width + 10 parameters are
    under 1 % at these widths). At R = 200 Mbit/s:
      2 jobs: comm = 0.40 x 0.50 s = 0.20 s -> G = 0.20 x 200e6 / 8 = 5.0 MB -> width = sqrt(5.0e6 / 4) ~ 1113
              (solving 4 (w^2 + 11 w + 10) = G exactly; 1118 without the small layer), sleep 0.30 s;
      4 jobs: comm = 0.20 x 0.40 s = 0.08 s -> G = 2.0 MB -> width ~ 702 (707), sleep 0.32 s.
    The forward/backward/optimiser compute (milliseconds at these widths) and TCP/IP headers (~3 %) add a little
    to the step; the solo runs measure what a job really is."""
    if jobs not in COMM_SHARE:
        raise ValueError(f"{jobs} jobs: choose from {', '.join(map(str, COMM_SHARE))}")
    step = STEP_S[jobs] if step_s is None else step_s
    comm = COMM_SHARE[jobs] * step
    target = comm * rate_bps / 8
    # 4 (w^2 + 11 w + 10) = target  ->  w = (-11 + sqrt(121 - 4 (10 - target / 4))) / 2
    width = max(1, round((-11 + math.sqrt(121 - 4 * (10 - target / 4))) / 2))
    return Layout(jobs, width, step - comm, comm, step)


@dataclass
class RankOutput:
    """What one rank printed: its gradient bytes, its backward's compute alone, one dict per step."""

    grad_bytes: int = 0
    backward_s: float = 0.0
    steps: list[dict] = field(default_factory=list)
    ready: bool = False

    def take(self, line: str) -> None:
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            return  # torch's warnings and the like
        if not isinstance(msg, dict):
            return
        if msg.get("ready"):
            self.grad_bytes, self.backward_s, self.ready = int(msg["grad_bytes"]), float(msg["backward_s"]), True
        elif "step" in msg:
            self.steps.append(msg)


def rank_label(job: int, rank: int) -> str:
    return f"r1@w{job}" if rank == 1 else "r0@s"


def records_of(scenario: str, job: int, rank: int, out: RankOutput, t0: float) -> list[IterationRecord]:
    """One IterationRecord per step of one rank, times from ``t0`` (the common start): start/end of the step,
    comm = [backward start + backward's compute alone, backward end] (the allreduce's wait; DDP starts the big
    bucket's allreduce once its gradients are computed)."""
    recs = []
    for s in out.steps:
        comm_end = s["backward_end"]
        comm_start = min(s["backward_start"] + out.backward_s, comm_end)
        recs.append(IterationRecord(scenario, job, rank_label(job, rank), int(s["step"]), s["start"] - t0,
                                    comm_start - t0, comm_end - t0, s["end"] - t0, out.grad_bytes))  # fmt: skip
    return recs


@dataclass
class DdpRun(RecordMetrics):
    """One run: every job's steps (both ranks), its gloo data connections and the congestion signals."""

    scenario: str
    cc: str
    records: list[IterationRecord]
    steps: int
    connections: dict[int, int] = field(default_factory=dict)  # per job: gloo data connections w<j> <-> s
    loss_events: int = 0  # every rank namespace's loss recoveries + RTOs (TcpExt), during the run
    marks: int = 0  # CE marks the bottleneck set on the jobs' w -> s packets (0 without a marker)
    retransmits: int = 0  # retransmitted segments of every rank namespace (Tcp RetransSegs)
    grad_bytes: int = 0
    params: MltcpParams | None = None

    @property
    def signals_per_phase(self) -> float:
        """Congestion signals (loss events + CE marks) per connection per communication phase (= step)."""
        phases = sum(self.connections.values()) * self.steps
        return (self.loss_events + self.marks) / phases if phases else float("nan")

    def per_job(self) -> dict[int, tuple[float, float]]:
        """Per job: (average step, average communication), first step left out."""
        return {s.job: (s.avg, s.comm_avg) for s in summarise(self.records)[0]}


# ---- namespaces: devices, connections, counters ----------------------------------------------------


def device_with(ip_addr_output: str, address: str) -> str | None:
    """The device holding ``address`` in ``ip -o -4 addr show`` output."""
    for line in ip_addr_output.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] == "inet" and parts[3].split("/")[0] == address:
            return parts[1].split("@")[0]
    return None


def _device(ns: str, address: str) -> str:
    dev = device_with(run("ip", "-n", ns, "-o", "-4", "addr", "show").stdout, address)
    if dev is None:
        raise KernelMltcpError(f"no device with {address} in {ns}")
    return dev


def _split(endpoint: str) -> tuple[str, int]:
    host, _, port = endpoint.rpartition(":")
    return host.strip("[]"), int(port)


def data_connections(sockets: Iterable[namespaces.TcpSocket], peer: str, store_port: int) -> set[tuple[str, str]]:
    """The established connections to ``peer`` other than the rendezvous store's (``store_port``): gloo's."""
    out = set()
    for s in sockets:
        if s.state != "ESTAB":
            continue
        host, port = _split(s.peer)
        if host == peer and port != store_port:
            out.add((s.local, s.peer))
    return out


def wrong_cc(sockets: Iterable[namespaces.TcpSocket], cc: str) -> list[namespaces.TcpSocket]:
    """Established sockets whose congestion control is not ``cc`` (``ss`` names it on every socket)."""
    return [s for s in sockets if s.state == "ESTAB" and s.cc != cc]


def retransmitted_segments(netns: str) -> int:
    """The namespace's Tcp RetransSegs so far."""

    def read() -> str:
        with open("/proc/thread-self/net/snmp") as f:
            return f.read()

    lines = in_netns(netns, read).splitlines()
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        if names.startswith("Tcp:"):
            return int(dict(zip(names.split()[1:], values.split()[1:], strict=True))["RetransSegs"])
    raise KernelMltcpError(f"{netns}: no Tcp counters in /proc/net/snmp")


# ---- one run ------------------------------------------------------------------------------------


def _stop(procs: Sequence[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def file_stem(name: str) -> str:
    """``name`` as a file name: slashes, spaces and colons as underscores."""
    return name.replace("/", "_").replace(" ", "_").replace(":", "_")


def _tail(path: Path, lines: int = 12) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class _Rank:
    """A rank's process, what it printed (read by a thread) and its stderr's file."""

    def __init__(self, job: int, rank: int, proc: subprocess.Popen, log: Path) -> None:
        self.job, self.rank, self.proc, self.log = job, rank, proc, log
        self.out = RankOutput()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.out.take(line)


def _connections(net: Bottleneck, j: int, cc: str, scenario: str) -> set[tuple[str, str]]:
    """Job j's gloo connections (``ss`` in w<j>), every socket there checked to use ``cc``."""
    socks = namespaces.sockets(namespaces.resolve(net.workers[j - 1]))
    bad = wrong_cc(socks, cc)
    if bad:
        raise KernelMltcpError(f"{scenario}: job {j}'s socket {bad[0].local} -> {bad[0].peer} uses {bad[0].cc or '?'}, "
                               f"not {cc}: the namespace default did not apply")  # fmt: skip
    return data_connections(socks, SERVER_ADDR, PORT_BASE + j)


def run_ddp(net: Bottleneck, lab: NetnsLab, scenario: str, jobs: Sequence[int], job: Layout, cc: str, steps: int,
            logs: Path, marker=None, startup_timeout: float = 240.0) -> DdpRun:  # fmt: skip
    """One run of the DDP jobs ``jobs`` (1-based: job j's rank 1 in worker namespace w<j>), every rank's
    namespace defaulting to ``cc``; returns their steps and signals."""
    spaces = [net.workers[j - 1] for j in jobs] + [net.server]
    for ns in spaces:
        namespaces.set_default_cc(namespaces.resolve(ns), cc)
    dev = {ns: _device(ns, SERVER_ADDR if ns == net.server else net.worker_address(j - 1))
           for ns, j in zip(spaces, [*jobs, 0], strict=True)}  # fmt: skip
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")  # one core's worth each: 2N ranks share it
    logs.mkdir(parents=True, exist_ok=True)
    ranks: list[_Rank] = []
    try:
        for j in jobs:
            for rank, ns in ((0, net.server), (1, net.workers[j - 1])):
                log = logs / f"{file_stem(scenario)}-job{j}-rank{rank}.log"
                argv = [*lab.exec_args(ns), sys.executable, "-c", WORKER, f"{SERVER_ADDR}:{PORT_BASE + j}", str(rank),
                        str(steps), str(job.width), f"{job.compute_s:.6f}"]  # fmt: skip
                with log.open("w") as err:
                    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                                         env=dict(env, GLOO_SOCKET_IFNAME=dev[ns]))  # fmt: skip
                ranks.append(_Rank(j, rank, p, log))

        def check() -> None:
            for r in ranks:
                if r.proc.poll() not in (None, 0):
                    raise KernelMltcpError(f"{scenario}: job {r.job} rank {r.rank} exited with {r.proc.returncode}:\n"
                                           f"{_tail(r.log)}")  # fmt: skip

        deadline = time.time() + startup_timeout
        while not all(r.out.ready for r in ranks):
            check()
            if time.time() > deadline or any(r.proc.poll() == 0 for r in ranks):
                raise KernelMltcpError(f"{scenario}: the ranks were not ready within {startup_timeout:g} s")
            time.sleep(0.05)
        conns = {j: _connections(net, j, cc, scenario) for j in jobs}
        bad = wrong_cc(namespaces.sockets(namespaces.resolve(net.server)), cc)
        if bad:
            raise KernelMltcpError(f"{scenario}: the server's socket {bad[0].local} -> {bad[0].peer} uses "
                                   f"{bad[0].cc or '?'}, not {cc}")  # fmt: skip
        # the signals of the training steps only (not the rendezvous, DDP's parameter broadcast, the warm-up)
        events0 = sum(loss_events(ns) for ns in spaces)
        retrans0 = sum(retransmitted_segments(ns) for ns in spaces)
        marks0 = marker.stats().marks_by_source if marker is not None else {}
        t0 = time.time() + 0.3  # every job's first step starts here
        for r in ranks:
            try:
                r.proc.stdin.write(f"{t0!r}\n")
                r.proc.stdin.close()
            except BrokenPipeError:
                r.proc.wait(5)
                check()
                raise KernelMltcpError(f"{scenario}: job {r.job} rank {r.rank} went away:\n{_tail(r.log)}") from None
        # generous: every job's communication in turn, four times over
        deadline = t0 + 60 + steps * job.step_s * len(jobs) * 4
        sampled = False
        while any(r.proc.poll() is None for r in ranks):
            check()
            if time.time() > deadline:
                raise KernelMltcpError(f"{scenario}: the jobs did not finish in time")
            if not sampled and all(len(r.out.steps) >= steps // 2 for r in ranks):
                sampled = True  # once mid-run: any connection gloo opened after the rendezvous
                for j in jobs:
                    conns[j] |= _connections(net, j, cc, scenario)
            time.sleep(0.05)
        check()
        for r in ranks:
            r.reader.join(10)
            if len(r.out.steps) != steps:
                raise KernelMltcpError(f"{scenario}: job {r.job} rank {r.rank} reported {len(r.out.steps)} of {steps} "
                                       f"steps:\n{_tail(r.log)}")  # fmt: skip
    finally:
        _stop([r.proc for r in ranks])
    records = [rec for r in ranks for rec in records_of(scenario, r.job, r.rank, r.out, t0)]
    marks = 0
    if marker is not None:
        now = marker.stats().marks_by_source
        marks = sum(now.get(a, 0) - marks0.get(a, 0) for a in (net.worker_address(j - 1) for j in jobs))
    return DdpRun(
        scenario, cc, records, steps, {j: len(c) for j, c in conns.items()},
        loss_events=sum(loss_events(ns) for ns in spaces) - events0,
        marks=marks,
        retransmits=sum(retransmitted_segments(ns) for ns in spaces) - retrans0,
        grad_bytes=max(r.out.grad_bytes for r in ranks),
    )  # fmt: skip
