"""The reference switch's queue adapter (target ``refswitch``): simple_switch_CLI command lines sent to the
refswitch admin port. Offline tests use a stand-in line server; the last ones start a real ``RefSwitch``."""

from __future__ import annotations

import asyncio
import socketserver
import threading
from collections.abc import Iterator

import pytest

from mlfc.controller.bmv2 import free_port
from mlfc.controller.config import QueueSettings, SwitchConfig, parse_config
from mlfc.controller.errors import ValidationError
from mlfc.controller.thrift import (
    Bmv2ThriftAdapter,
    NullQueueAdapter,
    QueueConfigError,
    RefSwitchAdminAdapter,
    adapter_for,
)

PORTS = {3: QueueSettings(2000, 64), 1: QueueSettings(None, 32), 2: QueueSettings()}


class _FakeAdmin(socketserver.ThreadingTCPServer):
    """Records command lines; replies ``Error: ...`` to lines containing ``bad``, else ``OK``."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, silent: bool = False) -> None:
        self.lines: list[str] = []
        self.silent = silent
        server = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                for raw in self.rfile:
                    line = raw.decode().strip()
                    server.lines.append(line)
                    if server.silent:
                        continue
                    self.wfile.write(b"Error: no such thing\n" if "bad" in line else b"OK\n")

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def port(self) -> int:
        return self.server_address[1]


@pytest.fixture
def fake_admin() -> Iterator[_FakeAdmin]:
    server = _FakeAdmin()
    yield server
    server.shutdown()
    server.server_close()


def test_same_command_lines_as_bmv2() -> None:
    assert (
        RefSwitchAdminAdapter.commands(PORTS)
        == Bmv2ThriftAdapter.commands(PORTS)
        == [
            "set_queue_depth 32 1",
            "set_queue_rate 2000 3",
            "set_queue_depth 64 3",
        ]
    )


def test_configure_sends_every_command(fake_admin: _FakeAdmin) -> None:
    asyncio.run(RefSwitchAdminAdapter(fake_admin.port).configure(PORTS))
    assert fake_admin.lines == RefSwitchAdminAdapter.commands(PORTS)


def test_no_commands_no_connection(fake_admin: _FakeAdmin) -> None:
    asyncio.run(RefSwitchAdminAdapter(fake_admin.port).configure({1: QueueSettings()}))
    assert fake_admin.lines == []


def test_error_replies_raise_and_name_the_command(fake_admin: _FakeAdmin) -> None:
    adapter = RefSwitchAdminAdapter(fake_admin.port)
    with pytest.raises(QueueConfigError, match=r"set_queue_rate bad 1: Error: no such thing"):
        asyncio.run(adapter.run(["set_queue_rate bad 1", "set_queue_depth 8 1"]))
    assert fake_admin.lines == ["set_queue_rate bad 1", "set_queue_depth 8 1"], "the rest is still sent"


def test_unreachable_admin_port_raises() -> None:
    with pytest.raises(QueueConfigError, match=r"refswitch admin 127\.0\.0\.1"):
        asyncio.run(RefSwitchAdminAdapter(free_port()).run(["set_queue_rate 1 1"]))


def test_silent_admin_times_out() -> None:
    server = _FakeAdmin(silent=True)
    try:
        with pytest.raises(QueueConfigError, match="no reply within"):
            asyncio.run(RefSwitchAdminAdapter(server.port, timeout_s=0.3).run(["set_queue_rate 1 1"]))
    finally:
        server.shutdown()
        server.server_close()


def _doc(target: str, **switch: object) -> dict:
    sw = {"name": "s1", "grpc_addr": "127.0.0.1:9559", "target": target, "ports": [{"port": 1, "rate_pps": 500}]}
    return {"switches": [{**sw, **switch}]}


def test_config_target_refswitch_uses_thrift_port_as_the_admin_port() -> None:
    cfg = parse_config(_doc("refswitch", thrift_port=9190))
    adapter = adapter_for(cfg.switches[0])
    assert isinstance(adapter, RefSwitchAdminAdapter)
    assert (adapter.admin_port, adapter.host) == (9190, "127.0.0.1")
    assert adapter.describe() == "refswitch admin 127.0.0.1:9190"


def test_config_refswitch_with_queue_settings_needs_the_port() -> None:
    with pytest.raises(ValidationError, match=r"^switches\[0\]\.thrift_port: required on a refswitch switch"):
        parse_config(_doc("refswitch"))
    doc = _doc("refswitch")
    doc["switches"][0]["ports"] = [1]
    doc["defaults"] = {"queue": {"depth_pkts": 64}}
    with pytest.raises(ValidationError, match=r"^switches\[0\]\.thrift_port: required: defaults.queue"):
        parse_config(doc)


def test_adapter_for_other_targets() -> None:
    assert isinstance(adapter_for(SwitchConfig("s", "127.0.0.1:1", target="bmv2", thrift_port=9090)), Bmv2ThriftAdapter)
    assert isinstance(adapter_for(SwitchConfig("s", "127.0.0.1:1", target="none", thrift_port=9090)), NullQueueAdapter)
    assert isinstance(adapter_for(SwitchConfig("s", "127.0.0.1:1", target="refswitch")), NullQueueAdapter)


# ---- against a real reference switch (no interfaces, so no root needed) -----------------------------


@pytest.fixture(scope="module")
def refswitch():
    from mlfc.refswitch.switch import RefSwitch

    with RefSwitch(name="ctl-ref", queue_mode="shared") as sw:
        yield sw


def _port_line(sw, port: int) -> str:
    lines = sw.cli("show_queues").split(" | ")
    return next(line for line in lines if line.startswith(f"port {port} "))


def test_real_refswitch_show_queues_reflects_rate_and_depth(refswitch) -> None:
    adapter = RefSwitchAdminAdapter(refswitch.admin_port)
    asyncio.run(adapter.configure({1: QueueSettings(500, 32), 2: QueueSettings(None, 16)}))
    port1 = _port_line(refswitch, 1)
    assert port1.startswith("port 1 rate 500 queues "), port1
    assert all(q.endswith("/32@-") for q in port1.split("queues ")[1].split()), "depth per queue, no queue caps"
    port2 = _port_line(refswitch, 2)
    assert port2.startswith("port 2 rate - queues "), port2
    assert "/16@" in port2


def test_real_refswitch_refuses_a_bad_command(refswitch) -> None:
    adapter = RefSwitchAdminAdapter(refswitch.admin_port)
    with pytest.raises(QueueConfigError, match="set_queue_rate -1 1"):
        asyncio.run(adapter.run(["set_queue_rate -1 1"]))
    with pytest.raises(QueueConfigError, match="unknown command"):
        asyncio.run(adapter.run(["set_queue_rte 1000 1"]))
