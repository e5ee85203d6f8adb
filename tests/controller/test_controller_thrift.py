"""The BMv2 queue adapter: the CLI it runs, what it feeds it, and how it reports failures.

Offline tests use a stand-in ``simple_switch_CLI`` script; the bmv2 test drives the real one."""

from __future__ import annotations

import asyncio
import stat
import sys
from pathlib import Path

import pytest

from mlfc.controller.bmv2 import free_port
from mlfc.controller.config import QueueSettings
from mlfc.controller.thrift import Bmv2ThriftAdapter, NullQueueAdapter, QueueConfigError

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
    assert Bmv2ThriftAdapter.commands(PORTS) == [
        "set_queue_depth 32 1",
        "set_queue_rate 2000 3",
        "set_queue_depth 64 3",
    ]


def test_one_cli_process_gets_every_command(tmp_path: Path) -> None:
    cli, record = fake_cli(tmp_path)
    adapter = Bmv2ThriftAdapter(9099, cli=cli)
    asyncio.run(adapter.configure(PORTS))
    lines = record.read_text().splitlines()
    assert lines[0] == "--thrift-port 9099 --thrift-ip 127.0.0.1"
    assert lines[1:] == Bmv2ThriftAdapter.commands(PORTS)


@pytest.mark.parametrize(("reply", "code"), [("Invalid queue depth", 0), ("", 1)])
def test_cli_errors_raise(tmp_path: Path, reply: str, code: int) -> None:
    cli, _ = fake_cli(tmp_path, reply, code)
    with pytest.raises(QueueConfigError, match="thrift port 9099"):
        asyncio.run(Bmv2ThriftAdapter(9099, cli=cli).configure(PORTS))


def test_missing_cli_raises() -> None:
    with pytest.raises(QueueConfigError, match="cannot run"):
        asyncio.run(Bmv2ThriftAdapter(9099, cli="/nonexistent/simple_switch_CLI").configure(PORTS))


def test_no_commands_no_process(tmp_path: Path) -> None:
    cli, record = fake_cli(tmp_path)
    asyncio.run(Bmv2ThriftAdapter(9099, cli=cli).configure({1: QueueSettings()}))
    assert not record.exists()


def test_null_adapter_refuses_settings() -> None:
    asyncio.run(NullQueueAdapter().configure({1: QueueSettings()}))
    with pytest.raises(QueueConfigError, match=r"ports \[1, 3\]"):
        asyncio.run(NullQueueAdapter().configure(PORTS))


@pytest.mark.bmv2
def test_real_cli_against_bmv2(bmv2_factory) -> None:
    sw = bmv2_factory(device_id=1)
    adapter = Bmv2ThriftAdapter(sw.thrift_port)
    out = asyncio.run(adapter.run(["set_queue_rate 1000 1", "set_queue_depth 16 1"]))
    assert "RuntimeCmd" in out
    with pytest.raises(QueueConfigError, match="Unknown syntax"):
        asyncio.run(adapter.run(["set_queue_rte 1000 1"]))
    dead = Bmv2ThriftAdapter(free_port())  # nothing listens there
    with pytest.raises(QueueConfigError):
        asyncio.run(dead.run(["set_queue_rate 1000 1"]))
