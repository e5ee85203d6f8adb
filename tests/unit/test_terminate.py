"""mlfc.processes.terminate (re-exported by mlfc.launch.process), the one stop of every process mlfc starts:
SIGTERM to the group, SIGKILL after the grace, the exit code back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from mlfc.launch.process import ManagedProcess, terminate

# Ignores SIGTERM, then says so (the test waits for the line: the handler is in place).
_STUBBORN = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
)
# Starts a grandchild in its own (inherited) group and prints its pid.
_PARENT = (
    "import subprocess, sys, time; c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
    "print(c.pid, flush=True); time.sleep(60)"
)


def _spawn(code: str, **kw) -> tuple[subprocess.Popen, str]:
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, **kw)
    assert p.stdout is not None
    return p, p.stdout.readline().strip()


def _gone(pid: int, timeout: float = 5.0) -> bool:
    """``pid`` no longer runs (absent, or a zombie its new parent has not reaped yet)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def test_a_child_ignoring_sigterm_is_killed_after_the_grace() -> None:
    p, line = _spawn(_STUBBORN, start_new_session=True)
    assert line == "ready"
    t0 = time.monotonic()
    assert terminate(p, signal.SIGTERM, grace_s=0.5) == -signal.SIGKILL
    assert time.monotonic() - t0 >= 0.5, "SIGKILL only after the grace"
    assert p.poll() == -signal.SIGKILL, "reaped"


def test_a_child_that_obeys_sigterm_ends_within_the_grace() -> None:
    p, _ = _spawn("import time; print('ready', flush=True); time.sleep(60)", start_new_session=True)
    t0 = time.monotonic()
    assert terminate(p, signal.SIGTERM, grace_s=10.0) == -signal.SIGTERM
    assert time.monotonic() - t0 < 5.0


def test_the_whole_process_group_is_ended() -> None:
    p, grandchild = _spawn(_PARENT, start_new_session=True)
    assert os.getpgid(int(grandchild)) == p.pid
    assert terminate(p, signal.SIGTERM, grace_s=5.0) == -signal.SIGTERM
    assert _gone(int(grandchild)), "the grandchild outlived its group's stop"


def test_sigkill_at_once_reaches_the_group() -> None:
    p, grandchild = _spawn(_PARENT, start_new_session=True)
    assert terminate(p, signal.SIGKILL, grace_s=5.0) == -signal.SIGKILL
    assert _gone(int(grandchild))


def test_an_already_dead_process_returns_its_code() -> None:
    p = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"], start_new_session=True)
    while not _gone(p.pid, 0.1):  # exited, not reaped: terminate must not signal a recycled pid
        pass
    assert terminate(p) == 3
    assert terminate(p) == 3, "and again once reaped"


def test_a_process_leading_no_group_is_signalled_alone() -> None:
    # In our own process group: a killpg here would end this test run too.
    p, _ = _spawn("import time; print('ready', flush=True); time.sleep(60)")
    assert os.getpgid(p.pid) == os.getpgrp()
    assert terminate(p, signal.SIGTERM, grace_s=5.0) == -signal.SIGTERM


class _Stubborn(ManagedProcess):
    stop_grace_s = 0.3

    def command(self) -> list[str]:
        return [sys.executable, "-c", _STUBBORN]

    def ready(self) -> bool:
        return "ready" in self.tail()


def test_managed_process_stop_escalates_after_its_grace(tmp_path: Path) -> None:
    mp = _Stubborn("stubborn", tmp_path / "stubborn.log").start(timeout=10)
    assert mp.stop() == -signal.SIGKILL
    assert not mp.running


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_pause_freezes_the_whole_group_and_resume_lets_it_go_on(tmp_path: Path) -> None:
    class _Parent(ManagedProcess):
        def command(self) -> list[str]:
            return [sys.executable, "-c", _PARENT]

    mp = _Parent("parent", tmp_path / "parent.log").start(timeout=10)
    try:
        deadline = time.monotonic() + 10
        while not mp.tail().strip() and time.monotonic() < deadline:
            time.sleep(0.05)
        child = int(mp.tail().split()[0])
        mp.pause()
        deadline = time.monotonic() + 5
        while {_state(mp.proc.pid), _state(child)} != {"T"} and time.monotonic() < deadline:
            time.sleep(0.02)
        assert (_state(mp.proc.pid), _state(child)) == ("T", "T"), "parent and grandchild stopped"
        assert mp.running, "a paused process still runs"
        mp.resume()
        deadline = time.monotonic() + 5
        while "T" in {_state(mp.proc.pid), _state(child)} and time.monotonic() < deadline:
            time.sleep(0.02)
        assert "T" not in {_state(mp.proc.pid), _state(child)}
    finally:
        mp.kill()
