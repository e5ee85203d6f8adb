"""The two dataplanes the controller's integration tests run against, behind one interface.

Both give what the tests use of ``Bmv2Process``: ``device_id``, ``grpc_port``, ``grpc_addr``,
``thrift_port`` (for the reference switch: its admin port, which takes simple_switch_CLI's queue
commands), ``interfaces`` ({port: iface}), ``start()``, ``stop()`` (a crash: SIGKILL), ``restart()``
on the same ports, ``log_path`` and ``tail()``; plus ``target``, the deployment file's ``target``.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Mapping
from pathlib import Path

from mlfc.controller.bmv2 import Bmv2Process, free_port
from mlfc.refswitch.switch import RefSwitch


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


class Bmv2Switch(Bmv2Process):
    """simple_switch_grpc; the controller shapes its queues over Thrift."""

    target = "bmv2"


class RefSwitchProcess:
    """An ``mlfc-refswitch`` process (``RefSwitch``) with ``Bmv2Process``'s interface."""

    target = "refswitch"

    def __init__(
        self,
        device_id: int = 1,
        grpc_port: int | None = None,
        thrift_port: int | None = None,
        interfaces: Mapping[int, str] | None = None,
        log_dir: Path | None = None,
        priority_queues: int = 8,
    ) -> None:
        self.device_id = device_id
        self.grpc_port = grpc_port or free_port()
        self.thrift_port = thrift_port or free_port()  # the admin port
        self.interfaces = dict(interfaces or {})
        self.log_dir = Path(log_dir) if log_dir else None
        self.priority_queues = priority_queues
        self.switch: RefSwitch | None = None
        self.starts = 0

    @property
    def grpc_addr(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def log_path(self) -> Path | None:
        return self.log_dir / f"refswitch-{self.device_id}.log" if self.log_dir else None

    def start(self, timeout_s: float = 20.0) -> RefSwitchProcess:
        if self.switch is not None and self.switch.proc is not None and self.switch.proc.poll() is None:
            return self
        self.switch = RefSwitch(
            name=f"s{self.device_id}",
            device_id=self.device_id,
            ports=self.interfaces,
            grpc_port=self.grpc_port,
            admin_port=self.thrift_port,
            priority_queues=self.priority_queues,
            log_file=self.log_path,
        )
        self.switch.start(timeout=timeout_s)
        self.starts += 1
        return self

    def stop(self) -> None:
        """SIGKILL (``RefSwitch.kill``): the switch disappears as in a crash, its P4Runtime streams break."""
        if self.switch is not None:
            self.switch.kill()
        # The ports must be free again before a restart binds them.
        deadline = time.monotonic() + 5
        while (_listening(self.grpc_port) or _listening(self.thrift_port)) and time.monotonic() < deadline:
            time.sleep(0.05)

    def restart(self, timeout_s: float = 20.0) -> RefSwitchProcess:
        self.stop()
        return self.start(timeout_s)

    def cli(self, *commands: str) -> str:
        assert self.switch is not None, "not started"
        return self.switch.cli(*commands)

    @property
    def pid(self) -> int | None:
        proc = self.switch.proc if self.switch else None
        return None if proc is None else proc.pid

    def tail(self, n: int = 2000) -> str:
        if self.log_path is None:
            return ""
        text = ""
        for path in (self.log_path.with_suffix(".out"), self.log_path):
            with contextlib.suppress(OSError):
                text += path.read_text(errors="replace")
        return text[-n:]


SWITCH_CLASSES: dict[str, type[Bmv2Switch] | type[RefSwitchProcess]] = {"bmv2": Bmv2Switch, "ref": RefSwitchProcess}
