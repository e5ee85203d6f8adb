"""One way to start, health-check, stop and crash the processes mlfc runs: switches and daemons.

``ManagedProcess`` owns a child in its own process group (so a kill reaches everything it started),
with stdout and stderr in a log file:

* ``start()`` launches ``command()`` and waits until ``ready()``; a child that exits first, or stays
  unready past the timeout, is stopped and reported with the tail of its log;
* ``stop()`` is a clean shutdown: SIGTERM to the group, SIGKILL if it is still there after a grace period;
* ``kill()`` is a crash: SIGKILL at once, as a power cut or ``kill -9`` would;
* ``restart()`` is a crash and a start on the same ports, so clients see the same endpoint come back.

``terminate(proc, sig, grace_s)`` is that stop for any ``Popen`` (a job's processes, a local training
run's): every stop in mlfc goes through it. It lives in the product (``mlfc.processes``), whose own training
launcher needs it too; this module re-exports it for the lab.

Subclasses say what to run and what "ready" means (ports listening, an RPC answering).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from mlfc.processes import leads_group, signal_process, terminate


class ProcessError(RuntimeError):
    """A managed process failed to start, or exited when it should have been running."""


def free_port() -> int:
    """A TCP port that nothing on 127.0.0.1 listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


class ManagedProcess:
    """A child process with a log file. Subclasses implement ``command()`` and, where readiness is more
    than "still running", ``ready()``; ``ports()`` lists the TCP ports that must be free again after a
    stop (a restart binds them)."""

    program = "process"
    stop_grace_s = 5.0

    def __init__(self, name: str, log_file: Path | None = None) -> None:
        self.name = name
        self.log_file = Path(log_file) if log_file else Path(tempfile.mkdtemp(prefix=f"mlfc-{name}-")) / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self._atexit = False

    # ---- what to run ----------------------------------------------------------------------------

    def command(self) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict[str, str] | None:
        return {**os.environ, "PYTHONUNBUFFERED": "1"}

    def ready(self) -> bool:
        """True once the process serves (default: every port of ``ports()`` listens)."""
        return all(listening(p) for p in self.ports())

    def ports(self) -> list[int]:
        return []

    # ---- lifecycle ------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.running else None

    def start(self, timeout: float = 20.0):
        if self.running:
            return self
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as out:
            self.proc = subprocess.Popen(
                self.command(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=self.env()
            )
        self.starts += 1
        if not self._atexit:  # no orphaned process if the caller forgets to stop it
            atexit.register(self.kill)
            self._atexit = True
        deadline = time.monotonic() + timeout
        try:
            while not self.ready():
                if self.proc.poll() is not None:
                    raise ProcessError(f"{self.name}: {self.program} exited with {self.proc.returncode}: {self.tail()}")
                if time.monotonic() > deadline:
                    raise ProcessError(f"{self.name}: {self.program} not ready after {timeout:g} s: {self.tail()}")
                time.sleep(0.05)
        except BaseException:
            self.kill()
            raise
        return self

    def check(self) -> None:
        """Raise if the process has exited (a daemon should not)."""
        if self.proc is not None and self.proc.poll() is not None:
            raise ProcessError(f"{self.name}: {self.program} exited with {self.proc.returncode}:\n{self.tail()}")

    def stop(self) -> int | None:
        """Clean shutdown: SIGTERM, then SIGKILL after ``stop_grace_s``; returns the exit status."""
        return self._end(signal.SIGTERM)

    def kill(self) -> int | None:
        """Crash: SIGKILL to the whole process group at once."""
        return self._end(signal.SIGKILL)

    def pause(self) -> None:
        """Freeze the process (SIGSTOP to its group): a hung process, its sockets and ports still held."""
        self._freeze(signal.SIGSTOP)

    def resume(self) -> None:
        """Let a paused process go on (SIGCONT)."""
        self._freeze(signal.SIGCONT)

    def _freeze(self, sig: signal.Signals) -> None:
        if self.proc is not None and self.proc.poll() is None:
            signal_process(self.proc, sig, leads_group(self.proc))

    def restart(self, timeout: float = 20.0):
        """Crash and start again on the same ports."""
        self.kill()
        return self.start(timeout)

    def _end(self, sig: signal.Signals) -> int | None:
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        terminate(proc, sig, self.stop_grace_s)
        # The ports must be free again before a restart binds them.
        deadline = time.monotonic() + 5
        while any(listening(p) for p in self.ports()) and time.monotonic() < deadline:
            time.sleep(0.05)
        return proc.returncode

    def tail(self, n: int = 3000) -> str:
        with contextlib.suppress(OSError):
            return self.log_file.read_text(errors="replace")[-n:]
        return ""

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
