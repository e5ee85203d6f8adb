"""Start and stop BMv2 `simple_switch_grpc` processes (tests, PTF, benchmarks, the Mininet builder).

The switch starts without a program (`--no-p4`); the controller loads the pipeline over P4Runtime.
gRPC and Thrift listen on 127.0.0.1 only, one port pair per switch.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
P4_BUILD = REPO / "p4src" / "build"


class Bmv2Error(RuntimeError):
    pass


BMV2_ENV = "MLFC_BMV2"


def bmv2_binary() -> str:
    """The simple_switch_grpc to start: $MLFC_BMV2 when set (e.g. a build without logging macros
    for experiments, docs/toolchain.md), else the one on PATH."""
    return os.environ.get(BMV2_ENV) or "simple_switch_grpc"


def bmv2_missing() -> str | None:
    """None if BMv2 is usable here, else what is missing and how to get it."""
    for tool in (bmv2_binary(), "simple_switch_CLI"):
        if not shutil.which(tool):
            if tool != "simple_switch_CLI" and os.environ.get(BMV2_ENV):
                return f"{BMV2_ENV}={tool}: not an executable"
            return f"{tool} not found: install BMv2 built with PI and Thrift"
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise Bmv2Error(f"switch exited with status {proc.returncode} before listening on {port}")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(0.2)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise Bmv2Error(f"nothing listening on 127.0.0.1:{port} after {timeout:.0f} s")


class SwitchProcess:
    """Start, stop and crash a switch process; shared by ``Bmv2Switch`` and the reference switch's
    ``RefSwitch``. Subclasses are dataclasses with ``name``, ``netns``, ``log_file`` and ``proc``, and
    provide ``command()``, ``listen_ports()`` and the error type they raise."""

    error: type[Exception] = RuntimeError
    program = "switch"
    settle_s = 1.0  # in a namespace its loopback listeners cannot be probed: wait this long instead

    name: str
    netns: str | None
    log_file: Path | None
    proc: subprocess.Popen | None

    def command(self) -> list[str]:
        raise NotImplementedError

    def listen_ports(self) -> list[int]:
        raise NotImplementedError

    def launch(self, timeout: float) -> None:
        out = open(self.log_file.with_suffix(".out"), "wb") if self.log_file else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            if self.netns:
                time.sleep(self.settle_s)
                if self.proc.poll() is not None:
                    raise self.error(f"{self.name}: {self.program} exited with status {self.proc.returncode}")
            else:
                for port in self.listen_ports():
                    wait_for_port(port, timeout, self.proc)
        except BaseException:
            self.stop()
            raise

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

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class Bmv2Switch(SwitchProcess):
    """One simple_switch_grpc process. ``ports`` maps switch port numbers to interface names."""

    name: str = "s1"
    device_id: int = 1
    ports: dict[int, str] = field(default_factory=dict)
    grpc_port: int = 0
    thrift_port: int = 0
    priority_queues: int = 8
    log_file: Path | None = None  # BMv2 logging slows it down a lot: off unless asked
    netns: str | None = None  # run inside this network namespace (its interfaces)
    cpu_port: int | None = None
    binary: str = field(default_factory=bmv2_binary)
    proc: subprocess.Popen | None = None

    @property
    def grpc_addr(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def command(self) -> list[str]:
        cmd = [
            self.binary,
            "--no-p4",
            "--device-id",
            str(self.device_id),
            "--thrift-port",
            str(self.thrift_port),
        ]
        for port, iface in sorted(self.ports.items()):
            cmd += ["-i", f"{port}@{iface}"]
        if self.log_file:
            cmd += ["--log-file", str(self.log_file), "--log-flush", "-L", "debug"]
        cmd += ["--", "--grpc-server-addr", self.grpc_addr, "--priority-queues", str(self.priority_queues)]
        if self.cpu_port is not None:
            cmd += ["--cpu-port", str(self.cpu_port)]
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns, *cmd]
        return cmd

    error = Bmv2Error
    program = "simple_switch_grpc"

    def listen_ports(self) -> list[int]:
        return [self.grpc_port, self.thrift_port]

    def start(self, timeout: float = 20.0) -> Bmv2Switch:
        missing = bmv2_missing()
        if missing:
            raise Bmv2Error(missing)
        self.grpc_port = self.grpc_port or free_port()
        self.thrift_port = self.thrift_port or free_port()
        self.launch(timeout)
        return self

    def cli(self, *commands: str, timeout: float = 20.0) -> str:
        """Run commands through simple_switch_CLI (Thrift): queue rates and depths live there."""
        cmd = ["simple_switch_CLI", "--thrift-port", str(self.thrift_port)]
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns, *cmd]
        res = subprocess.run(cmd, input="\n".join(commands) + "\n", capture_output=True, text=True, timeout=timeout)
        if res.returncode != 0 or "Error" in res.stdout or "Invalid" in res.stdout:
            raise Bmv2Error(f"simple_switch_CLI {commands!r} failed: {res.stdout.strip()} {res.stderr.strip()}")
        return res.stdout

    def __enter__(self) -> Bmv2Switch:
        return self.start()
