"""The whole reference switch in one process: device state, dataplane, P4Runtime and admin endpoints."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import grpc

from mlfc.refswitch.admin import AdminServer
from mlfc.refswitch.dataplane import Dataplane
from mlfc.refswitch.device import Device
from mlfc.refswitch.p4runtime_server import P4RuntimeService, serve
from mlfc.refswitch.pipeline import RandomSource
from mlfc.refswitch.tm import SHARED, TrafficManager
from mlfc.tls import TlsConfig, check_listen

log = logging.getLogger("mlfc.refswitch")


@dataclass
class SwitchOptions:
    device_id: int = 1
    ports: dict[int, str] = field(default_factory=dict)
    grpc_addr: str = "127.0.0.1:9559"
    admin_host: str = "127.0.0.1"
    admin_port: int = 0
    queue_mode: str = SHARED
    priority_queues: int = 8
    queue_depth: int = 64
    tls: TlsConfig | None = None  # P4Runtime over TLS (docs/tls.md); None: plain text
    allow_remote: bool = False  # P4Runtime on a non-loopback address (only with TLS)


class RefSwitchServer:
    def __init__(self, options: SwitchOptions, rng: RandomSource | None = None) -> None:
        self.options = options
        self.tm = TrafficManager(options.priority_queues, options.queue_mode, options.queue_depth)
        self.device = Device(options.device_id, self.tm, rng)
        self.dataplane = Dataplane(self.device, options.ports)
        self.grpc_server: grpc.Server | None = None
        self.p4runtime: P4RuntimeService | None = None
        self.admin: AdminServer | None = None

    def start(self) -> RefSwitchServer:
        check_listen(self.options.grpc_addr, self.options.allow_remote, self.options.tls)
        try:
            self.dataplane.start()
            self.grpc_server, self.p4runtime = serve(self.device, self.options.grpc_addr, tls=self.options.tls)
            self.admin = AdminServer(
                self.options.admin_host,
                self.options.admin_port,
                self.tm,
                on_change=self.dataplane.wake,
                stats=self.dataplane.describe_stats,
            ).start()
        except BaseException:
            self.stop()
            raise
        log.info(
            "reference switch up: device %d, ports %s, P4Runtime %s%s, admin %s:%d, queues %s x%d",
            self.options.device_id,
            self.options.ports or "none",
            self.grpc_addr,
            _tls_text(self.options.tls),
            self.options.admin_host,
            self.admin_port,
            self.options.queue_mode,
            self.options.priority_queues,
        )
        return self

    @property
    def grpc_addr(self) -> str:
        host = self.options.grpc_addr.rsplit(":", 1)[0]
        return f"{host}:{self.grpc_server.port}" if self.grpc_server else self.options.grpc_addr  # type: ignore[attr-defined]

    @property
    def admin_port(self) -> int:
        return self.admin.port if self.admin else self.options.admin_port

    def stop(self) -> None:
        if self.admin is not None:
            self.admin.stop()
            self.admin = None
        if self.grpc_server is not None:
            self.grpc_server.stop(grace=0.1).wait(2)
            self.grpc_server = None
        self.dataplane.stop()

    def __enter__(self) -> RefSwitchServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _tls_text(tls: TlsConfig | None) -> str:
    if tls is None:
        return ""
    return " (TLS, client certificates required)" if tls.client_auth else " (TLS)"
