"""Validation of agent requests: every error names the offending field and value."""

from __future__ import annotations

import ipaddress
import math

from mlfc import contract
from mlfc.proto import coordinator_pb2 as pb
from mlfc.proto import intent_pb2

from .api import MAX_FLOWS_PER_WORKER, MAX_INSTANCE, MAX_NAME, MAX_WORKERS
from .errors import InvalidRequest


def metric_kind(kind: int) -> str:
    if kind in (pb.METRIC_KIND_UNSPECIFIED, pb.ACCURACY):
        return "accuracy"
    if kind == pb.LOSS:
        return "loss"
    raise InvalidRequest(f"job.metric={kind} is not a MetricKind (ACCURACY=1, LOSS=2)")


def check_job_id(job_id: int, what: str = "job_id") -> None:
    if not 1 <= job_id <= contract.MAX_JOB_ID:
        raise InvalidRequest(f"{what}={job_id} out of range 1..{contract.MAX_JOB_ID} (0 means 'no job' on the switch)")


def _check_prefix(value: str, what: str) -> None:
    if not value:
        return
    try:
        ipaddress.IPv4Network(value, strict=True)
    except ValueError as e:
        raise InvalidRequest(f"{what}={value!r} is not an IPv4 address or prefix: {e}") from None


def check_flow(flow: intent_pb2.Flow, what: str) -> None:
    _check_prefix(flow.src, f"{what}.src")
    _check_prefix(flow.dst, f"{what}.dst")
    if flow.protocol > 255:
        raise InvalidRequest(f"{what}.protocol={flow.protocol} out of range 0..255")
    for name in ("src_port", "dst_port"):
        if getattr(flow, name) > 65535:
            raise InvalidRequest(f"{what}.{name}={getattr(flow, name)} out of range 0..65535")


def check_spec(spec: pb.JobSpec) -> None:
    check_job_id(spec.job_id, "job.job_id")
    if len(spec.name) > MAX_NAME:
        raise InvalidRequest(f"job.name is {len(spec.name)} characters; at most {MAX_NAME}")
    metric_kind(spec.metric)
    if len(spec.workers) > MAX_WORKERS:
        raise InvalidRequest(f"job.workers has {len(spec.workers)} entries; at most {MAX_WORKERS}")
    seen: set[int] = set()
    for i, worker in enumerate(spec.workers):
        what = f"job.workers[{i}]"
        if worker.rank > 65535:
            raise InvalidRequest(f"{what}.rank={worker.rank} out of range 0..65535")
        if worker.rank in seen:
            raise InvalidRequest(f"{what}.rank={worker.rank} is duplicated")
        seen.add(worker.rank)
        if worker.address:
            try:
                ipaddress.IPv4Address(worker.address)
            except ValueError:
                raise InvalidRequest(f"{what}.address={worker.address!r} is not an IPv4 address") from None
        if len(worker.host) > MAX_NAME:
            raise InvalidRequest(f"{what}.host is {len(worker.host)} characters; at most {MAX_NAME}")
        if len(worker.flows) > MAX_FLOWS_PER_WORKER:
            raise InvalidRequest(f"{what}.flows has {len(worker.flows)} entries; at most {MAX_FLOWS_PER_WORKER}")
        for k, f in enumerate(worker.flows):
            check_flow(f, f"{what}.flows[{k}]")


def check_instance(instance: str) -> None:
    if not 1 <= len(instance) <= MAX_INSTANCE:
        raise InvalidRequest(f"instance must be 1..{MAX_INSTANCE} characters, got {len(instance)}")


def check_report_numbers(r: pb.IterationReport, kind: str, where: object) -> float | None:
    """Checks the numeric fields of one report; returns its metric (None if absent)."""
    metric: float | None = None
    if r.HasField("metric"):
        metric = r.metric
        if not math.isfinite(metric):
            raise InvalidRequest(f"{where}: metric is {metric}; must be a finite number")
        if kind == "accuracy" and not 0.0 <= metric <= 1.0:
            raise InvalidRequest(f"{where}: accuracy {metric} outside [0, 1] (report a fraction, not a percentage)")
    for name in ("compute_seconds", "comm_seconds", "timestamp"):
        v = getattr(r, name)
        if not (math.isfinite(v) and v >= 0.0):
            raise InvalidRequest(f"{where}: {name}={v}; must be a finite number >= 0")
    return metric
