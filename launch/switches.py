"""Switch processes: BMv2's ``simple_switch_grpc`` and mlfc's reference switch, behind one interface.

Both start without a program (the controller loads the pipeline over P4Runtime), listen on 127.0.0.1
only (gRPC, and Thrift or the admin port for queue commands), and take ``ports`` as {switch port:
interface}. ``target`` is the deployment file's ``target`` for that switch; ``queues()`` is its queue
channel (controller/queues.py), so tests, benchmarks and the lab shape queues as the controller does.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from mlfc.controller.queues import QueueClient, queue_client
from mlfc.launch.link_kick import LinkKick
from mlfc.launch.process import ManagedProcess, ProcessError, free_port

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
            return f"{tool} not found: install BMv2 built with PI and Thrift (docs/toolchain.md)"
    return thrift_missing()


def thrift_missing() -> str | None:
    """simple_switch_CLI imports Python's ``thrift`` with whatever ``python3`` its first line names (PATH's,
    for ``#!/usr/bin/env python3``); without it no queue is shaped and an experiment would run with the
    wrong bottleneck."""
    cli = shutil.which("simple_switch_CLI")
    if cli is None:
        return "simple_switch_CLI not found"
    with open(cli, "rb") as f:
        first = f.readline().decode(errors="replace").strip()
    interpreter = first[2:].split() if first.startswith("#!") else [sys.executable]
    if interpreter[:1] == ["/usr/bin/env"]:
        interpreter = interpreter[1:]
    try:
        res = subprocess.run([*interpreter, "-c", "import thrift"], capture_output=True, text=True, timeout=30)
    except OSError as exc:
        return f"simple_switch_CLI's interpreter {' '.join(interpreter)}: {exc}"
    if res.returncode != 0:
        return (
            f"simple_switch_CLI runs {' '.join(interpreter)}, which cannot import thrift: "
            f"pip install thrift for that interpreter (or apt-get install python3-thrift)"
        )
    return None


class SwitchProcess(ManagedProcess):
    """What every switch process has. In a network namespace its loopback listeners cannot be probed
    from outside, so readiness there is "still running after ``settle_s``"."""

    target = ""
    settle_s = 1.0

    def __init__(
        self,
        name: str = "s1",
        device_id: int = 1,
        ports: Mapping[int, str] | None = None,
        *,
        grpc_port: int = 0,
        queue_port: int = 0,
        priority_queues: int = 8,
        netns: str | None = None,
        log_file: Path | None = None,
    ) -> None:
        super().__init__(name, log_file)
        self.device_id = device_id
        self.interfaces = dict(ports or {})
        self.grpc_port = grpc_port or free_port()
        self.queue_port = queue_port or free_port()
        self.priority_queues = priority_queues
        self.netns = netns
        self._launched_at = 0.0

    @property
    def grpc_addr(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def ports(self) -> list[int]:
        return [] if self.netns else [self.grpc_port, self.queue_port]

    def ready(self) -> bool:
        if self.netns:
            return time.monotonic() - self._launched_at >= self.settle_s
        return super().ready()

    def start(self, timeout: float = 20.0):
        self._launched_at = time.monotonic()
        return super().start(timeout)

    def in_netns(self, cmd: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.netns, *cmd] if self.netns else cmd

    def queues(self) -> QueueClient:
        return queue_client(self.target, self.queue_port, netns=self.netns)

    def cli(self, *commands: str) -> str:
        """Queue commands as simple_switch_CLI takes them (set_queue_rate, set_queue_depth, ...)."""
        return "\n".join(self.queues().run(list(commands)))


class Bmv2Switch(SwitchProcess):
    """One simple_switch_grpc process (``--priority-queues`` after ``--``; queues over Thrift)."""

    target = "bmv2"
    program = "simple_switch_grpc"

    def __init__(
        self,
        name: str = "s1",
        device_id: int = 1,
        ports: Mapping[int, str] | None = None,
        *,
        binary: str | None = None,
        debug_log: bool = False,
        cpu_port: int | None = None,
        extra_args: tuple[str, ...] = (),
        **kwargs,
    ) -> None:
        super().__init__(name, device_id, ports, **kwargs)
        self.binary = binary or bmv2_binary()
        self.debug_log = debug_log  # BMv2's own packet log slows it down a lot: off unless asked
        self.cpu_port = cpu_port
        self.extra_args = extra_args
        self._kick = LinkKick(name, list(self.interfaces.values()))

    @property
    def thrift_port(self) -> int:
        return self.queue_port

    def command(self) -> list[str]:
        cmd = [shutil.which(self.binary) or self.binary, "--no-p4", "--device-id", str(self.device_id)]
        cmd += ["--thrift-port", str(self.queue_port)]
        for port, iface in sorted(self.interfaces.items()):
            cmd += ["-i", f"{port}@{iface}"]
        if self.debug_log:
            cmd += ["--log-file", str(self.log_file.with_suffix(".pkt")), "--log-flush", "-L", "debug"]
        cmd += [*self.extra_args, "--", "--grpc-server-addr", self.grpc_addr]
        cmd += ["--priority-queues", str(self.priority_queues)]
        if self.cpu_port is not None:
            cmd += ["--cpu-port", str(self.cpu_port)]
        return self.in_netns(cmd)

    def start(self, timeout: float = 20.0) -> Bmv2Switch:
        missing = bmv2_missing() if self.binary == bmv2_binary() else None
        if missing or not shutil.which(self.binary):
            raise ProcessError(missing or f"{self.binary}: not an executable")
        super().start(timeout)
        if self.netns is None:  # BMv2 stands still after a link flap until a frame arrives (link_kick.py)
            self._kick.start()
        return self

    @property
    def link_kicks(self) -> int:
        """Frames sent to wake this switch after one of its links came back up (launch/link_kick.py)."""
        return self._kick.kicks

    def _end(self, sig: signal.Signals) -> int | None:
        self._kick.stop()
        return super()._end(sig)


class RefSwitch(SwitchProcess):
    """One ``mlfc-refswitch`` process: mlfc.p4's semantics in Python (docs/refswitch.md); queue
    commands go to its admin port."""

    target = "refswitch"
    program = "mlfc-refswitch"
    settle_s = 1.5

    def __init__(
        self,
        name: str = "s1",
        device_id: int = 1,
        ports: Mapping[int, str] | None = None,
        *,
        queue_mode: str = "shared",
        queue_depth: int = 64,
        seed: int | None = None,
        log_level: str = "info",
        **kwargs,
    ) -> None:
        super().__init__(name, device_id, ports, **kwargs)
        self.queue_mode = queue_mode
        self.queue_depth = queue_depth
        self.seed = seed
        self.log_level = log_level

    @property
    def admin_port(self) -> int:
        return self.queue_port

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "mlfc.refswitch.cli", "--device-id", str(self.device_id)]
        cmd += ["--grpc-addr", self.grpc_addr, "--admin-port", str(self.queue_port)]
        cmd += ["--queue-mode", self.queue_mode, "--priority-queues", str(self.priority_queues)]
        cmd += ["--queue-depth", str(self.queue_depth), "--log-level", self.log_level]
        for port, iface in sorted(self.interfaces.items()):
            cmd += ["-i", f"{port}@{iface}"]
        if self.seed is not None:
            cmd += ["--seed", str(self.seed)]
        return self.in_netns(cmd)


SWITCHES: dict[str, type[SwitchProcess]] = {"bmv2": Bmv2Switch, "ref": RefSwitch}
