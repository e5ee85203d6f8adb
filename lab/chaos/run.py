"""One run of the chaos job on the network: the coordinator, the job's processes under a supervisor, the
faults fired at their iterations, the switches watched, and at the end the ledger (lab/chaos/ledger.py)."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from mlfc.coordinator.store import Store, StoreError
from mlfc.hosts.training.launch import TrainingJob
from mlfc.lab.chaos.check import DecisionCheck
from mlfc.lab.chaos.ledger import Ledger, decision_ledger, report_ledger
from mlfc.lab.chaos.processes import JobProcesses, _children, _wait_group_gone, start_job
from mlfc.lab.chaos.records import ack_rows, progress, read_json_lines, worker_records
from mlfc.lab.chaos.schedule import ENTRIES_TARGET_S, JOB, WORKERS, Fault
from mlfc.lab.realjobs import say
from mlfc.lab.stack import Control
from mlfc.launch.daemons import CommandProcess, tool
from mlfc.launch.process import ManagedProcess, free_port
from mlfc.topologies import Topology


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
    ledger: Ledger = field(default_factory=lambda: Ledger([], []))
    ps_summary: dict = field(default_factory=dict)
    unplanned: list[tuple[float, str, int]] = field(default_factory=list)


def read_ledger(db: Path, logs: list[Path], check: DecisionCheck, faults: list[FaultResult]) -> Ledger:
    """The ledger from the agents' ack logs, the coordinator's store (its own read-only API) and the sightings."""
    store = Store(db, readonly=True)
    try:

        def lookup(job: int, worker: int, iteration: int) -> float | None:
            row = store.report(job, worker, iteration)
            return None if row is None else row.recv_time

        reports = report_ledger(ack_rows(logs), lookup, JOB)
        made, after = [], 0
        while page := store.decisions(after=after, limit=1000):
            made += [(d.seq, d.created_at, d.applied_at) for d in page]
            after = page[-1].seq
    finally:
        store.close()
    windows = [(f.killed_at, f.back_at) for f in faults]
    decisions = decision_ledger(made, check.seen, windows, ENTRIES_TARGET_S, check.observed_until)
    return Ledger(reports, decisions, sum(1 for _, _, a in made if not a))


STALE_FILES = ("*.log", "acks-*.jsonl", "ps.ckpt*", "coordinator.db*", "token")


def clear_previous_run(run_dir: Path) -> None:
    """Remove what a previous run of this seed left in ``run_dir``: the processes append to their logs (a
    restarted process keeps its earlier lines), so an old run's records and progress would pass for this
    run's (its faults then fired at once, at the old run's last iteration)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    for pattern in STALE_FILES:
        for stale in run_dir.glob(pattern):
            stale.unlink()


class ChaosRun:
    def __init__(self, ctl: Control, topo: Topology, job: TrainingJob, run_dir: Path, name: str) -> None:
        self.ctl, self.topo, self.job, self.run_dir, self.name = ctl, topo, job, run_dir, name
        clear_previous_run(run_dir)
        self.token = run_dir / "token"
        self.token.write_text(secrets.token_hex(16))
        port = free_port()
        self.coord_addr = f"127.0.0.1:{port}"
        self.db = run_dir / "coordinator.db"
        for stale in (self.db, self.db.with_name(self.db.name + "-wal"), self.db.with_name(self.db.name + "-shm")):
            stale.unlink(missing_ok=True)
        cmd = [
            tool("mlfc-coordinator"),
            "run",
            "--db",
            str(self.db),
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
        res = FaultResult(f)
        say(f"  fault {f.index}: {f.describe()} at iteration {progress(self.run_dir) + 1} (for {f.outage_s:.2f} s)")
        if f.action == "down":
            self._link_down(f, res)
        elif f.component in ("switch", "controller", "coordinator"):
            daemon = {"controller": self.ctl.controller, "coordinator": self.coordinator}.get(f.component)
            self._daemon_fault(f, res, daemon or self.ctl.switches[f.target])
        else:
            self._job_fault(f, res)
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

    def _link_down(self, f: Fault, res: FaultResult) -> None:
        a, b = f.target.split("-")
        net = self.ctl.net
        res.killed_at = time.time()
        net.configLinkStatus(a, b, "down")  # type: ignore[attr-defined]
        time.sleep(f.outage_s)
        net.configLinkStatus(a, b, "up")  # type: ignore[attr-defined]

    def _daemon_fault(self, f: Fault, res: FaultResult, daemon: ManagedProcess) -> None:
        """A switch, the controller or the coordinator: killed and restarted, or frozen and let go on."""
        res.killed_at = time.time()
        if f.action == "stop":
            daemon.pause()
            time.sleep(f.outage_s)
            daemon.resume()
            return
        daemon.kill()
        time.sleep(f.outage_s)
        daemon.start(timeout=60 if f.component == "controller" else 30)

    def _job_fault(self, f: Fault, res: FaultResult) -> None:
        """The PS, rank 0's agent (alone) or rank 1's worker (alone, under its agent)."""
        assert self.procs is not None
        p = {"ps": self.procs.ps, "agent": self.procs.agents[0], "worker": self.procs.agents[1]}[f.component]
        with self.lock:
            self.busy.add(p.name)
        try:
            assert p.proc is not None
            if f.component == "ps":
                pids, group = [p.proc.pid], True
            elif f.component == "agent":  # killed, its worker dies at its next line (broken pipe)
                pids, group = [p.proc.pid], False
            else:  # killed, its agent flushes and exits with the worker's status
                pids, group = _children(p.proc.pid), False
                if not pids:
                    res.note = "worker process not found"

            def send(sig: signal.Signals) -> None:
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError):
                        (os.killpg if group else os.kill)(pid, sig)

            res.killed_at = time.time()
            if f.action == "stop":
                send(signal.SIGSTOP)
                time.sleep(f.outage_s)
                send(signal.SIGCONT)
                return
            send(signal.SIGKILL)
            _wait_group_gone(p.proc, 15)
            with contextlib.suppress(Exception):
                p.proc.wait(timeout=5)
            time.sleep(f.outage_s)
            p.start()
        finally:
            with self.lock:
                self.busy.discard(p.name)

    # -- the whole run --------------------------------------------------------------------------------------

    def run(self, faults: list[Fault], timeout: float) -> RunResult:
        t0 = time.time()
        errors: list[str] = []
        results: list[FaultResult] = []
        stop = threading.Event()
        (self.run_dir / "ps.ckpt").unlink(missing_ok=True)
        self.coordinator.start(timeout=30)
        check = DecisionCheck(self.ctl, self.coord_addr, self.token)
        threads: list[threading.Thread] = []
        try:
            self.procs = start_job(self.ctl, self.topo, self.job, self.coord_addr, self.token, self.run_dir)
            threads = [
                threading.Thread(target=self._supervise, args=(stop,), daemon=True, name="chaos-supervisor"),
                threading.Thread(target=check.watch, args=(stop,), daemon=True, name="chaos-decisions"),
            ]
            for t in threads:
                t.start()
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
            for t in threads:
                t.join(timeout=15)
            if self.procs is not None:
                for p in self.procs.all():
                    p.kill()
        # a last look at the switches (the coordinator still up): decisions of the run's last second
        _, last = check.converge(timeout=5.0)
        if last is not None:
            errors.append(f"after the run the switches do not hold the latest decision: {last}")
        self.coordinator.stop()
        records = worker_records(self.run_dir)
        completed = all(
            self.job.iterations - 1 in {r["iteration"] for r in records if r["worker"] == w} for w in range(WORKERS)
        )
        res = RunResult(self.name, records, results, completed, errors, time.time() - t0)
        assert self.procs is not None
        res.unplanned = list(self.procs.unplanned)
        try:
            res.ledger = read_ledger(self.db, self.procs.ack_logs, check, results)
        except (StoreError, sqlite3.Error, OSError) as exc:
            errors.append(f"the coordinator's store could not be read: {exc}")
        summaries = [r for r in read_json_lines(self.run_dir / "ps.log") if r.get("summary")]
        res.ps_summary = summaries[-1] if summaries else {}
        return res
