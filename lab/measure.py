"""The measurement lock, ``flock /tmp/mlfc-measure.lock`` as the Makefile's ``MEASURE`` takes it, for a
command that holds it per run (``--seeds``: other measurements may go between two seeds)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
from collections.abc import Iterator
from pathlib import Path

MEASURE_LOCK = Path(os.environ.get("MLFC_MEASURE_LOCK", "/tmp/mlfc-measure.lock"))


def _ancestors(pid: int) -> set[int]:
    out = set()
    while pid > 1:
        out.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state: the parent's pid
    return out


def held_by_ancestor(path: Path = MEASURE_LOCK, locks: str | None = None) -> bool:
    """Whether this process or one it descends from holds ``path``'s flock (``flock LOCK python -m ...``):
    taking it again through a new open file would wait for ourselves."""
    try:
        inode = path.stat().st_ino
        text = Path("/proc/locks").read_text() if locks is None else locks
    except OSError:
        return False
    mine = _ancestors(os.getpid())
    for line in text.splitlines():
        parts = line.split()  # 1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF
        if len(parts) < 6 or parts[1] != "FLOCK" or not parts[4].isdigit():
            continue
        if int(parts[5].rsplit(":", 1)[-1]) == inode and int(parts[4]) in mine:
            return True
    return False


@contextlib.contextmanager
def measure_lock(path: Path = MEASURE_LOCK) -> Iterator[tuple[float, float, float]]:
    """Hold the measurement lock (waiting, and saying so, while another measurement has it); yields the load
    average when it was taken."""
    if held_by_ancestor(path):
        yield os.getloadavg()
        return
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for the measurement lock {path}", file=sys.stderr, flush=True)
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield os.getloadavg()
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
