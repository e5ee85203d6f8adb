"""Shared builders for the controller tests (deployment documents, pipeline artifacts)."""

from __future__ import annotations

from typing import Any

import pytest

from mlfc.contract import BMV2_JSON, P4INFO
from mlfc.controller.config import DeploymentConfig, parse_config

needs_artifacts = pytest.mark.skipif(
    not (P4INFO.is_file() and BMV2_JSON.is_file()),
    reason="p4src/build/mlfc.{p4info.txtpb,json} not built (run `make p4`)",
)


def switch_doc(
    name: str = "s1", grpc_port: int = 50051, device_id: int = 1, target: str | None = None, **extra: Any
) -> dict[str, Any]:
    """One switch of a deployment file; ``target`` (bmv2, refswitch, none) is left out unless given (bmv2)."""
    doc: dict[str, Any] = {
        "name": name,
        "grpc_addr": f"127.0.0.1:{grpc_port}",
        "device_id": device_id,
        "ports": [1, 2, {"port": 3, "rate_pps": 1000, "depth_pkts": 32}],
        "thrift_port": 9090 + device_id,
        "routes_v4": [
            {"prefix": "10.0.1.1/32", "port": 1, "src_mac": "00:00:00:00:01:00", "dst_mac": "00:00:00:00:00:01"},
            {"prefix": "10.0.2.0/24", "port": 2, "src_mac": "00:00:00:00:02:00", "dst_mac": "00:00:00:00:00:02"},
        ],
    }
    if target is not None:
        doc["target"] = target
    doc.update(extra)
    return doc


def target_doc(sw: Any, name: str | None = None, **extra: Any) -> dict[str, Any]:
    """``switch_doc`` for a started test switch (mlfc.launch.switches): its ports, its ``target``
    (``refswitch`` for the reference switch) and its queue port (Thrift, or the admin port)."""
    return switch_doc(
        name or f"s{sw.device_id}", sw.grpc_port, sw.device_id, target=sw.target, thrift_port=sw.queue_port, **extra
    )


def config_doc(*switches: dict[str, Any], **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"switches": list(switches) or [switch_doc()]}
    doc.update(extra)
    return doc


def make_config(*switches: dict[str, Any], **extra: Any) -> DeploymentConfig:
    return parse_config(config_doc(*switches, **extra))
