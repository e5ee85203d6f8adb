"""Shared builders for the controller tests (deployment documents, pipeline artifacts)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from mlfc.controller.config import DeploymentConfig, parse_config

REPO = Path(__file__).resolve().parents[2]
P4INFO = REPO / "p4src/build/mlfc.p4info.txtpb"
BMV2_JSON = REPO / "p4src/build/mlfc.json"

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
    """``switch_doc`` for a started test switch (tests/controller/switch_targets.py): its ports, its
    ``target`` (``refswitch`` for the reference switch) and its queue port (Thrift, or the admin port)."""
    return switch_doc(
        name or f"s{sw.device_id}", sw.grpc_port, sw.device_id, target=sw.target, thrift_port=sw.thrift_port, **extra
    )


def config_doc(*switches: dict[str, Any], **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"switches": list(switches) or [switch_doc()]}
    doc.update(extra)
    return doc


def make_config(*switches: dict[str, Any], **extra: Any) -> DeploymentConfig:
    return parse_config(config_doc(*switches, **extra))


def wait_restored(ctl: Any, timeout_s: float = 20.0) -> Any:
    """A started controller has written its first state to every switch (the defaults, generation 0).

    ``ControllerProcess.wait_synced(0)`` alone can pass before that: Status reports a switch's
    applied_generation as 0 while nothing is applied yet (the agent's -1, clamped for the uint64 field),
    and the pipeline name is set before the entries are written. A switch's entry counts are set by the
    same reconcile that applies a generation, so non-empty counts mean it finished (defaults always
    include entries)."""
    deadline = time.monotonic() + timeout_s
    while True:
        st = ctl.wait_synced(0, timeout_s=max(0.1, deadline - time.monotonic()))
        if all(s.entries for s in st.switches):
            return st
        if time.monotonic() > deadline:
            raise TimeoutError(f"controller wrote no entries within {timeout_s} s: {st}")
        time.sleep(0.05)
