"""Byte rates and byte depths in the controller's queue settings: ``QueueSettings(rate_bps=...,
depth_bytes=...)``, the deployment file's ``rate_bps`` / ``depth_bytes``, the reference switch applying
them and BMv2 refusing them (its queue rates are packets per second)."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest
from controller_helpers import config_doc, switch_doc

from mlfc.controller.config import load_config, parse_config, queue_settings, write_config
from mlfc.controller.errors import ValidationError
from mlfc.controller.queues import Bmv2ThriftQueues, QueueConfigError, QueueSettings, queue_commands
from mlfc.refswitch.server import RefSwitchServer, SwitchOptions


def test_settings_take_one_rate_unit() -> None:
    assert QueueSettings(rate_bps=10**9).in_bytes and QueueSettings(depth_bytes=9000).in_bytes
    assert not QueueSettings(1000, 64).in_bytes
    with pytest.raises(ValueError, match="rate_pps or rate_bps"):
        QueueSettings(rate_pps=1000, rate_bps=10**9)


def test_byte_commands_per_port() -> None:
    ports = {2: QueueSettings(rate_bps=10**8, depth_pkts=64, depth_bytes=96_000), 1: QueueSettings(1500)}
    assert queue_commands(ports) == [
        "set_queue_rate 1500 1",
        "set_queue_rate_bps 100000000 2",
        "set_queue_depth 64 2",
        "set_queue_depth_bytes 96000 2",
    ]


def test_bmv2_refuses_byte_settings_without_running_its_cli(tmp_path: Path) -> None:
    record = tmp_path / "ran"
    cli = tmp_path / "fake_cli"
    cli.write_text(f"#!{sys.executable}\nopen({str(record)!r}, 'w').write('ran')\n")
    cli.chmod(cli.stat().st_mode | stat.S_IEXEC)
    adapter = Bmv2ThriftQueues(9099, cli=str(cli))
    with pytest.raises(QueueConfigError, match=r"BMv2 has no byte rate.*set_queue_rate_bps 100000000 1"):
        adapter.configure({1: QueueSettings(rate_bps=10**8)})
    with pytest.raises(QueueConfigError, match=r"BMv2 has no byte rate.*set_queue_depth_bytes 9000 1 2"):
        adapter.set_depth_bytes(9000, 1, 2)
    assert not record.exists(), "nothing was sent to BMv2"
    adapter.set_rate(1000, 1)  # packets per second: as before
    assert record.exists()


def _ref(**port: object) -> dict:
    return config_doc(switch_doc(target="refswitch", ports=[1, 2, {"port": 3, **port}]))


def _bmv2(**port: object) -> dict:
    return config_doc(switch_doc(ports=[1, 2, {"port": 3, **port}]))


def test_refswitch_ports_take_a_byte_rate_and_a_byte_depth() -> None:
    cfg = parse_config(_ref(rate_bps=10**8, depth_bytes=96_000))
    assert queue_settings(cfg.switches[0], cfg.defaults.queue) == {
        1: QueueSettings(),
        2: QueueSettings(),
        3: QueueSettings(rate_bps=10**8, depth_bytes=96_000),
    }


def test_a_ports_own_rate_replaces_the_default_rate_in_either_unit() -> None:
    doc = _ref(rate_pps=1000)
    doc["defaults"] = {"queue": {"rate_bps": 10**9, "depth_pkts": 64, "depth_bytes": 150_000}}
    cfg = parse_config(doc)
    assert queue_settings(cfg.switches[0], cfg.defaults.queue) == {
        1: QueueSettings(None, 64, 10**9, 150_000),
        2: QueueSettings(None, 64, 10**9, 150_000),
        3: QueueSettings(1000, 64, None, 150_000),
    }


def test_byte_settings_survive_the_written_deployment_file(tmp_path: Path) -> None:
    doc = _ref(rate_bps=10**8, depth_pkts=32)
    doc["defaults"] = {"queue": {"depth_bytes": 64_000}}
    cfg = parse_config(doc)
    again = load_config(write_config(cfg, tmp_path / "deployment.yaml"))
    assert again.switches[0].ports == cfg.switches[0].ports and again.defaults.queue == cfg.defaults.queue


@pytest.mark.parametrize(
    ("doc", "field", "why"),
    [
        (_bmv2(rate_bps=10**8), "switches[0].ports[2].rate_bps", "a bmv2 switch: BMv2 has no byte rate"),
        (_bmv2(depth_bytes=9000), "switches[0].ports[2].depth_bytes", "a bmv2 switch: BMv2 has no byte rate"),
        (_ref(rate_pps=1000, rate_bps=10**8), "switches[0].ports[2].rate_bps", "one rate"),
        (_ref(rate_bps=0), "switches[0].ports[2].rate_bps", ""),
        (_ref(depth_bytes=0), "switches[0].ports[2].depth_bytes", ""),
        (
            config_doc(switch_doc(ports=[1, 2]), defaults={"queue": {"rate_bps": 10**8}}),
            "defaults.queue.rate_bps",
            "port 1 of switches[0], a bmv2 switch",
        ),
    ],
)
def test_bad_byte_settings_are_named(doc: dict, field: str, why: str) -> None:
    with pytest.raises(ValidationError) as err:
        parse_config(doc)
    assert err.value.field == field
    assert why in str(err.value)


def test_a_bmv2_port_with_its_own_pps_rate_ignores_a_byte_default_rate() -> None:
    doc = _bmv2(rate_pps=1000)
    doc["switches"][0]["ports"] = [{"port": p, "rate_pps": 1000} for p in (1, 2, 3)]
    doc["defaults"] = {"queue": {"rate_bps": 10**8}}
    cfg = parse_config(doc)
    assert queue_settings(cfg.switches[0], cfg.defaults.queue) == {p: QueueSettings(1000) for p in (1, 2, 3)}


def test_the_reference_switch_applies_the_deployment_byte_settings() -> None:
    cfg = parse_config(_ref(rate_bps=10**8, depth_bytes=96_000))
    with RefSwitchServer(SwitchOptions(grpc_addr="127.0.0.1:0", admin_port=0)) as sw:
        from mlfc.controller.queues import RefSwitchAdminQueues

        RefSwitchAdminQueues(sw.admin_port).configure(queue_settings(cfg.switches[0], cfg.defaults.queue))
        port = sw.tm.port(3)
        assert (port.rate_pps, port.rate_bps) == (0, 10**8)
        assert {q.capacity_bytes for q in port.queues} == {96_000}
