"""The admin endpoint (simple_switch_CLI's queue commands), the mlfc-refswitch command line and the
RefSwitch process manager (Bmv2Switch's API)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mlfc.controller.queues import QueueConfigError, RefSwitchAdminQueues
from mlfc.controller.sync import SwitchConnection
from mlfc.launch.switches import RefSwitch
from mlfc.refswitch.admin import execute
from mlfc.refswitch.server import RefSwitchServer, SwitchOptions
from mlfc.refswitch.tm import PER_QUEUE, SHARED, TrafficManager
from mlfc.testing.refswitch import pipeline

CONSOLE_SCRIPT = Path(sys.executable).parent / "mlfc-refswitch"


@pytest.mark.parametrize(
    ("line", "check"),
    [
        ("set_queue_rate 100", lambda tm: tm.default_rate == 100 and tm.port(3).rate_pps == 100),
        ("set_queue_rate 50 2", lambda tm: tm.port(2).rate_pps == 50 and tm.port(2).queues[0].rate_pps == 0),
        ("set_queue_rate 7 2 5", lambda tm: tm.port(2).queues[5].rate_pps == 7 and tm.port(2).rate_pps == 0),
        ("set_queue_depth 16", lambda tm: tm.port(9).queues[7].capacity == 16),
        ("set_queue_depth 8 1", lambda tm: all(q.capacity == 8 for q in tm.port(1).queues)),
        (
            "set_queue_depth 4 1 2",
            lambda tm: tm.port(1).queues[2].capacity == 4 and tm.port(1).queues[3].capacity == 64,
        ),
        ("set_queue_rate 0x10 1", lambda tm: tm.port(1).rate_pps == 16),
    ],
)
def test_queue_commands_in_shared_mode(line, check):
    tm = TrafficManager(8, SHARED)
    assert execute(line, tm) == "OK"
    assert check(tm)


def test_port_rate_in_per_queue_mode_sets_every_queue():
    tm = TrafficManager(8, PER_QUEUE)
    assert execute("set_queue_rate 30 4", tm) == "OK"
    assert [q.rate_pps for q in tm.port(4).queues] == [30] * 8


@pytest.mark.parametrize(
    "line",
    [
        "set_queue_rate",
        "set_queue_rate x",
        "set_queue_rate 1 2 3 4",
        "set_queue_rate 1 600",
        "set_queue_depth 4 1 8",
        "set_queue_rate -5",
        "mirroring_add 1 2",
    ],
)
def test_bad_commands_say_error(line):
    assert execute(line, TrafficManager(8, SHARED)).startswith("Error")


def test_admin_endpoint_over_tcp():
    with RefSwitchServer(SwitchOptions(grpc_addr="127.0.0.1:0", admin_port=0)) as sw:
        replies = RefSwitchAdminQueues(sw.admin_port).exchange(
            ["set_queue_rate 5 1", "set_queue_depth 9 1 1", "show_queues", "bogus"]
        )
        assert replies[:2] == ["OK", "OK"]
        assert "port 1 rate 5" in replies[2] and "1:0/9" in replies[2]
        assert replies[3].startswith("Error")
        assert sw.tm.port(1).rate_pps == 5


def test_refswitch_process_like_bmv2switch(tmp_path):
    sw = RefSwitch(name="t1", device_id=3, log_file=tmp_path / "sw.log")
    with sw:
        assert sw.proc is not None and sw.grpc_addr == f"127.0.0.1:{sw.grpc_port}"
        with SwitchConnection(sw.grpc_addr, device_id=3, pipeline=pipeline(), election_id=1) as conn:
            assert conn.primary, "arbitration on device 3 made us primary"
            assert conn.load_pipeline() and conn.pipeline_cookie() == pipeline().cookie
        assert "OK" in sw.cli("set_queue_rate 100 1", "set_queue_depth 16 1 3")
        with pytest.raises(QueueConfigError):
            sw.cli("set_queue_depth 16 1 9")
        # The stand-alone CLI reads commands on stdin, like simple_switch_CLI.
        res = subprocess.run(
            [str(CONSOLE_SCRIPT), "cli", "--admin-port", str(sw.admin_port)],
            input="set_queue_rate 7 2\nshow_queues\n",
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert res.returncode == 0, res.stdout + res.stderr
        assert "RuntimeCmd: set_queue_rate 7 2" in res.stdout and "port 2 rate 7" in res.stdout
        res = subprocess.run(
            [str(CONSOLE_SCRIPT), "cli", "--admin-port", str(sw.admin_port)],
            input="set_queue_rate nope\n",
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert res.returncode == 1 and "Error" in res.stdout
        sw.kill()
        assert sw.proc is None
    sw.stop()  # idempotent
    assert "mlfc-refswitch: device 3" in (tmp_path / "sw.log").read_text()


def test_command_line_errors():
    res = subprocess.run([str(CONSOLE_SCRIPT), "-i", "1@"], capture_output=True, text=True, timeout=30)
    assert res.returncode == 2 and "PORT@IFACE" in res.stderr
    res = subprocess.run(
        [str(CONSOLE_SCRIPT), "-i", "1@no-such-iface0", "--admin-port", "0", "--grpc-addr", "127.0.0.1:0"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert res.returncode == 1 and "cannot start" in res.stderr
