"""Deployment file validation: good files load, every bad field is named in the error."""

from __future__ import annotations

import copy
import ipaddress
from pathlib import Path
from typing import Any

import pytest
from controller_helpers import config_doc, switch_doc

from mlfc import contract
from mlfc.controller.config import load_config, parse_config, queue_settings
from mlfc.controller.errors import ValidationError
from mlfc.controller.queues import QueueSettings


def test_example_deployment_file_loads() -> None:
    config = load_config(contract.REPO_ROOT / "configs/example.yaml")
    assert [s.name for s in config.switches] == ["s1", "s2"]
    assert config.controller.intent_addr == "127.0.0.1:50090"
    assert config.controller.metrics_addr == "127.0.0.1:9464"
    assert config.p4info == contract.REPO_ROOT / "configs/../p4src/build/mlfc.p4info.txtpb"


def test_defaults_and_values() -> None:
    config = parse_config(config_doc(switch_doc(), defaults={"queue": {"depth_pkts": 64}}))
    s1 = config.switch("s1")
    assert s1.grpc_addr == "127.0.0.1:50051"
    assert s1.port_numbers == (1, 2, 3)
    assert s1.routes_v4[1].prefix == ipaddress.IPv4Network("10.0.2.0/24")
    assert s1.routes_v4[0].dst_mac == 0x000000000001
    assert config.controller.intent_addr == "127.0.0.1:50090"
    assert config.defaults.ecn.kmin == 4
    # A port's own setting wins; an unset field falls back to the default.
    assert queue_settings(s1, config.defaults.queue) == {
        1: QueueSettings(None, 64),
        2: QueueSettings(None, 64),
        3: QueueSettings(1000, 32),
    }


def _set(doc: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    cur: Any = doc
    for p in path[:-1]:
        cur = cur[p]
    cur[path[-1]] = value
    return doc


TWO = config_doc(switch_doc("s1", 50051, 1), switch_doc("s2", 50052, 2))


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (["switches", 1, "grpc_addr"], "localhost", "switches[1].grpc_addr"),
        (["switches", 1, "grpc_addr"], "127.0.0.1:99999", "switches[1].grpc_addr"),
        (["switches", 1, "grpc_addr"], "127.0.0.1:50051", "switches[1].grpc_addr"),  # duplicate
        (["switches", 1, "name"], "s1", "switches[1].name"),
        (["switches", 0, "name"], "bad name", "switches[0].name"),
        (["switches", 0, "device_id"], "1", "switches[0].device_id"),
        (["switches", 0, "target"], "tofino9", "switches[0].target"),
        (["switches", 0, "thrift_port"], 0, "switches[0].thrift_port"),
        (["switches", 1, "thrift_port"], 9091, "switches[1].thrift_port"),  # same as s1's
        (["switches", 0, "routes_v4", 1, "prefix"], "10.0.2.7/24", "switches[0].routes_v4[1].prefix"),
        (["switches", 0, "routes_v4", 1, "prefix"], "10.0.300.0/24", "switches[0].routes_v4[1].prefix"),
        (["switches", 0, "routes_v4", 0, "port"], 9, "switches[0].routes_v4[0].port"),  # not a listed port
        (["switches", 0, "routes_v4", 0, "src_mac"], "00:00:00:01", "switches[0].routes_v4[0].src_mac"),
        (["switches", 0, "routes_v4", 0, "next_hop"], 1, "switches[0].routes_v4[0].next_hop"),  # unknown
        (["switches", 0, "ports", 2, "rate_pps"], -5, "switches[0].ports[2].rate_pps"),
        (["switches", 0, "ports", 1], 511, "switches[0].ports[1]"),
        (["switches", 0, "ports", 1], 1, "switches[0].ports[1].port"),  # duplicate
        (["defaults"], {"ecn": {"kmin": 40, "kmax": 4}}, "defaults.ecn"),
        (["defaults"], {"ecn": {"kmin": 4, "kmax": 8, "pmin": 0.1}}, "defaults.ecn.pmin"),
        (["defaults"], {"drop_policy": {"level_depths": [5, 3, 9]}}, "defaults.drop_policy"),
        (["defaults"], {"interleaving": "yes"}, "defaults.interleaving"),
        (["listen"], {"intent": "127.0.0.1"}, "listen.intent"),
        (["controller"], {"write_batch": 0}, "controller.write_batch"),
        (["controller"], {"reconnect_min_s": 2.0, "reconnect_max_s": 1.0}, "controller.reconnect_max_s"),
        (["pipeline"], {"p4info": 7}, "pipeline.p4info"),
        (["switches"], [], "switches"),
        (["swiches"], [], "swiches"),
    ],
)
def test_bad_fields_are_named(path: list[Any], value: Any, field: str) -> None:
    with pytest.raises(ValidationError) as err:
        parse_config(_set(TWO, path, value))
    assert err.value.field == field
    assert str(err.value).startswith(f"{field}: ")


def test_missing_required_fields() -> None:
    doc = _set(TWO, ["switches", 1], {"name": "s2"})
    with pytest.raises(ValidationError, match=r"^switches\[1\]\.grpc_addr: required"):
        parse_config(doc)
    with pytest.raises(ValidationError, match=r"^switches: required"):
        parse_config({})


def test_bmv2_queue_settings_need_a_thrift_port() -> None:
    doc = _set(TWO, ["switches", 0, "thrift_port"], None)
    with pytest.raises(ValidationError, match=r"^switches\[0\]\.thrift_port: required"):
        parse_config(doc)
    doc = _set(_set(TWO, ["switches", 1, "thrift_port"], None), ["switches", 1, "ports"], [1, 2])
    doc = _set(doc, ["defaults"], {"queue": {"depth_pkts": 8}})
    with pytest.raises(ValidationError, match=r"^switches\[1\]\.thrift_port: required: defaults.queue"):
        parse_config(doc)


def test_yaml_errors_and_relative_artifacts(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("switches: [\n")
    with pytest.raises(ValidationError, match="not valid YAML"):
        load_config(bad)
    good = tmp_path / "d.yaml"
    good.write_text(
        "pipeline: {p4info: art/x.p4info.txtpb, device_config: /abs/x.json}\n"
        "switches: [{name: a, grpc_addr: '127.0.0.1:1'}]\n"
    )
    config = load_config(good)
    assert config.p4info == tmp_path / "art/x.p4info.txtpb"
    assert config.device_config == Path("/abs/x.json")
    with pytest.raises(ValidationError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")
