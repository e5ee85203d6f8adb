"""Start and stop ``mlfc-refswitch`` processes; the same API as topologies/bmv2.py's ``Bmv2Switch``
(start/stop/kill/cli/grpc_addr), so the Mininet builder and tests can start either switch."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from mlfc.refswitch.admin import run_commands
from mlfc.refswitch.tm import SHARED
from mlfc.topologies.bmv2 import SwitchProcess, free_port


class RefSwitchError(RuntimeError):
    pass


def refswitch_missing() -> str | None:
    """None: the reference switch needs nothing beyond this Python environment."""
    return None


@dataclass
class RefSwitch(SwitchProcess):
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

    error = RefSwitchError
    program = "mlfc-refswitch"
    settle_s = 1.5

    def listen_ports(self) -> list[int]:
        return [self.grpc_port, self.admin_port]

    def start(self, timeout: float = 20.0) -> RefSwitch:
        self.grpc_port = self.grpc_port or free_port()
        self.admin_port = self.admin_port or free_port()
        self.launch(timeout)
        return self

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
