"""Lab experiment (``python -m mlfc.lab.mltcp.gloo``): unmodified PyTorch DDP over gloo, N jobs sharing the
kernel lab's shallow bottleneck, kernel MLTCP against the plain algorithm (issue 45 item 6).

Lab code, root only (network namespaces, BPF), torch needed. The network is the kernel lab's
(:func:`mlfc.lab.mltcp.kernel_net.build_network`): worker namespaces w1..w8 -> router r -> server s, the
router's egress toward s an ``htb`` at R over a ``bfifo`` of B bytes; with ``--mark-threshold K`` the tc/eBPF
marker (:mod:`mlfc.hosts.kernel.marker`) sets CE above K bytes of that queue and every rank's namespace asks
for ECN. The default regime is the kernel lab's (:data:`mlfc.lab.mltcp.kernel_net.DEFAULT_RATE_MBPS`,
:data:`~mlfc.lab.mltcp.kernel_net.DEFAULT_BUFFER`, ``DEFAULT_MARK_THRESHOLD``: 200 Mbit/s, CE above 60 kB of a
300 kB queue).

Jobs: N = 2 or 4 DDP jobs (``--jobs``), 2 ranks each, gloo on CPU, a small MLP on generated data; nothing in
the training script (:data:`WORKER`, one script for every treatment) knows about MLTCP. Job j's rank 1 runs
in worker namespace w<j> and its rank 0 in the server namespace, with its own rendezvous port
(``PORT_BASE + j``) on :data:`~mlfc.lab.mltcp.kernel_net.SERVER_ADDR`, so every job's gradient traffic
crosses the shared bottleneck. **Only one direction is shaped**: gloo's 2-rank ring allreduce sends about the
gradient's size each way per step, rank 1 -> rank 0 (w -> s) through the htb/bfifo bottleneck, rank 0 ->
rank 1 (s -> w) over the router's unshaped veths; the jobs contend (and MLTCP acts) on the w -> s half.

Each job sleeps "the rest of a real step" (``time.sleep``, as lab/mltcp/kernel_gloo.py does), then runs forward,
``loss.backward()`` (DDP's hooks allreduce the gradients before it returns) and the optimiser step. The
gradient size and the sleep make the jobs compatible: a job's communication alone is ~40 % of its step for
2 jobs (sum 0.8), ~20 % for 4 (sum 0.8) (:func:`layout`).

Per round and family (reno, cubic), on the same network: each job alone under the plain algorithm (the
ideal), all N jobs under the plain algorithm, all N under ``mltcp_<family>`` — each treatment the default
congestion control of every namespace that runs a rank (server included), set with
:func:`mlfc.hosts.kernel.namespaces.set_default_cc` before the ranks start, as a user would, and checked on
every socket with ``ss``. F is the family's default (:func:`mlfc.policy.mltcp.default_params`) unless
``--f``; the algorithms are loaded if not registered and unloaded at the end if this run loaded them.

Metrics are the lab's: average and p99 step time (first step left out) over both ranks of every job, the
share of the ideal gain (:func:`mlfc.lab.scenarios.share_of_ideal_gain`) against the plain algorithm of the
same round, the ideal from each job alone (:func:`mlfc.lab.scenarios.ideal_iteration_times`, solo step and
communication times), the step from which the jobs stay interleaved. Communication per step: the time in
``loss.backward()`` less the same backward's compute alone, measured by each rank before training under
DDP's ``no_sync()`` (no allreduce); the records' comm span is [backward start + that compute, backward end]
(DDP allreduces the big bucket once its gradients are all computed). Congestion signals per connection per
phase: loss events (``kernel_net.loss_events``) of every rank's namespace + the marker's CE marks on the
workers' packets, over (gloo data connections between w<j> and s, counted with ``ss -tn`` in w<j>, the
rendezvous store's excluded) x steps.

Output: a table per round, summary.md, rounds.csv, a CSV and a timeline PNG per run; ``--publish`` adds the
rows to docs/data/mltcp (dataplane ``real``, mix ``ddp-2``/``ddp-4``) and docs/data/mltcp-regime (platform
``kernel-ddp``).
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mlfc.hosts.kernel import KernelMltcpError, build, loader, namespaces
from mlfc.lab import summaries
from mlfc.lab.mltcp import regime, rows
from mlfc.lab.mltcp.figures import MLTCP_KEY, MLTCP_SCHEMA
from mlfc.lab.mltcp.kernel_net import (
    DEFAULT_BUFFER,
    DEFAULT_MARK_THRESHOLD,
    DEFAULT_RATE_MBPS,
    SERVER_ADDR,
    Bottleneck,
    RecordMetrics,
    build_network,
    loss_events,
)
from mlfc.lab.mltcp.rows import HEADERS, Cell, regime_label, summary_rows
from mlfc.lab.results import IterationRecord, format_table, markdown_table, plot_timeline, summarise, write_csv
from mlfc.lab.scenarios import ideal_iteration_times, share_of_ideal_gain
from mlfc.policy.mltcp import IterationDetection, MltcpParams, default_params, format_params, parse_params
from mlfc.testing.netns import NetnsError, NetnsLab, in_netns, run

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


def _stem(name: str) -> str:
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
                log = logs / f"{_stem(scenario)}-job{j}-rank{rank}.log"
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


# ---- rows ---------------------------------------------------------------------------------------


def mix_name(jobs: int) -> str:
    return f"ddp-{jobs}"


def published_rows(cells: Sequence[Cell], command: str) -> list[tuple[dict, list[tuple[Path, str]]]]:
    """docs/data/mltcp rows (dataplane "real", mix ddp-N) of the MLTCP treatments with their runs' CSVs."""

    def extra(c: Cell, base: Cell) -> dict:
        return {
            "connections_per_job": [statistics.fmean(r.connections.values()) for r in c.runs],
            "workload": "PyTorch DDP, gloo, CPU, 2 ranks per job (MLP, generated data)",
        }

    return rows.published_rows(cells, command, dataplane="real", jobs=lambda c: int(c.mix.rsplit("-", 1)[1]),
                               extra=extra)  # fmt: skip


def regime_rows(cells: Sequence[Cell], command: str) -> list[dict]:
    """docs/data/mltcp-regime rows (platform "kernel-ddp") of the MLTCP treatments."""
    return rows.regime_rows(cells, command, platform="kernel-ddp")


def verdicts(cells: Sequence[Cell]) -> list[str]:
    """Each MLTCP row with a target, against lab/mltcp/figures.py's table (lab/mltcp/rows.py)."""
    return rows.verdicts([row for row, _ in published_rows(cells, "")])


def write_round_csv(path: Path, cells: Sequence[Cell]) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["queue_bytes", "mark_threshold_bytes", "mix", "treatment", "round", "avg_s", "p99_s",
                    "baseline_avg_s", "ideal_avg_s", "speedup", "ideal_speedup", "share_of_ideal_gain",
                    "interleaved_from", "connections", "loss_events", "ce_marks", "retransmits",
                    "signals_per_phase"])  # fmt: skip
        for c in cells:
            for k, (r, b, i) in enumerate(zip(c.runs, c.base_avgs, c.ideal_avgs, strict=True)):
                share = share_of_ideal_gain(b, r.avg, i)
                w.writerow([c.queue_bytes, "" if c.mark_threshold_bytes is None else c.mark_threshold_bytes,
                            c.mix, c.treatment, k + 1, f"{r.avg:.4f}", f"{r.p99:.4f}", f"{b:.4f}", f"{i:.4f}",
                            f"{b / r.avg:.4f}", f"{b / i:.4f}", "" if math.isnan(share) else f"{share:.4f}",
                            "" if r.interleaved_at is None else r.interleaved_at, sum(r.connections.values()),
                            r.loss_events, r.marks, r.retransmits, f"{r.signals_per_phase:.3f}"])  # fmt: skip


# ---- the experiment -----------------------------------------------------------------------------


def _solo(net, lab, n: int, job: Layout, fam: str, args, out: Path, rnd: int, t_start: float, marker):
    """Each of the ``n`` jobs alone under the plain ``fam``: (ideal average, slowest job's ideal)."""
    solo_t, solo_comm = {}, {}
    for j in range(1, n + 1):
        res = run_ddp(net, lab, f"{mix_name(n)}/solo-job{j}-{fam}", [j], job, fam, args.solo_steps, out / "logs",
                      marker)  # fmt: skip
        solo_t[j], solo_comm[j] = res.per_job()[j]
        write_csv(out / mix_name(n) / f"solo-job{j}-{fam}-r{rnd}.csv", res.records)
        say(f"[round {rnd}, {(time.time() - t_start) / 60:4.1f} min] {mix_name(n)} job {j} alone ({fam}): step "
            f"{solo_t[j]:.3f} s, comm {solo_comm[j]:.3f} s (a = {solo_comm[j] / solo_t[j]:.2f}), "
            f"{res.connections[j]} gloo connection(s), {res.signals_per_phase:.1f} signals/phase")  # fmt: skip
    ideal = ideal_iteration_times(solo_t, solo_comm)
    avg = statistics.fmean(ideal.values())
    load = sum(solo_comm[j] / solo_t[j] for j in solo_t)
    say(f"[round {rnd}] {mix_name(n)} ideal average {avg:.3f} s (load {load:.2f} of the bottleneck)")
    return avg, max(ideal.values())


def _record(cell: Cell, res: DdpRun, ideals, base_avg: float, out: Path, rnd: int, t_start: float, tag: str) -> None:
    ideal, slowest = ideals
    cell.runs.append(res)
    cell.ideal_avgs.append(ideal)
    cell.ideal_p99s.append(slowest)
    cell.base_avgs.append(base_avg)
    stem = _stem(cell.treatment)
    cell.csvs.append(out / cell.mix / f"{stem}-r{rnd}.csv")
    write_csv(cell.csvs[-1], res.records)
    plot_timeline(out / cell.mix / f"{stem}-r{rnd}.png", res.records,
                  f"{cell.mix}: {cell.treatment} (DDP over gloo, kernel TCP, {tag}, round {rnd})")  # fmt: skip
    share = share_of_ideal_gain(base_avg, res.avg, ideal)
    gain = "" if cell.treatment == cell.family or math.isnan(share) else f", {share:.0%} of the ideal gain"
    inter = res.interleaved_at
    say(f"[{tag} round {rnd}, {(time.time() - t_start) / 60:4.1f} min] {cell.mix} {cell.treatment}: avg "
        f"{res.avg:.3f} s, p99 {res.p99:.3f} s, speed-up {base_avg / res.avg:.2f} (ideal {base_avg / ideal:.2f})"
        f"{gain}, interleaved from {'-' if inter is None else inter}, {res.signals_per_phase:.1f} signals/phase "
        f"({sum(res.connections.values())} connections, loss events {res.loss_events}, marks {res.marks}, "
        f"retransmits {res.retransmits})")  # fmt: skip


def _measure(args, lab: NetnsLab, params: dict[str, MltcpParams], detection, cells: dict, out: Path,
             t_start: float) -> None:  # fmt: skip
    rate, queue, mark = args.rate * 1e6, args.buffer, args.mark_threshold or None
    counts = [int(n) for n in args.jobs.split(",")]
    net = build_network(lab, rate, queue, workers=max(counts), ecn=mark is not None)
    if mark is not None:  # the server's rank 0 opens connections too: it asks for ECN like the workers
        run("ip", "netns", "exec", net.server, "sysctl", "-qw", "net.ipv4.tcp_ecn=1")
    marker = None
    if mark is not None:
        from mlfc.hosts.kernel import marker as ecn_marker  # only runs with a threshold load it

        marker = ecn_marker.attach(net.router, net.device, net.rate_bps, mark, net.queue_bytes, mode="step")
    tag = regime_label(queue, mark)
    say(f"bottleneck: htb {args.rate:g} Mbit/s, bfifo {queue} B"
        f"{'' if mark is None else f', CE above {mark} B (tc/eBPF marker)'}; shaped w -> s only")  # fmt: skip
    out = out / tag
    try:
        for rnd in range(1, args.rounds + 1):
            for n in counts:
                job = layout(n, rate, args.step)
                mix = mix_name(n)
                say(f"[round {rnd}] {mix}: {n} jobs, MLP width {job.width} ({grad_bytes(job.width) / 1e6:.2f} MB of "
                    f"gradients), sleep {job.compute_s:.3f} s per step: comm {job.comm_s:.3f} s of "
                    f"{job.step_s:.3f} s alone (a = {job.comm_share:.2f})")  # fmt: skip
                for fam in [f for f in args.cc.split(",") if f]:
                    ideal = _solo(net, lab, n, job, fam, args, out, rnd, t_start, marker)
                    base_avg = math.nan
                    name_mltcp = f"{FAMILIES[fam]} {format_params(params[fam])}"
                    for name, cc in ((fam, fam), (name_mltcp, FAMILIES[fam])):
                        if cc != fam:
                            loader.set_params([loader.algorithm(fam)], params[fam], detection)
                        res = run_ddp(net, lab, f"{mix}/{name}", range(1, n + 1), job, cc, args.steps, out / "logs",
                                      marker)  # fmt: skip
                        res.params = params[fam] if cc != fam else None
                        if cc == fam:
                            base_avg = res.avg
                        cell = cells.setdefault((queue, mark, mix, name), Cell(
                            mix, name, fam, queue_bytes=queue, mark_threshold_bytes=mark, rate_bps=rate))  # fmt: skip
                        _record(cell, res, ideal, base_avg, out, rnd, t_start, tag)
            say(f"== {tag}, after round {rnd}\n" + format_table(HEADERS, summary_rows(list(cells.values()))))
    finally:
        if marker is not None:
            marker.detach()


def experiment(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    families = [f for f in args.cc.split(",") if f]
    params = {f: default_params(f) if args.f is None else parse_params(args.f) for f in families}
    detection = IterationDetection() if args.idle_min is None else IterationDetection(idle_min=args.idle_min)
    algs = {f: loader.algorithm(FAMILIES[f]) for f in families}
    loaded_here = [f for f in families if not loader.registered(algs[f])]
    before = {f: loader.read_params(algs[f]) for f in families if f not in loaded_here}  # restored at the end
    for f in loaded_here:
        loader.load([algs[f]], params[f], detection, log=lambda m: say(f"  {m}"))
    allowed_before = namespaces.allowed()
    missing = [f for f in families if f not in allowed_before and f in namespaces.available()]
    if missing:
        namespaces.set_allowed(allowed_before + missing)
        say(f"  allowed {', '.join(missing)} as namespace defaults (net.ipv4.tcp_allowed_congestion_control)")
    load0 = os.getloadavg()
    cells: dict[tuple, Cell] = {}
    t_start = time.time()
    try:
        with NetnsLab("kddp") as lab:
            _measure(args, lab, params, detection, cells, out, t_start)
    finally:
        if missing:
            namespaces.set_allowed([c for c in namespaces.allowed() if c not in missing])
        for f, kept in before.items():
            if kept and kept[0].params is not None and kept[0].detection is not None:
                loader.set_params([algs[f]], kept[0].params, kept[0].detection)
        if loaded_here and not args.keep_loaded:
            for w in loader.unload([algs[f] for f in loaded_here], log=lambda m: say(f"  {m}")):
                say(f"  warning: {w}")
    _report(args, list(cells.values()), out, load0, os.getloadavg(), t_start)
    if args.publish:
        _publish(list(cells.values()), args.command)
    return 0


def _report(args, cells: list[Cell], out: Path, load0, load1, t_start: float) -> None:
    rows = summary_rows(cells)
    mark = "" if args.mark_threshold is None else f", CE marked above {args.mark_threshold} B"
    lines = [
        f"# Kernel MLTCP under PyTorch DDP (gloo): {args.rounds} round(s), {args.steps} steps per run",
        "",
        f"htb {args.rate:g} Mbit/s over bfifo {args.buffer} B{mark}, shaped in the w -> s direction only; job j: "
        f"rank 1 in w<j>, rank 0 in s; every rank's namespace defaults to the treatment's congestion control; "
        f"F {', '.join(sorted({c.treatment.split(' ', 1)[1] for c in cells if ' ' in c.treatment}))}; "
        f"load average {load0[0]:.1f} at the start, {load1[0]:.1f} at the end; "
        f"{(time.time() - t_start) / 60:.1f} min.",
        "",
        'Mean over the rounds with the range in brackets ("pooled": the share of the round-averaged times); '
        "speed-up and share of the ideal gain against the plain algorithm of the same family in the same round; "
        '"ideal": the speed-up if every job stepped as fast as alone (limited by the bottleneck\'s load); '
        '"signals/phase": loss events + CE marks per gloo connection per step.',
        "",
        markdown_table(HEADERS, rows),
        "",
        *[f"- {v}" for v in verdicts(cells)],
    ]
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    write_round_csv(out / "rounds.csv", cells)
    say(format_table(HEADERS, rows))
    for v in verdicts(cells):
        say(v)
    say(f"results in {out}/ (summary.md, rounds.csv, per-run CSVs and timelines)")


def _publish(cells: list[Cell], command: str) -> None:
    published = published_rows(cells, command)
    rows = [row for row, _ in published]
    runs = [r for _, rs in published for r in rs]
    path = summaries.publish("mltcp", rows, key=MLTCP_KEY, runs=runs, meta={"schema": MLTCP_SCHEMA})
    say(f"published {len(rows)} row(s) to {path}")
    curve = regime_rows(cells, command)
    path = summaries.publish(regime.EXPERIMENT, curve, key=regime.KEY, meta={"schema": regime.SCHEMA})
    say(f"published {len(curve)} regime row(s) to {path}; `make figures` regenerates the docs' tables")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def missing_piece() -> str | None:
    """What this experiment cannot run without (root, torch, BTF, the BPF toolchain), or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, BPF)"
    if importlib.util.find_spec("torch") is None:
        return f"torch is not installed for {sys.executable} (pip install torch==2.13.0)"
    try:
        build.check_btf()
        if not build.up_to_date():
            build.find_toolchain()
    except KernelMltcpError as exc:
        return f"kernel MLTCP cannot be built or loaded: {exc}"
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mlfc.lab.mltcp.gloo", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="results/kernel-ddp")
    ap.add_argument("--jobs", default="2", help="DDP jobs sharing the bottleneck: 2, 4 or 2,4 (one mix each)")
    ap.add_argument("--cc", default="reno,cubic", help="families, comma-separated: reno, cubic")
    ap.add_argument("--f", help="MLTCP's F (mlfc.policy.mltcp's text form; default: the family's default_params)")
    ap.add_argument("--idle-min", type=float, metavar="S",
                    help="kernel MLTCP's iteration detection: idle seconds that start an iteration (default: "
                    "IterationDetection's)")  # fmt: skip
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=30, help="training steps per run (the first one left out)")
    ap.add_argument("--solo-steps", type=int, default=12, help="steps of each job alone (the ideal)")
    ap.add_argument("--step", type=float, metavar="S",
                    help="a step's time alone (default: 0.5 s for 2 jobs, 0.4 s for 4); the communication share "
                    "stays 0.4 / 0.2")  # fmt: skip
    ap.add_argument("--rate", type=float, default=DEFAULT_RATE_MBPS, help="bottleneck Mbit/s (%(default)g)")
    ap.add_argument("--buffer", type=int, default=DEFAULT_BUFFER, help="bottleneck queue, bytes (%(default)s)")
    ap.add_argument("--mark-threshold", type=int, metavar="BYTES", default=DEFAULT_MARK_THRESHOLD,
                    help="mark CE above this many bytes of the bottleneck's queue (tc/eBPF marker; the ranks ask "
                    "for ECN); 0: no marking, drops are the only signal (default %(default)s)")  # fmt: skip
    ap.add_argument("--keep-loaded", action="store_true", help="leave mltcp_* registered if this run loaded them")
    ap.add_argument("--publish", action="store_true",
                    help="merge the rows into docs/data/mltcp (dataplane real) and docs/data/mltcp-regime")  # fmt: skip
    args = ap.parse_args(argv)
    args.command = " ".join(["python -m mlfc.lab.mltcp.gloo", *(sys.argv[1:] if argv is None else argv)])
    try:
        counts = [int(n) for n in args.jobs.split(",")]
    except ValueError:
        ap.error(f"--jobs {args.jobs!r}: a comma-separated list of 2 and 4")
    if not counts or any(n not in COMM_SHARE for n in counts):
        ap.error(f"--jobs {args.jobs!r}: choose from {', '.join(map(str, COMM_SHARE))}")
    unknown = [f for f in args.cc.split(",") if f and f not in FAMILIES]
    if unknown or not any(args.cc.split(",")):
        ap.error(f"--cc: choose from {', '.join(FAMILIES)}")
    if args.f is not None:
        try:
            rule = parse_params(args.f).rule
        except ValueError as exc:
            ap.error(f"--f: {exc}")
        if rule != "increase":
            ap.error(f"--f {args.f}: kernel MLTCP scales only the additive increase (rule 'increase')")
    for name in ("rounds", "steps", "solo_steps", "buffer"):
        if getattr(args, name) <= 0:
            ap.error(f"--{name.replace('_', '-')} must be positive")
    if args.steps < 2 or args.solo_steps < 2:
        ap.error("--steps and --solo-steps must be at least 2 (the first step is left out)")
    if args.mark_threshold is not None and args.mark_threshold <= 0:
        ap.error("--mark-threshold must be a positive byte count")
    if (why := missing_piece()) is not None:
        print(f"kernel-ddp: {why}", file=sys.stderr)
        return 1
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return experiment(args)
    except (KernelMltcpError, NetnsError) as exc:
        print(f"kernel-ddp: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("kernel-ddp: interrupted; namespaces removed", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
