"""The queue clients (controller/queues.py): the command lines they send, how they report failures, and the
factory for deployment targets. Offline tests use a stand-in ``simple_switch_CLI`` script and a stand-in
admin line server; the last tests drive a real simple_switch_CLI (BMv2) and a real ``RefSwitch``."""

from __future__ import annotations

import socketserver
import stat
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from mlfc.controller.config import parse_config
from mlfc.controller.errors import ValidationError
from mlfc.controller.queues import (
    Bmv2ThriftQueues,
    NoQueues,
    QueueConfigError,
    QueueSettings,
    RefSwitchAdminQueues,
    queue_client,
    queue_commands,
)
from mlfc.launch.process import free_port

FAKE_CLI = """#!{python}
import sys
record = open({record!r}, "w")
record.write(" ".join(sys.argv[1:]) + "\\n")
for line in sys.stdin:
    record.write(line)
    print("RuntimeCmd: " + ({reply!r} if "depth" in line else ""))
sys.exit({code})
"""


def fake_cli(tmp_path: Path, reply: str = "", code: int = 0) -> tuple[str, Path]:
    record = tmp_path / "record.txt"
    script = tmp_path / "fake_cli"
    script.write_text(FAKE_CLI.format(python=sys.executable, record=str(record), reply=reply, code=code))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script), record


PORTS = {3: QueueSettings(2000, 64), 1: QueueSettings(None, 32), 2: QueueSettings()}


def test_commands_per_port() -> None:
    assert queue_commands(PORTS) == [
        "set_queue_depth 32 1",
        "set_queue_rate 2000 3",
        "set_queue_depth 64 3",
    ]


def test_one_cli_process_gets_every_command(tmp_path: Path) -> None:
    cli, record = fake_cli(tmp_path)
    adapter = Bmv2ThriftQueues(9099, cli=cli)
    adapter.configure(PORTS)
    lines = record.read_text().splitlines()
    assert lines[0] == "--thrift-port 9099 --thrift-ip 127.0.0.1"
    assert lines[1:] == queue_commands(PORTS)


@pytest.mark.parametrize(("reply", "code"), [("Invalid queue depth", 0), ("", 1)])
def test_cli_errors_raise(tmp_path: Path, reply: str, code: int) -> None:
    cli, _ = fake_cli(tmp_path, reply, code)
    with pytest.raises(QueueConfigError, match="thrift port 9099"):
        Bmv2ThriftQueues(9099, cli=cli).configure(PORTS)


def test_missing_cli_raises() -> None:
    with pytest.raises(QueueConfigError, match="cannot run"):
        Bmv2ThriftQueues(9099, cli="/nonexistent/simple_switch_CLI").configure(PORTS)


def test_no_commands_no_process(tmp_path: Path) -> None:
    cli, record = fake_cli(tmp_path)
    Bmv2ThriftQueues(9099, cli=cli).configure({1: QueueSettings()})
    assert not record.exists()


def test_null_adapter_refuses_settings() -> None:
    NoQueues().configure({1: QueueSettings()})
    with pytest.raises(QueueConfigError, match="no queue channel but queue commands were given"):
        NoQueues().configure(PORTS)


@pytest.mark.bmv2
def test_real_cli_against_bmv2(bmv2_factory) -> None:
    sw = bmv2_factory(device_id=1)
    adapter = Bmv2ThriftQueues(sw.thrift_port)
    out = adapter.run(["set_queue_rate 1000 1", "set_queue_depth 16 1"])
    assert any("RuntimeCmd" in line for line in out)
    with pytest.raises(QueueConfigError, match="Unknown syntax"):
        adapter.run(["set_queue_rte 1000 1"])
    dead = Bmv2ThriftQueues(free_port())  # nothing listens there
    with pytest.raises(QueueConfigError):
        dead.run(["set_queue_rate 1000 1"])


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


def test_configure_sends_every_command(fake_admin: _FakeAdmin) -> None:
    RefSwitchAdminQueues(fake_admin.port).configure(PORTS)
    assert fake_admin.lines == queue_commands(PORTS)


def test_no_commands_no_connection(fake_admin: _FakeAdmin) -> None:
    RefSwitchAdminQueues(fake_admin.port).configure({1: QueueSettings()})
    assert fake_admin.lines == []


def test_error_replies_raise_and_name_the_command(fake_admin: _FakeAdmin) -> None:
    adapter = RefSwitchAdminQueues(fake_admin.port)
    with pytest.raises(QueueConfigError, match=r"set_queue_rate bad 1: Error: no such thing"):
        adapter.run(["set_queue_rate bad 1", "set_queue_depth 8 1"])
    assert fake_admin.lines == ["set_queue_rate bad 1", "set_queue_depth 8 1"], "the rest is still sent"


def test_unreachable_admin_port_raises() -> None:
    with pytest.raises(QueueConfigError, match=r"refswitch admin 127\.0\.0\.1"):
        RefSwitchAdminQueues(free_port()).run(["set_queue_rate 1 1"])


def test_silent_admin_times_out() -> None:
    server = _FakeAdmin(silent=True)
    try:
        with pytest.raises(QueueConfigError, match="no reply within"):
            RefSwitchAdminQueues(server.port, timeout_s=0.3).run(["set_queue_rate 1 1"])
    finally:
        server.shutdown()
        server.server_close()


def _doc(target: str, **switch: object) -> dict:
    sw = {"name": "s1", "grpc_addr": "127.0.0.1:9559", "target": target, "ports": [{"port": 1, "rate_pps": 500}]}
    return {"switches": [{**sw, **switch}]}


def test_config_target_refswitch_uses_thrift_port_as_the_admin_port() -> None:
    cfg = parse_config(_doc("refswitch", thrift_port=9190))
    sw = cfg.switches[0]
    adapter = queue_client(sw.target, sw.thrift_port, sw.thrift_host)
    assert isinstance(adapter, RefSwitchAdminQueues)
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


def test_queue_client_for_other_targets() -> None:
    assert isinstance(queue_client("bmv2", 9090), Bmv2ThriftQueues)
    assert isinstance(queue_client("none", 9090), NoQueues)
    assert isinstance(queue_client("refswitch", None), NoQueues)


# ---- against a real reference switch (no interfaces, so no root needed) -----------------------------


@pytest.fixture(scope="module")
def refswitch():
    from mlfc.launch.switches import RefSwitch

    with RefSwitch(name="ctl-ref", queue_mode="shared") as sw:
        yield sw


def _port_line(sw, port: int) -> str:
    lines = sw.cli("show_queues").split(" | ")
    return next(line for line in lines if line.startswith(f"port {port} "))


def test_real_refswitch_show_queues_reflects_rate_and_depth(refswitch) -> None:
    adapter = refswitch.queues()
    adapter.configure({1: QueueSettings(500, 32), 2: QueueSettings(None, 16)})
    port1 = _port_line(refswitch, 1)
    assert port1.startswith("port 1 rate 500 queues "), port1
    assert all(q.endswith("/32@-") for q in port1.split("queues ")[1].split()), "depth per queue, no queue caps"
    port2 = _port_line(refswitch, 2)
    assert port2.startswith("port 2 rate - queues "), port2
    assert "/16@" in port2


def test_real_refswitch_refuses_a_bad_command(refswitch) -> None:
    adapter = refswitch.queues()
    with pytest.raises(QueueConfigError, match="set_queue_rate -1 1"):
        adapter.run(["set_queue_rate -1 1"])
    with pytest.raises(QueueConfigError, match="unknown command"):
        adapter.run(["set_queue_rte 1000 1"])
