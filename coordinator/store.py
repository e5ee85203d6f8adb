"""SQLite persistence of the coordinator: jobs, per-iteration reports and decisions.

WAL journal with ``synchronous=FULL``: every commit is fsynced before the RPC that caused it is
acknowledged, so neither a ``kill -9`` of the coordinator nor a power loss drops an acknowledged report
(``NORMAL`` would survive ``kill -9`` too but may lose the last commits on power loss; reports are
batched, so FULL costs one fsync per batch, see bench/coordinator_bench.py). All writes go through one
connection guarded by the engine's lock; readers (``mlfc-coordinator explain --db``) may open the file
concurrently.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

SCHEMA_VERSION = 1
DECISIONS_KEPT = 10_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    job_id INTEGER PRIMARY KEY,
    spec BLOB NOT NULL,            -- serialized mlfc.coordinator.v1.JobSpec
    instance TEXT NOT NULL,        -- agent instance that registered it
    state TEXT NOT NULL,           -- active, finished, silent
    reason TEXT NOT NULL DEFAULT '',
    registered_at REAL NOT NULL,
    changed_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS reports (
    job_id INTEGER NOT NULL,
    worker INTEGER NOT NULL,
    iteration INTEGER NOT NULL,
    metric REAL,                   -- NULL: timing-only report
    compute_s REAL NOT NULL,
    comm_s REAL NOT NULL,
    bytes INTEGER NOT NULL,
    agent_time REAL NOT NULL,
    recv_time REAL NOT NULL,       -- unix time received; the rows of one batch 1 us apart, in its order
    PRIMARY KEY (job_id, worker, iteration)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS decisions (
    seq INTEGER PRIMARY KEY,
    created_at REAL NOT NULL,
    intent BLOB NOT NULL,          -- serialized mlfc.intent.v1.Intent sent to the controller
    memory TEXT NOT NULL,          -- JSON: ranks/classes/windows the ranker remembers (hysteresis)
    applied_at REAL,               -- NULL until the controller acknowledged it
    generation INTEGER
);
"""


class ReportRow(NamedTuple):
    """One committed report, a row of ``reports``."""

    job_id: int
    worker: int
    iteration: int
    metric: float | None  # None: timing-only report
    compute_s: float
    comm_s: float
    bytes: int
    agent_time: float
    recv_time: float

    def same_values(self, other: ReportRow) -> bool:
        """An identical re-send (after a lost acknowledgement): the same metric, times and bytes."""
        return (self.metric, self.compute_s, self.comm_s, self.bytes) == (
            other.metric,
            other.compute_s,
            other.comm_s,
            other.bytes,
        )


@dataclass(frozen=True, slots=True)
class WorkerRow:
    """What the reports table says of one worker."""

    worker: int
    last_iteration: int  # of its latest report (received last)
    highest_iteration: int
    reports: int


@dataclass(frozen=True, slots=True)
class JobRow:
    job_id: int
    spec: bytes
    instance: str
    state: str
    reason: str
    registered_at: float
    changed_at: float


@dataclass(frozen=True, slots=True)
class DecisionRow:
    seq: int
    created_at: float
    intent: bytes
    memory: str
    applied_at: float | None
    generation: int | None


class StoreError(RuntimeError):
    pass


MEMORY = ":memory:"  # SQLite's in-memory database: no journal to choose, nothing survives the process


class Store:
    def __init__(self, path: str | Path, synchronous: str = "FULL", readonly: bool = False) -> None:
        synchronous = synchronous.upper()
        if synchronous not in ("FULL", "NORMAL"):
            raise StoreError(f"synchronous={synchronous!r} must be FULL or NORMAL")
        self.path = str(path)
        if readonly:
            if not Path(self.path).exists():
                raise StoreError(f"database {self.path} does not exist")
            uri = f"file:{Path(self.path).resolve()}?mode=ro"
            self._db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        else:
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            # WAL: a commit is one append to the -wal file, a kill -9 mid-write leaves the last commit's
            # frames uncommitted and the next open ignores them; readers do not block the writer. SQLite
            # answers with the mode it got (a file system without shared memory stays in "delete"): check.
            mode = self._db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal" and self.path != MEMORY:  # in memory (the simulator's): nothing to keep
                raise StoreError(f"{self.path}: SQLite refused the WAL journal (journal_mode is {mode!r})")
            # FULL (default): fsync at every commit, before the report's RPC is acknowledged (module doc).
            self._db.execute(f"PRAGMA synchronous={synchronous}")
            self._db.executescript(_SCHEMA)
            row = self._db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            if row is None:
                self._db.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            elif int(row[0]) != SCHEMA_VERSION:
                raise StoreError(f"{self.path}: schema version {row[0]}, this coordinator needs {SCHEMA_VERSION}")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._lock = threading.RLock()  # the sqlite3 connection is shared between gRPC threads

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def durability(self) -> tuple[str, str]:
        """The connection's (journal mode, synchronous setting) as SQLite reports them: ("wal", "FULL")."""
        with self._lock:
            mode = str(self._db.execute("PRAGMA journal_mode").fetchone()[0]).lower()
            level = int(self._db.execute("PRAGMA synchronous").fetchone()[0])
        return mode, {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(level, str(level))

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic, durable write: either everything inside commits or nothing does."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    # -- jobs ---------------------------------------------------------------------------------
    def jobs(self) -> list[JobRow]:
        with self._lock:
            rows = self._db.execute(
                "SELECT job_id, spec, instance, state, reason, registered_at, changed_at FROM jobs ORDER BY job_id"
            ).fetchall()
        return [JobRow(*r) for r in rows]

    @staticmethod
    def put_job(db: sqlite3.Connection, row: JobRow) -> None:
        db.execute(
            "INSERT OR REPLACE INTO jobs VALUES (?, ?, ?, ?, ?, ?, ?)",
            (row.job_id, row.spec, row.instance, row.state, row.reason, row.registered_at, row.changed_at),
        )

    @staticmethod
    def set_state(db: sqlite3.Connection, job_id: int, state: str, reason: str, now: float) -> None:
        db.execute("UPDATE jobs SET state=?, reason=?, changed_at=? WHERE job_id=?", (state, reason, now, job_id))

    @staticmethod
    def delete_reports(db: sqlite3.Connection, job_id: int) -> None:
        db.execute("DELETE FROM reports WHERE job_id=?", (job_id,))

    # -- reports ------------------------------------------------------------------------------
    @staticmethod
    def insert_reports(db: sqlite3.Connection, rows: Iterable[ReportRow]) -> None:
        db.executemany("INSERT INTO reports VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)

    @staticmethod
    def replace_reports(db: sqlite3.Connection, rows: Iterable[ReportRow]) -> None:
        db.executemany("INSERT OR REPLACE INTO reports VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)

    def report(self, job_id: int, worker: int, iteration: int) -> ReportRow | None:
        with self._lock:
            row = self._db.execute(
                "SELECT * FROM reports WHERE job_id=? AND worker=? AND iteration=?", (job_id, worker, iteration)
            ).fetchone()
        return ReportRow(*row) if row else None

    def report_count(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM reports").fetchone()[0])

    def workers(self, job_id: int) -> list[WorkerRow]:
        """Per worker of the job: its latest and its highest iteration, and its number of reports."""
        with self._lock:
            rows = self._db.execute(
                "SELECT r.worker, (SELECT iteration FROM reports WHERE job_id=r.job_id AND worker=r.worker "
                "ORDER BY recv_time DESC, iteration DESC LIMIT 1), MAX(r.iteration), COUNT(*) "
                "FROM reports r WHERE r.job_id=? GROUP BY r.worker ORDER BY r.worker",
                (job_id,),
            ).fetchall()
        return [WorkerRow(int(w), int(last), int(top), int(n)) for w, last, top, n in rows]

    def worker_progress(self, job_id: int) -> dict[int, int]:
        """{worker: highest iteration}. Kept for the lab's post-run check; a running coordinator gives the same
        through ``CoordinatorClient.worker_progress()`` (the ListJobs RPC)."""
        return {w.worker: w.highest_iteration for w in self.workers(job_id)}

    def metric_history(self, job_id: int, limit: int) -> list[tuple[int, float]]:
        """The job's last ``limit`` metric points in iteration order, plus its first (the loss reference)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT iteration, metric FROM reports WHERE job_id=? AND metric IS NOT NULL "
                "ORDER BY iteration DESC, worker DESC LIMIT ?",
                (job_id, limit),
            ).fetchall()
            first = self._db.execute(
                "SELECT iteration, metric FROM reports WHERE job_id=? AND metric IS NOT NULL "
                "ORDER BY iteration, worker LIMIT 1",
                (job_id,),
            ).fetchone()
        rows.reverse()
        if first is not None and (not rows or tuple(rows[0]) != tuple(first)):
            rows.insert(0, first)
        return [(int(i), float(m)) for i, m in rows]

    def timing_history(self, job_id: int, limit: int) -> list[tuple[int, float, float, float]]:
        """The latest ``limit`` reports' (iteration, compute_s, comm_s, agent_time), oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT iteration, compute_s, comm_s, agent_time FROM reports WHERE job_id=? "
                "ORDER BY recv_time DESC LIMIT ?",
                (job_id, limit),
            ).fetchall()
        rows.reverse()
        return [(int(i), float(c), float(m), float(t or 0.0)) for i, c, m, t in rows]

    # -- decisions ----------------------------------------------------------------------------
    @staticmethod
    def insert_decision(db: sqlite3.Connection, created_at: float, intent: bytes, memory: str) -> int:
        cur = db.execute(
            "INSERT INTO decisions (created_at, intent, memory) VALUES (?, ?, ?)", (created_at, intent, memory)
        )
        seq = int(cur.lastrowid or 0)
        # Only the latest decision matters for recovery; keep a bounded tail for post-mortems.
        db.execute("DELETE FROM decisions WHERE seq <= ?", (seq - DECISIONS_KEPT,))
        return seq

    def mark_applied(self, seq: int, generation: int, now: float) -> None:
        with self.transaction() as db:
            db.execute("UPDATE decisions SET applied_at=?, generation=? WHERE seq=?", (now, generation, seq))

    def latest_decision(self) -> DecisionRow | None:
        with self._lock:
            row = self._db.execute("SELECT * FROM decisions ORDER BY seq DESC LIMIT 1").fetchone()
        return DecisionRow(*row) if row else None

    def decisions(self, after: int = 0, limit: int = 1000) -> list[DecisionRow]:
        """Decisions with ``seq > after``, oldest first, at most ``limit``."""
        with self._lock:
            rows = self._db.execute(
                "SELECT * FROM decisions WHERE seq > ? ORDER BY seq LIMIT ?", (after, limit)
            ).fetchall()
        return [DecisionRow(*r) for r in rows]

    def latest_applied(self) -> DecisionRow | None:
        with self._lock:
            row = self._db.execute(
                "SELECT * FROM decisions WHERE applied_at IS NOT NULL ORDER BY seq DESC LIMIT 1"
            ).fetchone()
        return DecisionRow(*row) if row else None
