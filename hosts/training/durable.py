"""Durable, atomic file replacement for the training state (the PS checkpoint, the aggregator's roster).

``write_atomic(path, write)`` writes to a temporary file beside ``path`` (same directory, so the rename
stays on one file system), flushes and fsyncs it, renames it over ``path`` (``os.replace``: atomic) and
fsyncs the directory so the rename itself is on disk. A process killed at any moment leaves the old file
or the new one; with the fsyncs a power cut does too. A killed write leaves its temporary file behind:
``remove_leftovers`` deletes those of processes that are gone. No torch here.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def temp_path(path: Path, pid: int | None = None) -> Path:
    """Where ``write_atomic`` writes before the rename: hidden, beside ``path``, named by the writer's pid."""
    return path.with_name(f".{path.name}.{os.getpid() if pid is None else pid}.tmp")


def fsync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable (a file's fsync does not cover its directory entry)."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Replace ``path`` with what ``write(file)`` writes, atomically and durably (see the module doc)."""
    path = Path(path)
    tmp = temp_path(path)
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    fsync_directory(path.parent)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def remove_leftovers(path: Path) -> list[Path]:
    """Delete the temporary files of writes to ``path`` whose writer is gone (killed mid-write); a live
    writer's (this process's or another's) is left alone. Returns what was removed."""
    path = Path(path)
    removed = []
    for tmp in path.parent.glob(f".{path.name}.*.tmp"):
        pid_text = tmp.name[len(path.name) + 2 : -len(".tmp")]
        if not pid_text.isdigit() or int(pid_text) == os.getpid() or _alive(int(pid_text)):
            continue
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
            removed.append(tmp)
    return removed
