"""Shared builders for the controller tests (deployment documents, pipeline artifacts, intents) and the
helpers the tests against real switches share (read-back, metrics, waiting for a state)."""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from mlfc import contract
from mlfc.controller import compile as comp
from mlfc.controller.config import DeploymentConfig, parse_config
from mlfc.controller.pipeline import Pipeline
from mlfc.controller.sync import SwitchConnection
from mlfc.launch.daemons import ControllerProcess
from mlfc.launch.process import free_port
from mlfc.launch.switches import SwitchProcess
from mlfc.proto import intent_pb2 as pb

needs_artifacts = pytest.mark.skipif(
    not (contract.P4INFO.is_file() and contract.BMV2_JSON.is_file()),
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


# ---- against real switches -----------------------------------------------------------------------

PIPELINE = (
    Pipeline.load(contract.P4INFO, contract.BMV2_JSON)
    if contract.P4INFO.is_file() and contract.BMV2_JSON.is_file()
    else None
)

INTENT_A = pb.Intent(
    source="test-a",
    jobs=[
        pb.JobIntent(job_id=7, priority=5, windows=[pb.IterationWindow(first=10, last=20, priority=6)]),
        pb.JobIntent(job_id=8, priority=2, flows=[pb.Flow(dst="10.0.2.0/24", protocol=17, dst_port=4791)]),
        pb.JobIntent(job_id=9, priority=0),
    ],
    ecn=[pb.PortEcn(switch="s1", port=3, profile=pb.EcnProfile(kmin=8, kmax=40, pmax=0.1))],
)
# B modifies job 7 (class and window), deletes job 9 and job 8's flow, adds job 10 and interleaving.
INTENT_B = pb.Intent(
    source="test-b",
    jobs=[
        pb.JobIntent(job_id=7, priority=3, windows=[pb.IterationWindow(first=10, last=30, priority=6)]),
        pb.JobIntent(job_id=8, priority=2),
        pb.JobIntent(job_id=10, priority=4),
    ],
    drop_policy=pb.DropPolicy(level_depths=[10, 20, 30], min_importance=[0, 2, 4, 8]),
    interleaving=True,
)


def daemon_config(tmp_path: Path, switches: list[SwitchProcess], **controller: Any) -> Path:
    doc = config_doc(
        *(target_doc(sw) for sw in switches),
        pipeline={"p4info": str(contract.P4INFO), "device_config": str(contract.BMV2_JSON)},
        listen={"intent": f"127.0.0.1:{free_port()}", "metrics": f"127.0.0.1:{free_port()}"},
        controller={
            "counter_interval_s": 0.2,
            "audit_interval_s": 2.0,
            "reconnect_min_s": 0.05,
            "reconnect_max_s": 0.5,
            **controller,
        },
    )
    path = tmp_path / "deployment.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def expected(ctl: ControllerProcess, intent: pb.Intent, switch: str) -> set:
    return set(comp.compile_intent(intent, ctl.config, PIPELINE).entries[switch])


def observer(sw: SwitchProcess) -> SwitchConnection:
    """A second P4Runtime client with a lower election id: a backup that can read."""
    return SwitchConnection(sw.grpc_addr, sw.device_id, pipeline=PIPELINE, election_id=1).connect()


def read_back(sw: SwitchProcess) -> set:
    with observer(sw) as conn:
        return set(conn.read_entries())


def metric(ctl: ControllerProcess, name: str, **labels: str) -> float:
    text = urllib.request.urlopen(f"http://{ctl.config.controller.metrics_addr}/metrics", timeout=5).read().decode()
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        m = re.fullmatch(rf"{name}\{{(.*)\}} (\S+)", line)
        if m and ",".join(sorted(m.group(1).split(","))) == want:
            return float(m.group(2))
    raise KeyError(f"{name}{{{want}}} not in /metrics")


def eventually(check: Callable[[], bool], timeout_s: float = 15.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        time.sleep(0.05)


def wait_restored(ctl: Any, timeout_s: float = 20.0) -> Any:
    """A started controller has written its first state to every switch (the defaults, generation 0).

    ``ctl.client.wait_synced(0)`` alone can pass before that: Status reports a switch's
    applied_generation as 0 while nothing is applied yet (the agent's -1, clamped for the uint64 field),
    and the pipeline name is set before the entries are written. A switch's entry counts are set by the
    same reconcile that applies a generation, so non-empty counts mean it finished (defaults always
    include entries)."""
    deadline = time.monotonic() + timeout_s
    while True:
        st = ctl.client.wait_synced(0, timeout_s=max(0.1, deadline - time.monotonic()))
        if all(s.entries for s in st.switches):
            return st
        if time.monotonic() > deadline:
            raise TimeoutError(f"controller wrote no entries within {timeout_s} s: {st}")
        time.sleep(0.05)
