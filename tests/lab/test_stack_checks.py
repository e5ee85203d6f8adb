"""The lab refuses to measure on a bottleneck that was never shaped (issue 16, item 6): a queue channel
that fails at start-up stops the run naming the switch and the cause, and a simple_switch_CLI whose
Python cannot import thrift is caught by the pre-flight check."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import yaml

from mlfc import contract
from mlfc.lab.stack import StackError, check_queues
from mlfc.launch.daemons import ControllerProcess
from mlfc.launch.process import free_port
from mlfc.launch.switches import RefSwitch, thrift_missing


def test_a_queue_channel_that_fails_stops_the_run(tmp_path: Path) -> None:
    with RefSwitch("s1", 1, log_file=tmp_path / "sw.log") as sw:
        doc = {
            "pipeline": {"p4info": str(contract.P4INFO), "device_config": str(contract.BMV2_JSON)},
            "listen": {"intent": f"127.0.0.1:{free_port()}", "metrics": f"127.0.0.1:{free_port()}"},
            # The admin port is wrong: nothing listens there, so no queue can be shaped.
            "switches": [{"name": "s1", "grpc_addr": sw.grpc_addr, "target": "refswitch",
                          "thrift_port": free_port(), "ports": [{"port": 1, "rate_pps": 1500}]}],
        }  # fmt: skip
        path = tmp_path / "deployment.yaml"
        path.write_text(yaml.safe_dump(doc))
        with ControllerProcess(path, tmp_path / "controller.log") as ctl:
            status = ctl.client.wait_synced(0, timeout_s=30)
            assert status.switches[0].queue_error, status
            with pytest.raises(StackError, match=r"queue settings not applied.*s1: refswitch admin"):
                check_queues(status)


def _fake_cli(tmp_path: Path, interpreter: Path) -> None:
    cli = tmp_path / "simple_switch_CLI"
    cli.write_text(f"#!{interpreter}\n")
    cli.chmod(cli.stat().st_mode | stat.S_IEXEC)


def test_a_cli_whose_python_lacks_thrift_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    python = tmp_path / "python-without-thrift"
    python.write_text('#!/bin/sh\n[ "$2" = "import thrift" ] && exit 1\nexit 0\n')
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    _fake_cli(tmp_path, python)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    problem = thrift_missing()
    assert problem is not None and "cannot import thrift" in problem and str(python) in problem


def test_a_cli_whose_python_has_thrift_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    python = tmp_path / "python-with-thrift"
    python.write_text("#!/bin/sh\nexit 0\n")
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    _fake_cli(tmp_path, python)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert thrift_missing() is None
