"""`make chaos`: real training while a seeded schedule kills -9 and restarts every component in turn.

    python -m mlfc.lab.chaos --seed N [--faults 10] [--iterations 150] [--dataplane ref|bmv2|auto]
                             [--out results/chaos] [--no-baseline]

One real PyTorch job (digits, a PS and two workers, lossless pushes) on the dumbbell (two switches, the
bottleneck between them) with the whole stack: switches, `mlfc-controller` (with its state file),
`mlfc-coordinator` deciding MAIF priorities for the controller, one `mlfc-agent` per worker. First an
undisturbed run of the same job, then the chaos run: before each fault the schedule waits until the job
reached the fault's iteration and the previous fault has recovered, then kills -9 one component and
restarts it after a short outage, cycling through

    switch (s1 or s2) · controller · coordinator · agent (rank 0's, which registered the job) · PS · worker (rank 1)

in a seeded random order per cycle. The PS checkpoints every iteration and resumes from it; the workers
re-join it at its current iteration; a killed agent takes its worker with it (the worker's stdout is the
agent's pipe) and the supervisor here restarts the pair, rank 0's with ``--replace`` (a new agent instance
takes the job over, its history kept). Measured and printed per fault: the outage, the training stall
(the iteration that spans the kill), iteration time before/after, and the time from the component being
back until both switches hold exactly the entries of the coordinator's latest decision (read back as a
backup P4Runtime client, compared with the controller's compiler's output). At the end: training
completed, no report the coordinator acknowledged to an agent is missing from it (agents' --ack-log vs
ListJobs), and the final accuracy against the undisturbed run's.

Output in OUT/<dataplane>/seed<N>/: summary.md, faults.csv, iterations.csv, iterations.png, logs.
The seed is printed first: ``--seed N`` replays the same schedule.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import itertools
import json
import logging
import os
import random
import secrets
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mlfc import contract
from mlfc.controller.compile import compile_intent, compile_policy
from mlfc.controller.pipeline import Pipeline
from mlfc.controller.reconcile import diff
from mlfc.controller.sync import SwitchConnection
from mlfc.controller.validate import default_policy
from mlfc.coordinator.client import CoordinatorClient
from mlfc.hosts.training.launch import TrainingJob, ps_argv, worker_argv
from mlfc.lab import dataplanes
from mlfc.lab.cleanup import leftovers
from mlfc.lab.jobs import JobSpec, agent_argv
from mlfc.lab.realjobs import say, training_spec
from mlfc.lab.stack import Control, StackConfig, StackError, network_with_control
from mlfc.lab.validity import BottleneckNotCarried
from mlfc.launch.daemons import CommandProcess, tool
from mlfc.launch.process import ManagedProcess, free_port
from mlfc.proto import intent_pb2 as ipb
from mlfc.topologies import Topology, job_dumbbell

COMPONENTS = ("switch", "controller", "coordinator", "agent", "ps", "worker")
JOB = 1
WORKERS = 2
ENTRIES_TARGET_S = 1.0  # the switches hold the latest decision within this of a recovery (issue 16)
ACCURACY_TARGET_PP = 0.5


@dataclass(frozen=True)
class Fault:
    index: int
    component: str  # one of COMPONENTS
    target: str  # s1, s2, controller, coordinator, agent0, ps, worker1
    at_iteration: int  # fire once the job reached this iteration (and the previous fault recovered)
    outage_s: float  # seconds between the kill and the restart


def chaos_topology() -> Topology:
    """The dumbbell of one job under names of its own (mlfc.topologies.job_dumbbell): ``ks1``, ``kj1w0``."""
    return job_dumbbell(JOB, WORKERS, "k")


def schedule(seed: int, faults: int, iterations: int, switches: list[str]) -> list[Fault]:
    """``faults`` faults cycling through every component (a fresh random order each cycle), spread over the
    middle of the run (from 10 % to 80 % of the iterations) so that each has iterations before and after."""
    if faults < 1:
        raise ValueError("--faults must be >= 1")
    rng = random.Random(seed)
    first, last = max(3, iterations // 10), int(iterations * 0.8)
    if last - first < 2 * faults:
        raise ValueError(
            f"{iterations} iterations are too few for {faults} faults (need {2 * faults} between "
            f"iteration {first} and {last}): give more --iterations"
        )
    span = (last - first) / faults
    order: list[str] = []
    out = []
    for i in range(faults):
        if not order:
            order = list(COMPONENTS)
            rng.shuffle(order)
        kind = order.pop(0)
        target = {"switch": rng.choice(switches), "agent": "agent0", "worker": "worker1"}.get(kind, kind)
        at = int(first + i * span + rng.uniform(0, span / 2))
        out.append(Fault(i + 1, kind, target, at, round(rng.uniform(0.2, 2.0), 2)))
    return out


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


# ---- what the processes printed -------------------------------------------------------------------------


def read_json_lines(path: Path) -> list[dict]:
    out = []
    with contextlib.suppress(OSError):
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                with contextlib.suppress(ValueError):
                    row = json.loads(line)
                    if isinstance(row, dict):
                        out.append(row)
    return out


def worker_records(run_dir: Path) -> list[dict]:
    return [
        r
        for w in range(WORKERS)
        for r in read_json_lines(run_dir / f"w{w}.log")
        if "iteration" in r and not r.get("summary") and not r.get("ps")
    ]


def iteration_ends(records: list[dict]) -> dict[int, float]:
    """Iteration -> when the last worker finished it (the job is synchronous)."""
    ends: dict[int, float] = {}
    for r in records:
        ends[r["iteration"]] = max(r["end"], ends.get(r["iteration"], 0.0))
    return ends


def progress(run_dir: Path) -> int:
    """The highest iteration every worker has finished (-1 before the first)."""
    last = [-1] * WORKERS
    for r in worker_records(run_dir):
        last[r["worker"]] = max(last[r["worker"]], r["iteration"])
    return min(last)


def final_accuracy(records: list[dict]) -> tuple[int, float] | None:
    accs = [(r["iteration"], r["accuracy"]) for r in records if r.get("worker") == 0 and "accuracy" in r]
    return max(accs) if accs else None


# ---- the switches against the latest decision ---------------------------------------------------------


class DecisionCheck:
    """Do the switches hold exactly the entries of the coordinator's latest decision? (The controller's own
    compiler gives the entries; the switches are read as a backup client, election id 1.)"""

    def __init__(self, ctl: Control, coord_addr: str, token: Path) -> None:
        self.ctl = ctl
        self.config = ctl.controller.config
        self.pipeline = Pipeline.load(contract.P4INFO, contract.BMV2_JSON)
        self.coord_addr, self.token = coord_addr, token
        self.latest: ipb.Intent | None = None
        self.latest_seq = 0

    def _refresh(self) -> None:
        with contextlib.suppress(Exception), CoordinatorClient(self.coord_addr, token_file=self.token) as c:
            while page := c.decisions(after=self.latest_seq, limit=1000):
                self.latest_seq, self.latest = page[-1].seq, page[-1].intent

    def expected(self) -> dict[str, tuple]:
        if self.latest is None:
            return dict(compile_policy(default_policy(self.config), self.config).entries)
        return dict(compile_intent(self.latest, self.config).entries)

    def mismatch(self) -> str | None:
        """None when every switch holds exactly the expected entries, else what differs."""
        self._refresh()
        want = self.expected()
        for sw in self.config.switches:
            try:
                with SwitchConnection(
                    sw.grpc_addr, sw.device_id, pipeline=self.pipeline, election_id=1, timeout_s=2.0
                ).connect() as conn:
                    d = diff(want[sw.name], conn.read_entries())
            except Exception as exc:  # down or not serving yet
                return f"{sw.name}: {type(exc).__name__}"
            if not d.empty:
                return f"{sw.name}: {d.summary()}"
        return None

    def converge(self, timeout: float = 15.0) -> tuple[float, str | None]:
        """Seconds until the switches matched (from now), and the last mismatch if they never did."""
        t0 = time.monotonic()
        last = None
        while time.monotonic() - t0 < timeout:
            last = self.mismatch()
            if last is None:
                return time.monotonic() - t0, None
            time.sleep(0.05)
        return float("nan"), last


# ---- the run --------------------------------------------------------------------------------------------


@dataclass
class FaultResult:
    fault: Fault
    killed_at: float = 0.0
    back_at: float = 0.0  # the restarted process is up (daemons: serving)
    entries_s: float = float("nan")  # from back_at until the switches held the latest decision
    entries_error: str | None = None
    note: str = ""

    @property
    def outage_s(self) -> float:
        return self.back_at - self.killed_at


@dataclass
class RunResult:
    name: str
    records: list[dict]
    faults: list[FaultResult]
    completed: bool
    errors: list[str]
    seconds: float
    acked: dict[int, set[int]] = field(default_factory=dict)  # worker -> iterations the coordinator acknowledged
    committed: dict[int, tuple[int, int]] = field(default_factory=dict)  # worker -> (reports, last iteration)
    ps_summary: dict = field(default_factory=dict)
    unplanned: list[tuple[float, str, int]] = field(default_factory=list)

    def lost_acked(self) -> dict[int, int]:
        """Per worker: acknowledged reports the coordinator does not hold (by count, from ListJobs)."""
        return {w: max(0, len(a) - self.committed.get(w, (0, -1))[0]) for w, a in self.acked.items()}


class ChaosRun:
    def __init__(self, ctl: Control, topo: Topology, job: TrainingJob, run_dir: Path, name: str) -> None:
        self.ctl, self.topo, self.job, self.run_dir, self.name = ctl, topo, job, run_dir, name
        run_dir.mkdir(parents=True, exist_ok=True)
        self.token = run_dir / "token"
        self.token.write_text(secrets.token_hex(16))
        port = free_port()
        self.coord_addr = f"127.0.0.1:{port}"
        db = run_dir / "coordinator.db"
        for stale in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
            stale.unlink(missing_ok=True)
        cmd = [
            tool("mlfc-coordinator"),
            "run",
            "--db",
            str(db),
            "--listen",
            self.coord_addr,
            "--token-file",
            str(self.token),
            "--silence",
            "600",
            "--controller",
            ctl.intent_addr,
        ]
        self.coordinator = CommandProcess("coordinator", cmd, run_dir / "coordinator.log", ports=[port])
        self.lock = threading.Lock()
        self.busy: set[str] = set()  # components a fault is handling (the supervisor leaves them alone)
        self.procs: JobProcesses | None = None

    # -- supervision ----------------------------------------------------------------------------------

    def _supervise(self, stop: threading.Event) -> None:
        """Restart a job process that exited non-zero without a fault of ours (a real supervisor's job)."""
        assert self.procs is not None
        while not stop.wait(0.2):
            for p in self.procs.all():
                with self.lock:
                    if p.name in self.busy or p.name in self.procs.done or p.proc is None:
                        continue
                    rc = p.proc.poll()
                    if rc is None:
                        continue
                    if rc == 0:
                        self.procs.done.add(p.name)
                        continue
                    self.procs.failed[p.name] = rc
                    self.procs.unplanned.append((time.time(), p.name, rc))
                    say(f"  supervisor: {p.name} exited {rc}; restarting it")
                    _wait_group_gone(p.proc, 10)
                    p.start()

    # -- faults -----------------------------------------------------------------------------------------

    def inject(self, f: Fault, check: DecisionCheck) -> FaultResult:
        assert self.procs is not None
        res = FaultResult(f)
        ctl = self.ctl
        say(
            f"  fault {f.index}: kill -9 {f.target} at iteration {progress(self.run_dir) + 1} (down {f.outage_s:.2f} s)"
        )
        if f.component == "switch":
            sw = ctl.switches[f.target]
            res.killed_at = time.time()
            sw.kill()
            time.sleep(f.outage_s)
            sw.start(timeout=30)
        elif f.component == "controller":
            res.killed_at = time.time()
            ctl.controller.kill()
            time.sleep(f.outage_s)
            ctl.controller.start(timeout=60)
        elif f.component == "coordinator":
            res.killed_at = time.time()
            self.coordinator.kill()
            time.sleep(f.outage_s)
            self.coordinator.start(timeout=30)
        else:
            p = {"ps": self.procs.ps, "agent": self.procs.agents[0], "worker": self.procs.agents[1]}[f.component]
            with self.lock:
                self.busy.add(p.name)
            try:
                assert p.proc is not None
                res.killed_at = time.time()
                if f.component == "ps":
                    os.killpg(p.proc.pid, signal.SIGKILL)
                elif f.component == "agent":  # the agent alone: its worker dies at its next line (broken pipe)
                    os.kill(p.proc.pid, signal.SIGKILL)
                else:  # the worker alone: its agent flushes, exits with the worker's status
                    kids = _children(p.proc.pid)
                    if not kids:
                        res.note = "worker process not found"
                    for k in kids:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(k, signal.SIGKILL)
                _wait_group_gone(p.proc, 15)
                with contextlib.suppress(Exception):
                    p.proc.wait(timeout=5)
                time.sleep(f.outage_s)
                p.start()
            finally:
                with self.lock:
                    self.busy.discard(p.name)
        res.back_at = time.time()
        res.entries_s, res.entries_error = check.converge()
        if res.entries_error is not None:
            state = f"NOT CONVERGED: {res.entries_error}"
        else:
            state = "ok" if res.entries_s <= ENTRIES_TARGET_S else f"over the {ENTRIES_TARGET_S:g} s target"
        say(
            f"    back after {res.outage_s:.2f} s; switches hold the latest decision "
            f"{res.entries_s:.2f} s later ({state})"
        )
        return res

    # -- the whole run --------------------------------------------------------------------------------------

    def run(self, faults: list[Fault], timeout: float) -> RunResult:
        t0 = time.time()
        errors: list[str] = []
        results: list[FaultResult] = []
        stop = threading.Event()
        (self.run_dir / "ps.ckpt").unlink(missing_ok=True)
        self.coordinator.start(timeout=30)
        check = DecisionCheck(self.ctl, self.coord_addr, self.token)
        sup = None
        try:
            self.procs = start_job(self.ctl, self.topo, self.job, self.coord_addr, self.token, self.run_dir)
            sup = threading.Thread(target=self._supervise, args=(stop,), daemon=True, name="chaos-supervisor")
            sup.start()
            deadline = time.monotonic() + timeout
            pending = list(faults)
            last_print = 0.0
            while len(self.procs.done) < len(self.procs.all()):
                if time.monotonic() > deadline:
                    errors.append(f"the job did not finish within {timeout:.0f} s")
                    break
                it = progress(self.run_dir)
                if pending and it + 1 >= pending[0].at_iteration:
                    results.append(self.inject(pending.pop(0), check))
                    continue
                if time.monotonic() - last_print > 5:
                    last_print = time.monotonic()
                    say(f"  [{self.name}] {time.time() - t0:6.1f} s  iteration {it + 1}/{self.job.iterations}")
                self.coordinator.check()
                time.sleep(0.1)
            if pending:
                errors.append(
                    f"{len(pending)} fault(s) never fired: the job ended at iteration {progress(self.run_dir)}"
                )
        finally:
            stop.set()
            if sup is not None:
                sup.join(timeout=15)
            if self.procs is not None:
                for p in self.procs.all():
                    p.kill()
        records = worker_records(self.run_dir)
        done = {r["iteration"] for r in records if r["worker"] == 0}
        completed = self.job.iterations - 1 in done and all(
            self.job.iterations - 1 in {r["iteration"] for r in records if r["worker"] == w} for w in range(WORKERS)
        )
        res = RunResult(self.name, records, results, completed, errors, time.time() - t0)
        assert self.procs is not None
        res.unplanned = list(self.procs.unplanned)
        res.acked = acked_reports(self.procs.ack_logs)
        try:
            with CoordinatorClient(self.coord_addr, token_file=self.token) as c:
                for j in c.jobs():
                    if j.job_id == JOB:
                        res.committed = {w.rank: (w.reports, w.last_iteration) for w in j.workers}
        except Exception as exc:
            errors.append(f"coordinator ListJobs failed: {exc}")
        finally:
            self.coordinator.stop()
        summaries = [r for r in read_json_lines(self.run_dir / "ps.log") if r.get("summary")]
        res.ps_summary = summaries[-1] if summaries else {}
        return res


def acked_reports(logs: list[Path]) -> dict[int, set[int]]:
    """Worker -> iterations whose reports the coordinator acknowledged as committed (every agent incarnation)."""
    out: dict[int, set[int]] = {w: set() for w in range(len(logs))}
    for path in logs:
        for row in read_json_lines(path):
            if row.get("committed"):
                for w, it in row["reports"]:
                    out.setdefault(w, set()).add(it)
    return out


# ---- analysis ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FaultRow:
    index: int
    target: str
    iteration: int  # the first iteration not finished when the component was killed
    outage_s: float
    stall_s: float  # the slowest of the 3 iterations after the kill (the job standing still)
    before_ms: float  # median iteration time of the 5 iterations before the kill
    after_ms: float  # ... of 5 iterations after those 3
    entries_s: float
    entries_ok: bool
    missing_iterations: int  # iterations the job went through without a worker record (a PS resumed past them)


def fault_rows(run: RunResult) -> list[FaultRow]:
    ends = iteration_ends(run.records)
    its = sorted(ends)
    rows = []
    for fr in run.faults:
        before = [i for i in its if ends[i] <= fr.killed_at]
        after = [i for i in its if ends[i] > fr.killed_at]
        if not before or not after:
            continue
        last, first = before[-1], after[0]
        # the slowest of the (up to) 3 iterations after the kill: how long the job stood still
        nxt = [last, *after[:3]]
        stall = max(ends[i] - ends[p] for p, i in itertools.pairwise(nxt))

        def durations(seq: list[int]) -> list[float]:
            return [ends[i] - ends[p] for p, i in itertools.pairwise(seq) if i == p + 1]

        pre = durations(before[-6:])
        post = durations(after[3:9])
        rows.append(
            FaultRow(
                fr.fault.index,
                fr.fault.target,
                last + 1,
                fr.outage_s,
                stall,
                1000 * statistics.median(pre) if pre else float("nan"),
                1000 * statistics.median(post) if post else float("nan"),
                fr.entries_s,
                fr.entries_error is None and fr.entries_s <= ENTRIES_TARGET_S,
                first - last - 1,
            )
        )
    return rows


def summary_text(
    seed: int, plane: str, faults: list[Fault], run: RunResult, base: RunResult | None, rows: list[FaultRow]
) -> str:
    acc = final_accuracy(run.records)
    base_acc = final_accuracy(base.records) if base is not None else None
    lines = [f"## chaos, seed {seed}, {plane}", ""]
    lines.append(
        f"Job: digits, {WORKERS} workers, {run_iterations(run)} iterations, lossless; {len(faults)} faults "
        f"scheduled, {len(run.faults)} fired; run took {run.seconds:.0f} s"
        + (f" (undisturbed {base.seconds:.0f} s)" if base else "")
        + "."
    )
    lines += [
        "",
        "| # | killed | at iteration | down s | longest iteration after, s | iteration ms before | after | "
        "switches = latest decision after s | ≤ 1 s | iterations without record |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.index} | {r.target} | {r.iteration} | {r.outage_s:.2f} | {r.stall_s:.2f} | "
            f"{r.before_ms:.0f} | {r.after_ms:.0f} | {r.entries_s:.2f} | {'yes' if r.entries_ok else 'NO'} | "
            f"{r.missing_iterations} |"
        )
    lost = run.lost_acked()
    lines += [""]
    lines.append(
        f"* training completed: **{'yes' if run.completed else 'NO'}**"
        + ("" if not run.errors else f" ({'; '.join(run.errors)})")
    )
    for w in sorted(run.acked):
        rep, last = run.committed.get(w, (0, -1))
        lines.append(
            f"* worker {w}: {len(run.acked[w])} reports acknowledged to its agents, {rep} committed at the "
            f"coordinator (last iteration {last}); acknowledged but missing: **{lost.get(w, 0)}**"
        )
    if acc is not None:
        txt = f"* final accuracy (iteration {acc[0]}): **{acc[1]:.4f}**"
        if base_acc is not None:
            dpp = 100 * (acc[1] - base_acc[1])
            ok = abs(dpp) <= ACCURACY_TARGET_PP
            txt += f", undisturbed run {base_acc[1]:.4f}: {dpp:+.2f} pp ({'within' if ok else 'NOT within'} 0.5 pp)"
        lines.append(txt)
    ok_entries = sum(r.entries_ok for r in rows)
    lines.append(
        f"* switches equal to the latest decision within {ENTRIES_TARGET_S:g} s of the recovery: "
        f"{ok_entries}/{len(rows)} faults"
    )
    if run.unplanned:
        lines.append(
            "* restarts the supervisor made after exits no fault caused: "
            + ", ".join(f"{n} (status {rc})" for _, n, rc in run.unplanned)
        )
    if run.ps_summary:
        s = run.ps_summary
        lines.append(
            f"* PS (last incarnation): {s.get('rejoins', 0)} worker re-joins, {s.get('pull_failures', 0)} "
            f"failed pulls, {s.get('stray', 0)} stray deliveries"
        )
    return "\n".join(lines) + "\n"


def run_iterations(run: RunResult) -> int:
    return 1 + max((r["iteration"] for r in run.records), default=-1)


def write_outputs(out: Path, run: RunResult, rows: list[FaultRow], text: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.md").write_text(text)
    with (out / "faults.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            [
                "index",
                "target",
                "iteration",
                "outage_s",
                "stall_s",
                "before_ms",
                "after_ms",
                "entries_s",
                "entries_ok",
                "missing_iterations",
            ]
        )
        for r in rows:
            w.writerow(
                [
                    r.index,
                    r.target,
                    r.iteration,
                    f"{r.outage_s:.3f}",
                    f"{r.stall_s:.3f}",
                    f"{r.before_ms:.1f}",
                    f"{r.after_ms:.1f}",
                    f"{r.entries_s:.3f}",
                    int(r.entries_ok),
                    r.missing_iterations,
                ]
            )
    keys = ["worker", "iteration", "start", "end", "compute_s", "comm_s", "accuracy"]
    with (out / "iterations.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(keys)
        for r in sorted(run.records, key=lambda r: (r["worker"], r["iteration"])):
            w.writerow([r.get(k, "") for k in keys])
    plot(out / "iterations.png", run)


def plot(path: Path, run: RunResult) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ends = iteration_ends(run.records)
    its = sorted(ends)
    if len(its) < 2:
        return
    t0 = ends[its[0]]
    xs = [ends[i] - t0 for i in its[1:]]
    ys = [ends[i] - ends[p] for p, i in itertools.pairwise(its)]
    fig, ax = plt.subplots(figsize=(10, 4))
    ax.plot(xs, ys, ".-", lw=0.8, ms=3, label="iteration time (all workers)")
    for fr in run.faults:
        ax.axvline(fr.killed_at - t0, color="red", lw=0.8, alpha=0.6)
        ax.text(fr.killed_at - t0, max(ys) * 0.95, fr.fault.target, rotation=90, fontsize=7, va="top", color="red")
    ax.set_yscale("log")
    ax.set_xlabel("seconds")
    ax.set_ylabel("seconds per iteration")
    ax.set_title(f"{run.name}: iteration time, kills in red")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---- entry point -------------------------------------------------------------------------------------------


def chaos_job(iterations: int, checkpoint: Path, eval_every: int) -> TrainingJob:
    spec: JobSpec = training_spec(JOB, compute_s=0.0, workers=WORKERS, eval_every=eval_every)
    t = spec.training
    assert t is not None
    # peer timeout above the longest outage plus a restart (a switch takes ~2 s to come back); the PS
    # waits long enough for a restarted worker to import torch on a loaded machine
    return TrainingJob(
        job=JOB,
        workers=WORKERS,
        iterations=iterations,
        task=t.task,
        width=t.width,
        lr=t.lr,
        eval_every=eval_every,
        loss_bound=0.0,
        timeout=120.0,
        peer_timeout=20.0,
        checkpoint=str(checkpoint),
    )


@dataclass
class Outcome:
    seed: int
    faults: list[Fault]
    run: RunResult
    base: RunResult | None
    rows: list[FaultRow]
    text: str
    out: Path

    def accuracy_delta_pp(self) -> float | None:
        acc = final_accuracy(self.run.records)
        bacc = final_accuracy(self.base.records) if self.base is not None else None
        return None if acc is None or bacc is None else 100 * (acc[1] - bacc[1])

    @property
    def ok(self) -> bool:
        """Every target met: completed, every fault fired and measured, nothing acknowledged lost, the
        switches back on the latest decision within 1 s each time, accuracy within 0.5 pp (with a baseline)."""
        delta = self.accuracy_delta_pp()
        return (
            self.run.completed
            and len(self.rows) == len(self.faults)
            and not any(self.run.lost_acked().values())
            and all(r.entries_ok for r in self.rows)
            and (delta is None or abs(delta) <= ACCURACY_TARGET_PP)
        )


def run_chaos(
    seed: int,
    n_faults: int,
    iterations: int,
    plane: dataplanes.Dataplane,
    out_root: Path,
    *,
    baseline: bool = True,
    eval_every: int = 5,
    bottleneck_pps: int = 1500,
    check_bottleneck: bool = True,
    timeout: float = 1200.0,
) -> Outcome:
    """The undisturbed run (if ``baseline``) and the chaos run on one network; writes OUT/<plane>/seed<N>/."""
    topo = chaos_topology()
    faults = schedule(seed, n_faults, iterations, sorted(topo.switches))
    for f in faults:
        say(f"  scheduled {f.index:2d}: {f.target:<11} at iteration {f.at_iteration:4d}, down {f.outage_s:.2f} s")
    out = out_root.resolve() / plane.name / f"seed{seed}"  # the deployment file names paths relative to itself
    cfg = StackConfig(
        "chaos",
        jobs=(),
        iterations=iterations,
        priorities="maif",
        bottleneck_pps=bottleneck_pps,
        check_bottleneck=check_bottleneck,
    )
    preexisting = set(leftovers())
    base = None
    try:
        with network_with_control(topo, cfg, out / "stack", plane) as ctl:
            if baseline:
                say("undisturbed run")
                d = out / "undisturbed"
                base = ChaosRun(ctl, topo, chaos_job(iterations, d / "ps.ckpt", eval_every), d, "undisturbed").run(
                    [], timeout
                )
                if not base.completed:
                    say(f"the undisturbed run did not complete: {base.errors}")
            say(f"chaos run: {len(faults)} faults")
            d = out / "chaos"
            run = ChaosRun(ctl, topo, chaos_job(iterations, d / "ps.ckpt", eval_every), d, "chaos").run(faults, timeout)
    finally:
        ours = ("ks1-", "ks2-", f"kj{JOB}", str(out))  # other experiments on this machine come and go meanwhile
        stray = [x for x in set(leftovers()) - preexisting if any(o in x for o in ours)]
        if stray:
            say(f"left behind: {sorted(stray)}")
    rows = fault_rows(run)
    text = summary_text(seed, dataplanes.describe(plane), faults, run, base, rows)
    write_outputs(out, run, rows, text)
    return Outcome(seed, faults, run, base, rows, text, out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=None, help="the schedule's seed (default: a random one, printed)")
    ap.add_argument("--faults", type=int, default=10)
    ap.add_argument("--iterations", type=int, default=150)
    ap.add_argument("--eval-every", type=int, default=5)
    ap.add_argument("--dataplane", default="ref", choices=("auto", "bmv2", "ref"))
    ap.add_argument("--bottleneck-pps", type=int, default=1500)
    ap.add_argument("--no-baseline", action="store_true", help="skip the undisturbed run")
    ap.add_argument("--timeout", type=float, default=1200.0, help="seconds per run")
    ap.add_argument("--out", type=Path, default=Path("results/chaos"))
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    logging.getLogger("finsy").setLevel(logging.CRITICAL)  # the backup reads' "gNMI is not implemented" etc.
    seed = args.seed if args.seed is not None else secrets.randbelow(1 << 31)
    print(
        f"chaos seed {seed} (replay: python -m mlfc.lab.chaos --seed {seed} --faults {args.faults} "
        f"--iterations {args.iterations} --dataplane {args.dataplane})",
        flush=True,
    )
    if os.geteuid() != 0:
        print("make chaos needs root (Mininet)", file=sys.stderr)
        return 2
    try:
        plane = dataplanes.select(args.dataplane)[0]
    except dataplanes.DataplaneMissing as exc:
        print(f"cannot run: {exc}", file=sys.stderr)
        return 2
    try:
        outcome = run_chaos(
            seed,
            args.faults,
            args.iterations,
            plane,
            args.out,
            baseline=not args.no_baseline,
            eval_every=args.eval_every,
            bottleneck_pps=args.bottleneck_pps,
            timeout=args.timeout,
        )
    except ValueError as exc:
        print(f"chaos: {exc}", file=sys.stderr)
        return 2
    except (StackError, BottleneckNotCarried) as exc:
        print(f"chaos: {exc}", file=sys.stderr)
        return 1
    print(outcome.text)
    print(f"written to {outcome.out}/")
    return 0 if outcome.ok else 1


if __name__ == "__main__":
    sys.exit(main())
