"""The coordinator's store survives kill -9 mid-write: a process writing reports in a loop is SIGKILLed
at random moments, several times; each time the store opens, passes ``PRAGMA integrity_check``, and holds
every report whose transaction had returned. Its journal mode and synchronous setting are the stated ones
(WAL, FULL)."""

from __future__ import annotations

import random
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mlfc.coordinator.store import Store, StoreError

WRITER = Path(__file__).with_name("store_writer.py")
KILLS = 20


@pytest.mark.timeout(180)
def test_a_writer_killed_mid_write_leaves_an_intact_store_with_every_committed_report(tmp_path: Path) -> None:
    db = tmp_path / "coord.sqlite"
    rng = random.Random(29)
    start = 0
    for kill in range(KILLS):
        proc = subprocess.Popen([sys.executable, str(WRITER), str(db), "--start", str(start)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(3)]  # writing for real
        time.sleep(rng.uniform(0, 0.2))
        proc.kill()
        out, err = proc.communicate(timeout=10)
        assert proc.returncode == -9, err
        committed = [int(line.split()[1]) for line in lines + out.splitlines() if line.startswith("committed ")]
        assert committed, err
        store = Store(db)  # what the restarted coordinator does: opens it (the WAL is replayed)
        try:
            with store.transaction() as conn:
                assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)], f"kill {kill}"
                stored = {i for (i,) in conn.execute("SELECT iteration FROM reports WHERE job_id=1")}
        finally:
            store.close()
        missing = set(range(committed[-1] + 1)) - stored
        assert not missing, f"kill {kill}: {len(missing)} committed reports lost, e.g. {sorted(missing)[:5]}"
        # a batch is one transaction: all of it or none of it
        assert stored == set(range(max(stored) + 1)), f"kill {kill}: a partial batch"
        start = max(stored) + 1
    assert start >= KILLS * 3 * 50


def test_the_store_runs_wal_with_synchronous_full_as_stated(tmp_path: Path) -> None:
    db = tmp_path / "coord.sqlite"
    store = Store(db)
    try:
        assert store.durability() == ("wal", "FULL")
    finally:
        store.close()
    with sqlite3.connect(db) as conn:  # WAL is a property of the file: another connection sees it
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    store = Store(db, synchronous="normal")
    try:
        assert store.durability() == ("wal", "NORMAL")
    finally:
        store.close()
    with pytest.raises(StoreError, match="FULL or NORMAL"):
        Store(db, synchronous="OFF")


def test_an_in_memory_store_opens_without_a_wal_journal() -> None:
    # The simulator keeps its coordinator's store in memory (sim/simulation.py): no journal, nothing to keep.
    from mlfc.coordinator.store import MEMORY, Store

    store = Store(MEMORY, synchronous="NORMAL")
    try:
        assert store.durability()[0] == "memory"
    finally:
        store.close()
