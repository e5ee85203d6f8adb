"""The PS checkpoint is written atomically and durably: a writer SIGKILLed at random moments, several
times, always leaves the previous or the new checkpoint (never a torn one), the temporary files of killed
writes are ignored and removed, and every write is fsynced (the file, then its directory). Needs torch."""

from __future__ import annotations

import importlib.util
import os
import pickle
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

if importlib.util.find_spec("torch") is None:
    pytest.skip("torch==2.13.0 not installed: `make install` brings the train extra", allow_module_level=True)

import torch

from mlfc.hosts.training import durable
from mlfc.hosts.training.loop import Checkpoint

WRITER = Path(__file__).with_name("checkpoint_writer.py")
KILLS = 8


def _saved(lines: list[str]) -> list[int]:
    return [int(line.split()[1]) for line in lines if line.startswith("saved ")]


@pytest.mark.timeout(180)
def test_a_writer_killed_mid_write_leaves_the_previous_or_the_new_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "ps.ckpt"
    rng = random.Random(29)
    start = 0
    for kill in range(KILLS):
        proc = subprocess.Popen([sys.executable, str(WRITER), str(path), "--start", str(start)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(2)]  # two saves done: the next one is under way
        t_save = time.monotonic()
        lines.append(proc.stdout.readline())
        one_save = time.monotonic() - t_save
        time.sleep(rng.uniform(0, 1.5 * one_save))  # a random moment of a save, or between two
        proc.kill()
        out, err = proc.communicate(timeout=10)
        assert proc.returncode == -9, err
        saved = _saved(lines + out.splitlines())
        assert saved, err
        state = Checkpoint(path).load()
        assert state is not None, f"kill {kill}: the checkpoint is gone"
        k = int(state["iteration"])
        # the last save that returned, or the one under way if its rename was done
        assert k in (saved[-1], saved[-1] + 1), f"kill {kill}: checkpoint {k}, last saved {saved[-1]}"
        assert torch.equal(state["weights"], torch.full_like(state["weights"], float(k))), "a torn checkpoint"
        assert not list(tmp_path.glob(".*.tmp")), "load left a killed write's temporary file"
        start = k + 1


def test_a_leftover_temporary_file_is_ignored_and_removed(tmp_path: Path) -> None:
    path = tmp_path / "ps.ckpt"
    ckpt = Checkpoint(path)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)
    torn = durable.temp_path(path, dead_pid)
    torn.write_bytes(b"PK\x03\x04 half a checkpoint")
    assert ckpt.load() is None, "a temporary file alone is no checkpoint"
    assert not torn.exists(), "the killed write's temporary file was not removed"
    ckpt.save({"iteration": 3, "weights": torch.zeros(4)})
    torn.write_bytes(b"PK\x03\x04 half a checkpoint")
    mine = durable.temp_path(path)  # a live writer's (this process's) is left alone
    mine.write_bytes(b"in progress")
    assert ckpt.load()["iteration"] == 3
    assert not torn.exists() and mine.exists()


def test_every_save_fsyncs_the_file_before_the_rename_and_the_directory_after(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "ps.ckpt"
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append("fsync dir" if Path(f"/proc/self/fd/{fd}").resolve() == tmp_path else "fsync file")
        real_fsync(fd)

    def replace(src, dst) -> None:  # type: ignore[no-untyped-def]
        events.append("replace")
        real_replace(src, dst)

    monkeypatch.setattr(durable.os, "fsync", fsync)
    monkeypatch.setattr(durable.os, "replace", replace)
    Checkpoint(path).save({"iteration": 1, "weights": torch.zeros(4)})
    assert events == ["fsync file", "replace", "fsync dir"]
    assert Checkpoint(path).load()["iteration"] == 1


def test_a_failed_write_keeps_the_previous_checkpoint_and_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "ps.ckpt"
    ckpt = Checkpoint(path)
    ckpt.save({"iteration": 1, "weights": torch.zeros(4)})
    with pytest.raises((AttributeError, TypeError, pickle.PicklingError)):
        ckpt.save({"iteration": 2, "weights": lambda: None})  # torch.save cannot pickle a lambda
    assert ckpt.load()["iteration"] == 1
    assert not list(tmp_path.glob(".*.tmp"))
