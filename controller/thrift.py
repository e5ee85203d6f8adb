"""Queue shaping (rate, depth) per port: not part of P4Runtime, so each target gets an adapter.

``QueueAdapter`` is the interface (a Tofino traffic-manager adapter would implement it over
bfrt/gNMI); ``Bmv2ThriftAdapter`` drives ``simple_switch_CLI --thrift-port N`` with all commands of a
switch in one CLI process, because each CLI start costs a Python interpreter start-up;
``RefSwitchAdminAdapter`` sends the same command lines to mlfc-refswitch's admin port (a loopback TCP
line protocol: one command per line, one reply line each, ``OK``/``Error: ...``; docs/refswitch.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import shutil
from abc import ABC, abstractmethod
from collections.abc import Mapping

from mlfc.controller.config import QueueSettings, SwitchConfig

LOG = logging.getLogger(__name__)

_CLI_ERROR = re.compile(r"(Error|Invalid|Could not connect|Traceback|exception|Unknown syntax|\*\*\*)", re.IGNORECASE)


class QueueConfigError(RuntimeError):
    """The target refused a queue setting or could not be reached."""


class QueueAdapter(ABC):
    """Applies per-port queue settings; called after every (re)connection because a restarted
    switch has forgotten them."""

    @abstractmethod
    async def configure(self, ports: Mapping[int, QueueSettings]) -> None: ...

    def describe(self) -> str:
        return type(self).__name__


class NullQueueAdapter(QueueAdapter):
    """For targets whose queues are managed elsewhere; refuses settings rather than ignoring them."""

    async def configure(self, ports: Mapping[int, QueueSettings]) -> None:
        wanted = {p: q for p, q in ports.items() if q.rate_pps is not None or q.depth_pkts is not None}
        if wanted:
            raise QueueConfigError(
                f"target has no queue adapter but queue settings were given for ports {sorted(wanted)}"
            )


def queue_commands(ports: Mapping[int, QueueSettings]) -> list[str]:
    """``set_queue_rate <pps> <port>`` / ``set_queue_depth <pkts> <port>``: per port. BMv2 applies them to
    each of the port's priority queues; the reference switch in shared mode makes the rate the port's one
    rate, shared by its queues (depth is per queue in both)."""
    out = []
    for port, q in sorted(ports.items()):
        if q.rate_pps is not None:
            out.append(f"set_queue_rate {q.rate_pps} {port}")
        if q.depth_pkts is not None:
            out.append(f"set_queue_depth {q.depth_pkts} {port}")
    return out


class Bmv2ThriftAdapter(QueueAdapter):
    def __init__(
        self, thrift_port: int, host: str = "127.0.0.1", cli: str = "simple_switch_CLI", timeout_s: float = 20.0
    ) -> None:
        self.thrift_port = thrift_port
        self.host = host
        self.cli = cli
        self.timeout_s = timeout_s

    def describe(self) -> str:
        return f"bmv2 thrift {self.host}:{self.thrift_port}"

    @staticmethod
    def commands(ports: Mapping[int, QueueSettings]) -> list[str]:
        return queue_commands(ports)

    async def configure(self, ports: Mapping[int, QueueSettings]) -> None:
        cmds = self.commands(ports)
        if cmds:
            await self.run(cmds)
            LOG.info("%s: %d queue command(s) applied", self.describe(), len(cmds))

    async def run(self, cmds: list[str]) -> str:
        """Feed ``cmds`` to one CLI process; raise ``QueueConfigError`` with its output on any error."""
        exe = shutil.which(self.cli) or self.cli
        try:
            proc = await asyncio.create_subprocess_exec(
                exe,
                "--thrift-port",
                str(self.thrift_port),
                "--thrift-ip",
                self.host,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
        except OSError as exc:
            raise QueueConfigError(f"cannot run {self.cli}: {exc}") from exc
        try:
            out, _ = await asyncio.wait_for(proc.communicate("\n".join(cmds).encode() + b"\n"), self.timeout_s)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise QueueConfigError(f"{self.cli} on thrift port {self.thrift_port} timed out") from None
        text = out.decode(errors="replace")
        bad = [line for line in text.splitlines() if _CLI_ERROR.search(line)]
        if proc.returncode != 0 or bad:
            detail = "; ".join(bad) or text.strip()[-300:]
            raise QueueConfigError(f"{self.cli} (thrift port {self.thrift_port}) exit {proc.returncode}: {detail}")
        return text


class RefSwitchAdminAdapter(QueueAdapter):
    """simple_switch_CLI's command lines, sent over one TCP connection to the refswitch admin port."""

    def __init__(self, admin_port: int, host: str = "127.0.0.1", timeout_s: float = 10.0) -> None:
        self.admin_port = admin_port
        self.host = host
        self.timeout_s = timeout_s

    def describe(self) -> str:
        return f"refswitch admin {self.host}:{self.admin_port}"

    @staticmethod
    def commands(ports: Mapping[int, QueueSettings]) -> list[str]:
        return queue_commands(ports)

    async def configure(self, ports: Mapping[int, QueueSettings]) -> None:
        cmds = self.commands(ports)
        if cmds:
            await self.run(cmds)
            LOG.info("%s: %d queue command(s) applied", self.describe(), len(cmds))

    async def run(self, cmds: list[str]) -> str:
        """Send ``cmds``; return the replies (one line each). Every command is sent even after an
        error (as simple_switch_CLI does), then ``QueueConfigError`` names the failed ones."""
        try:
            replies = await asyncio.wait_for(self._exchange(cmds), self.timeout_s)
        except TimeoutError:
            raise QueueConfigError(f"{self.describe()}: no reply within {self.timeout_s:g} s") from None
        except OSError as exc:
            raise QueueConfigError(f"{self.describe()}: {exc}") from exc
        failed = [f"{c}: {r}" for c, r in zip(cmds, replies, strict=True) if r.startswith("Error")]
        if failed:
            raise QueueConfigError(f"{self.describe()}: {'; '.join(failed)}")
        return "\n".join(replies)

    async def _exchange(self, cmds: list[str]) -> list[str]:
        reader, writer = await asyncio.open_connection(self.host, self.admin_port)
        try:
            replies = []
            for cmd in cmds:
                writer.write(cmd.strip().encode() + b"\n")
                await writer.drain()
                line = await reader.readline()
                if not line:
                    raise ConnectionError("admin connection closed before replying")
                replies.append(line.decode(errors="replace").rstrip("\n"))
            return replies
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()


def queue_settings(sw: SwitchConfig, default: QueueSettings) -> dict[int, QueueSettings]:
    """Each configured port's settings, a field left unset falling back to the deployment default."""
    out = {}
    for p in sw.ports:
        rate = p.queue.rate_pps if p.queue.rate_pps is not None else default.rate_pps
        depth = p.queue.depth_pkts if p.queue.depth_pkts is not None else default.depth_pkts
        out[p.port] = QueueSettings(rate, depth)
    return out


def adapter_for(sw: SwitchConfig) -> QueueAdapter:
    if sw.target == "bmv2" and sw.thrift_port is not None:
        return Bmv2ThriftAdapter(sw.thrift_port, sw.thrift_host)
    if sw.target == "refswitch" and sw.thrift_port is not None:
        return RefSwitchAdminAdapter(sw.thrift_port, sw.thrift_host)
    return NullQueueAdapter()
