"""Start and stop ``mlfc-refswitch`` processes; the same API as topologies/bmv2.py's ``Bmv2Switch``
(start/stop/kill/cli/grpc_addr), so the Mininet builder and tests can start either switch."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from mlfc.refswitch.admin import run_commands
from mlfc.refswitch.tm import SHARED
from mlfc.topologies.bmv2 import free_port, wait_for_port


class RefSwitchError(RuntimeError):
    pass


def refswitch_missing() -> str | None:
    """None: the reference switch needs nothing beyond this Python environment."""
    return None


@dataclass
class RefSwitch:
    """One reference-switch process. ``ports`` maps switch port numbers to interface names."""

    name: str = "s1"
    device_id: int = 1
    ports: dict[int, str] = field(default_factory=dict)
    grpc_port: int = 0
    admin_port: int = 0
    priority_queues: int = 8
    queue_mode: str = SHARED
    queue_depth: int = 64
    seed: int | None = None
    log_file: Path | None = None
    log_level: str = "info"
    netns: str | None = None  # run inside this network namespace (its interfaces)
    proc: subprocess.Popen | None = None

    @property
    def grpc_addr(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def thrift_port(self) -> int:
        """Where BMv2 takes queue commands; here the admin port (same command lines)."""
        return self.admin_port

    def command(self) -> list[str]:
        cmd = [
            sys.executable,
            "-m",
            "mlfc.refswitch.cli",
            "--device-id",
            str(self.device_id),
            "--grpc-addr",
            self.grpc_addr,
            "--admin-port",
            str(self.admin_port),
            "--queue-mode",
            self.queue_mode,
            "--priority-queues",
            str(self.priority_queues),
            "--queue-depth",
            str(self.queue_depth),
            "--log-level",
            self.log_level,
        ]
        for port, iface in sorted(self.ports.items()):
            cmd += ["-i", f"{port}@{iface}"]
        if self.seed is not None:
            cmd += ["--seed", str(self.seed)]
        if self.log_file:
            cmd += ["--log-file", str(self.log_file)]
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns, *cmd]
        return cmd

    def start(self, timeout: float = 20.0) -> RefSwitch:
        self.grpc_port = self.grpc_port or free_port()
        self.admin_port = self.admin_port or free_port()
        out = open(self.log_file.with_suffix(".out"), "wb") if self.log_file else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            if self.netns:
                # Loopback listeners live in the namespace: only check that the process stays up.
                time.sleep(1.5)
                if self.proc.poll() is not None:
                    raise RefSwitchError(f"{self.name}: mlfc-refswitch exited with status {self.proc.returncode}")
            else:
                wait_for_port(self.grpc_port, timeout, self.proc)
                wait_for_port(self.admin_port, timeout, self.proc)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        self.proc = None

    def kill(self) -> None:
        """Crash the switch (SIGKILL), as a power cut would."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)
        self.proc = None

    def cli(self, *commands: str, timeout: float = 20.0) -> str:
        """Queue commands as simple_switch_CLI takes them (set_queue_rate, set_queue_depth)."""
        if self.netns:
            cmd = [
                "ip",
                "netns",
                "exec",
                self.netns,
                sys.executable,
                "-m",
                "mlfc.refswitch.cli",
                "cli",
                "--admin-port",
                str(self.admin_port),
            ]
            res = subprocess.run(cmd, input="\n".join(commands) + "\n", capture_output=True, text=True, timeout=timeout)
            if res.returncode != 0:
                raise RefSwitchError(f"refswitch cli {commands!r} failed: {res.stdout.strip()} {res.stderr.strip()}")
            return res.stdout
        try:
            replies = run_commands(self.admin_port, list(commands), timeout=timeout)
        except OSError as err:
            raise RefSwitchError(f"{self.name}: admin port {self.admin_port}: {err}") from err
        failed = [f"{c}: {r}" for c, r in zip(commands, replies, strict=True) if r.startswith("Error")]
        if failed:
            raise RefSwitchError(f"refswitch cli failed: {'; '.join(failed)}")
        return "\n".join(replies)

    def __enter__(self) -> RefSwitch:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
