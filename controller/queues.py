"""Queue shaping (rate, depth) per port and priority queue: not part of P4Runtime, so each target has
its own channel behind one interface.

``QueueClient`` speaks simple_switch_CLI's command lines (``set_queue_rate <pps> [<port> [<prio>]]``,
``set_queue_depth <pkts> [<port> [<prio>]]``) to one switch, plus the reference switch's byte forms
(``set_queue_rate_bps <bits/s> ...``: the port is a link, a packet of L bytes takes L*8/rate s;
``set_queue_depth_bytes <bytes> ...``: a byte capacity), which BMv2 has not (its queue rates are packets
per second): ``Bmv2ThriftQueues`` refuses them before starting its CLI.

* ``Bmv2ThriftQueues``: ``simple_switch_CLI --thrift-port N``, all commands of a call in one CLI
  process (each CLI start costs a Python interpreter start-up);
* ``RefSwitchAdminQueues``: mlfc-refswitch's admin port, a loopback TCP line protocol (one command per
  line, one reply line each, ``OK``/``Error: ...``; docs/refswitch.md);
* ``NoQueues``: a target whose queues are managed elsewhere; it refuses settings rather than ignoring
  them.

A Tofino traffic-manager client would implement ``run`` over bfrt (docs/tofino.md). Calls block; the
controller daemon runs them in a worker thread.
"""

from __future__ import annotations

import logging
import re
import shutil
import socket
import subprocess
import sys
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

LOG = logging.getLogger(__name__)

_CLI_ERROR = re.compile(r"(Error|Invalid|Could not connect|Traceback|exception|Unknown syntax|\*\*\*)", re.IGNORECASE)


class QueueConfigError(RuntimeError):
    """The target refused a queue setting or could not be reached."""


# The reference switch's commands in bytes; BMv2's simple_switch_CLI has neither.
BYTE_COMMANDS = ("set_queue_rate_bps", "set_queue_depth_bytes")


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """Per-port queue shaping; None leaves the target's default (BMv2: no rate limit, 64 packets).

    The rate is in packets per second (``rate_pps``, BMv2's unit) or, on the reference switch only, in
    bits per second (``rate_bps``: the port is a link of that many bit/s), never both. ``depth_bytes``
    (reference switch only) adds a byte capacity to the packet capacity ``depth_pkts``."""

    rate_pps: int | None = None
    depth_pkts: int | None = None
    rate_bps: int | None = None
    depth_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.rate_pps is not None and self.rate_bps is not None:
            raise ValueError("a port's rate is rate_pps or rate_bps, not both")

    @property
    def in_bytes(self) -> bool:
        """Whether these settings need a target with byte rates or byte depths (the reference switch)."""
        return self.rate_bps is not None or self.depth_bytes is not None


def queue_commands(ports: Mapping[int, QueueSettings]) -> list[str]:
    """Per-port command lines. BMv2 applies a port's setting to each of its priority queues; the
    reference switch in shared mode makes the rate the port's one rate, shared by its queues (depth is
    per queue in both)."""
    out = []
    for port, q in sorted(ports.items()):
        if q.rate_pps is not None:
            out.append(f"set_queue_rate {q.rate_pps} {port}")
        if q.rate_bps is not None:
            out.append(f"set_queue_rate_bps {q.rate_bps} {port}")
        if q.depth_pkts is not None:
            out.append(f"set_queue_depth {q.depth_pkts} {port}")
        if q.depth_bytes is not None:
            out.append(f"set_queue_depth_bytes {q.depth_bytes} {port}")
    return out


def _where(port: int | None, priority: int | None) -> str:
    if port is None:
        return ""
    return f" {port}" if priority is None else f" {port} {priority}"


class QueueClient(ABC):
    """Queue settings of one switch."""

    @abstractmethod
    def run(self, commands: Sequence[str]) -> list[str]:
        """Send command lines; return one reply per command. Every command is sent even after an error
        (as simple_switch_CLI does), then ``QueueConfigError`` names the failed ones."""

    @abstractmethod
    def describe(self) -> str: ...

    def set_rate(self, pps: int, port: int | None = None, priority: int | None = None) -> None:
        self.run([f"set_queue_rate {pps}{_where(port, priority)}"])

    def set_rate_bps(self, bps: int, port: int | None = None, priority: int | None = None) -> None:
        """A link of ``bps`` bits per second (the reference switch; BMv2 refuses it)."""
        self.run([f"set_queue_rate_bps {bps}{_where(port, priority)}"])

    def set_depth(self, packets: int, port: int | None = None, priority: int | None = None) -> None:
        self.run([f"set_queue_depth {packets}{_where(port, priority)}"])

    def set_depth_bytes(self, nbytes: int, port: int | None = None, priority: int | None = None) -> None:
        """A byte capacity besides the packet capacity (the reference switch; BMv2 refuses it)."""
        self.run([f"set_queue_depth_bytes {nbytes}{_where(port, priority)}"])

    def configure(self, ports: Mapping[int, QueueSettings]) -> int:
        """Apply per-port settings (the controller calls this after every reconnection: a restarted
        switch has forgotten them); returns the number of commands sent."""
        cmds = queue_commands(ports)
        if cmds:
            self.run(cmds)
            LOG.info("%s: %d queue command(s) applied", self.describe(), len(cmds))
        return len(cmds)


class NoQueues(QueueClient):
    def run(self, commands: Sequence[str]) -> list[str]:
        if commands:
            raise QueueConfigError(f"target has no queue channel but queue commands were given: {list(commands)}")
        return []

    def describe(self) -> str:
        return "no queue channel"


def _netns_prefix(netns: str | None) -> list[str]:
    return ["ip", "netns", "exec", netns] if netns else []


class Bmv2ThriftQueues(QueueClient):
    def __init__(
        self,
        thrift_port: int,
        host: str = "127.0.0.1",
        *,
        cli: str = "simple_switch_CLI",
        netns: str | None = None,
        timeout_s: float = 20.0,
    ) -> None:
        self.thrift_port, self.host, self.cli, self.netns, self.timeout_s = thrift_port, host, cli, netns, timeout_s

    def describe(self) -> str:
        return f"bmv2 thrift {self.host}:{self.thrift_port}"

    def run(self, commands: Sequence[str]) -> list[str]:
        in_bytes = [c for c in commands if c.split()[:1] and c.split()[0] in BYTE_COMMANDS]
        if in_bytes:
            raise QueueConfigError(
                f"{self.describe()}: BMv2 has no byte rate or byte depth (its queue rates are packets per "
                f"second, set_queue_rate; depths packets, set_queue_depth): {'; '.join(in_bytes)}; use rate_pps / "
                "depth_pkts, or the reference switch (target refswitch)"
            )
        exe = shutil.which(self.cli) or self.cli
        cmd = [*_netns_prefix(self.netns), exe, "--thrift-port", str(self.thrift_port), "--thrift-ip", self.host]
        try:
            res = subprocess.run(
                cmd, input="\n".join(commands) + "\n", capture_output=True, text=True, timeout=self.timeout_s
            )
        except OSError as exc:
            raise QueueConfigError(f"cannot run {self.cli}: {exc}") from exc
        except subprocess.TimeoutExpired:
            raise QueueConfigError(f"{self.cli} on thrift port {self.thrift_port} timed out") from None
        text = res.stdout + res.stderr
        bad = [line for line in text.splitlines() if _CLI_ERROR.search(line)]
        if res.returncode != 0 or bad:
            detail = "; ".join(bad) or text.strip()[-300:]
            raise QueueConfigError(f"{self.cli} (thrift port {self.thrift_port}) exit {res.returncode}: {detail}")
        return text.splitlines()


class RefSwitchAdminQueues(QueueClient):
    """The same command lines over one TCP connection to mlfc-refswitch's admin port. In a network
    namespace (whose loopback the caller cannot reach) the refswitch CLI runs inside it instead."""

    def __init__(
        self, admin_port: int, host: str = "127.0.0.1", *, netns: str | None = None, timeout_s: float = 10.0
    ) -> None:
        self.admin_port, self.host, self.netns, self.timeout_s = admin_port, host, netns, timeout_s

    def describe(self) -> str:
        return f"refswitch admin {self.host}:{self.admin_port}"

    def run(self, commands: Sequence[str]) -> list[str]:
        replies = self.exchange(commands)
        failed = [f"{c}: {r}" for c, r in zip(commands, replies, strict=True) if r.startswith("Error")]
        if failed:
            raise QueueConfigError(f"{self.describe()}: {'; '.join(failed)}")
        return replies

    def exchange(self, commands: Sequence[str]) -> list[str]:
        """The replies as the switch gave them, errors included (``run`` raises on them)."""
        try:
            return self._exchange_netns(commands) if self.netns else self._exchange(commands)
        except TimeoutError:
            raise QueueConfigError(f"{self.describe()}: no reply within {self.timeout_s:g} s") from None
        except OSError as exc:
            raise QueueConfigError(f"{self.describe()}: {exc}") from exc

    def _exchange(self, commands: Sequence[str]) -> list[str]:
        replies = []
        addr = (self.host, self.admin_port)
        with socket.create_connection(addr, timeout=self.timeout_s) as s, s.makefile("rwb") as f:
            for cmd in commands:
                f.write(cmd.strip().encode() + b"\n")
                f.flush()
                reply = f.readline()
                if not reply:
                    raise ConnectionError("admin connection closed before replying")
                replies.append(reply.decode(errors="replace").rstrip("\n"))
        return replies

    def _exchange_netns(self, commands: Sequence[str]) -> list[str]:
        cmd = [*_netns_prefix(self.netns), sys.executable, "-m", "mlfc.refswitch.cli", "cli", "--raw"]
        cmd += ["--admin-port", str(self.admin_port), "--host", self.host]
        try:
            res = subprocess.run(
                cmd, input="\n".join(commands) + "\n", capture_output=True, text=True, timeout=self.timeout_s
            )
        except subprocess.TimeoutExpired:
            raise TimeoutError from None
        replies = res.stdout.splitlines()
        if len(replies) != len(commands):
            raise QueueConfigError(f"{self.describe()} in {self.netns}: {res.stdout.strip()} {res.stderr.strip()}")
        return replies


def queue_client(target: str, port: int | None, host: str = "127.0.0.1", netns: str | None = None) -> QueueClient:
    """The queue channel of a deployment ``target`` (bmv2 | refswitch | none) listening on ``port``."""
    if target == "bmv2" and port is not None:
        return Bmv2ThriftQueues(port, host, netns=netns)
    if target == "refswitch" and port is not None:
        return RefSwitchAdminQueues(port, host, netns=netns)
    return NoQueues()
