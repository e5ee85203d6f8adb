"""Start and stop ``simple_switch_grpc`` processes (tests, benchmarks, local runs).

    with Bmv2Process(device_id=1, interfaces={1: "veth1"}) as sw:
        SwitchConnection(sw.grpc_addr, sw.device_id) ...

Ports are picked free on 127.0.0.1 unless given; ``restart()`` keeps them, so a controller sees the
same switch come back empty (as after a crash).
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

BINARY = "simple_switch_grpc"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


class Bmv2Process:
    def __init__(
        self,
        device_id: int = 1,
        grpc_port: int | None = None,
        thrift_port: int | None = None,
        interfaces: Mapping[int, str] | None = None,
        log_dir: Path | None = None,
        priority_queues: int = 8,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.device_id = device_id
        self.grpc_port = grpc_port or free_port()
        self.thrift_port = thrift_port or free_port()
        self.interfaces = dict(interfaces or {})
        self.log_dir = Path(log_dir or tempfile.mkdtemp(prefix=f"bmv2-{device_id}-"))
        self.priority_queues = priority_queues
        self.extra_args = extra_args
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def grpc_addr(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"bmv2-{self.device_id}.out"

    def command(self) -> list[str]:
        cmd = [
            shutil.which(BINARY) or BINARY,
            "--no-p4",
            "--device-id",
            str(self.device_id),
            "--thrift-port",
            str(self.thrift_port),
        ]
        for port, iface in sorted(self.interfaces.items()):
            cmd += ["-i", f"{port}@{iface}"]
        cmd += [
            *self.extra_args,
            "--",
            "--grpc-server-addr",
            self.grpc_addr,
            "--priority-queues",
            str(self.priority_queues),
        ]
        return cmd

    def start(self, timeout_s: float = 15.0) -> Bmv2Process:
        if self.proc is not None and self.proc.poll() is None:
            return self
        out = self.log_path.open("ab")
        self.proc = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        out.close()
        self.starts += 1
        atexit.register(self.stop)  # no orphaned process if the caller forgets to stop it
        deadline = time.monotonic() + timeout_s
        while not (_listening(self.grpc_port) and _listening(self.thrift_port)):
            if self.proc.poll() is not None:
                raise RuntimeError(f"{BINARY} exited with {self.proc.returncode}: {self.tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{BINARY} did not listen on {self.grpc_addr} in {timeout_s}s: {self.tail()}")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        """SIGKILL: the switch disappears as in a crash, its P4Runtime streams break."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)
            self.proc = None
        # The gRPC port must be free again before a restart binds it.
        deadline = time.monotonic() + 5
        while _listening(self.grpc_port) and time.monotonic() < deadline:
            time.sleep(0.05)

    def restart(self, timeout_s: float = 15.0) -> Bmv2Process:
        self.stop()
        return self.start(timeout_s)

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def tail(self, n: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def __enter__(self) -> Bmv2Process:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
