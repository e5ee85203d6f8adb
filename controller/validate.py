"""Intent -> checked ``Policy``: the first of the controller's two pure steps (controller/compile.py is the
second). ``validate_intent`` checks every field of the protobuf and fills in the deployment file's defaults,
raising a ``ValidationError`` that names the bad field; unknown fields are refused, not dropped.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field

from google.protobuf.message import Message
from google.protobuf.unknown_fields import UnknownFieldSet

from mlfc import contract
from mlfc.controller.config import DeploymentConfig, parse_prefix
from mlfc.controller.ecn_config import EVERY_CLASS, EVERY_PORT, EVERY_SWITCH, EcnKey, EcnTarget, for_switch
from mlfc.controller.errors import ValidationError, join
from mlfc.policy import drop, ecn, priority
from mlfc.policy.maif import Window
from mlfc.policy.priority import PolicyError
from mlfc.proto import intent_pb2 as pb


@dataclass(frozen=True, slots=True)
class FlowMatch:
    src: ipaddress.IPv4Network | None
    dst: ipaddress.IPv4Network | None
    protocol: int
    src_port: int
    dst_port: int

    @property
    def specificity(self) -> int:
        """Number of matched bits: a more specific flow entry wins over a broader one."""
        return (
            (self.src.prefixlen if self.src else 0)
            + (self.dst.prefixlen if self.dst else 0)
            + (8 if self.protocol else 0)
            + (16 if self.src_port else 0)
            + (16 if self.dst_port else 0)
        )


@dataclass(frozen=True, slots=True)
class Job:
    job_id: int
    priority: int
    windows: tuple[Window, ...] = ()
    flows: tuple[FlowMatch, ...] = ()


@dataclass(frozen=True, slots=True)
class Policy:
    """A validated intent with the deployment defaults filled in."""

    jobs: tuple[Job, ...] = ()
    drop_policy: drop.DropPolicy = field(default_factory=drop.DropPolicy)
    # (switch or "", port or 0, priority or None) -> profile; ("", 0, None) always present (the deployment
    # default); the deployment's per-port/per-class rules, then the intent's per-port profiles over them.
    ecn: Mapping[EcnKey, ecn.MarkingProfile] = field(default_factory=dict)
    interleaving: bool = False
    source: str = ""

    def ecn_for_switch(self, switch: str) -> dict[EcnTarget, ecn.MarkingProfile]:
        """(port, priority) -> profile for one switch (port 0: every port, priority None: every class); a
        named switch beats ``""``."""
        return for_switch(self.ecn, switch)


def validate_intent(intent: pb.Intent, config: DeploymentConfig) -> Policy:
    """Check every field of ``intent``; raise ``ValidationError`` naming the first bad one."""
    _reject_unknown_fields(intent, "")
    jobs = tuple(_job(j, join("jobs", i)) for i, j in enumerate(intent.jobs))
    _check_jobs_disjoint(jobs)

    drop_policy = config.defaults.drop_policy
    if intent.HasField("drop_policy"):
        drop_policy = _policy_call(
            lambda: drop.DropPolicy(tuple(intent.drop_policy.level_depths), tuple(intent.drop_policy.min_importance)),
            "drop_policy",
        )

    ecn_map: dict[EcnKey, ecn.MarkingProfile] = {(EVERY_SWITCH, EVERY_PORT, EVERY_CLASS): config.defaults.ecn}
    ecn_map.update((rule.key, rule.profile) for rule in config.defaults.ecn_rules)
    seen: dict[EcnKey, int] = {}
    for i, port_ecn in enumerate(intent.ecn):
        path = join("ecn", i)
        key = _ecn_target(port_ecn, path, config)
        if key in seen:
            raise ValidationError(path, f"same switch/port as ecn[{seen[key]}]")
        seen[key] = i
        if not port_ecn.HasField("profile"):
            raise ValidationError(join(path, "profile"), "required")
        p = port_ecn.profile
        ecn_map[key] = _policy_call(lambda p=p: ecn.RedProfile(p.kmin, p.kmax, p.pmax), join(path, "profile"))

    interleaving = intent.interleaving or config.defaults.interleaving
    return Policy(jobs, drop_policy, ecn_map, interleaving, intent.source)


def default_policy(config: DeploymentConfig) -> Policy:
    """What the switches hold before any intent arrives: the deployment file's defaults."""
    return validate_intent(pb.Intent(), config)


def _reject_unknown_fields(msg: Message, path: str) -> None:
    """A newer client's field we do not understand must not be silently dropped."""
    unknown = UnknownFieldSet(msg)
    if len(unknown):
        numbers = sorted({f.field_number for f in unknown})
        where = path or type(msg).__name__
        raise ValidationError(where, f"unknown field number(s) {numbers} in {type(msg).__name__}")
    for fd, value in msg.ListFields():
        if fd.message_type is None or fd.message_type.GetOptions().map_entry:
            continue
        if fd.is_repeated:
            for i, item in enumerate(value):
                _reject_unknown_fields(item, join(join(path, fd.name), i))
        else:
            _reject_unknown_fields(value, join(path, fd.name))


def _job(j: pb.JobIntent, path: str) -> Job:
    if j.job_id == 0:
        raise ValidationError(join(path, "job_id"), "0 means 'no job' on the switch; job ids are 1..65535")
    if j.job_id > contract.MAX_JOB_ID:
        raise ValidationError(join(path, "job_id"), f"{j.job_id} out of range 1..{contract.MAX_JOB_ID}")
    prio = _priority(j.priority, join(path, "priority"))
    windows: list[Window] = []
    for k, w in enumerate(j.windows):
        wpath = join(join(path, "windows"), k)
        if w.first > w.last:
            raise ValidationError(join(wpath, "first"), f"first={w.first} > last={w.last}")
        window = Window(w.first, w.last, _priority(w.priority, join(wpath, "priority")))
        for m, other in enumerate(windows):
            if window.first <= other.last and other.first <= window.last:
                raise ValidationError(wpath, f"iterations {w.first}..{w.last} overlap windows[{m}]")
        windows.append(window)
    flows = tuple(_flow(f, join(join(path, "flows"), k)) for k, f in enumerate(j.flows))
    return Job(j.job_id, prio, tuple(windows), flows)


def _priority(value: int, path: str) -> int:
    return _policy_call(lambda: priority.check_job_priority(value, path.rsplit(".", 1)[-1]), path)


def _flow(f: pb.Flow, path: str) -> FlowMatch:
    src = parse_prefix(f.src, join(path, "src")) if f.src else None
    dst = parse_prefix(f.dst, join(path, "dst")) if f.dst else None
    if f.protocol > 0xFF:
        raise ValidationError(join(path, "protocol"), f"{f.protocol} out of range 0..255")
    for name in ("src_port", "dst_port"):
        if getattr(f, name) > 0xFFFF:
            raise ValidationError(join(path, name), f"{getattr(f, name)} out of range 0..65535")
    return FlowMatch(src, dst, f.protocol, f.src_port, f.dst_port)


def _check_jobs_disjoint(jobs: tuple[Job, ...]) -> None:
    by_id: dict[int, int] = {}
    by_flow: dict[FlowMatch, str] = {}
    for i, job in enumerate(jobs):
        if job.job_id in by_id:
            raise ValidationError(
                join(join("jobs", i), "job_id"), f"duplicate of jobs[{by_id[job.job_id]}] ({job.job_id})"
            )
        by_id[job.job_id] = i
        for k, flow in enumerate(job.flows):
            where = f"jobs[{i}].flows[{k}]"
            if flow in by_flow:
                raise ValidationError(where, f"same 5-tuple as {by_flow[flow]}")
            by_flow[flow] = where


def _ecn_target(port_ecn: pb.PortEcn, path: str, config: DeploymentConfig) -> EcnKey:
    sw_name = port_ecn.switch
    if sw_name != EVERY_SWITCH and sw_name not in config.switch_names:
        known = ", ".join(config.switch_names)
        raise ValidationError(join(path, "switch"), f"unknown switch {sw_name!r} (known: {known})")
    port = port_ecn.port
    if port > contract.MAX_PORT:
        raise ValidationError(join(path, "port"), f"{port} out of range 0..{contract.MAX_PORT} (0: every port)")
    if port != EVERY_PORT and sw_name != EVERY_SWITCH:
        ports = config.switch(sw_name).port_numbers
        if ports and port not in ports:
            raise ValidationError(join(path, "port"), f"{port} is not a port of {sw_name} ({list(ports)})")
    return (sw_name, port, EVERY_CLASS)  # an intent's profile is per port, for every class


def _policy_call(build, path: str):  # type: ignore[no-untyped-def]
    try:
        return build()
    except PolicyError as exc:
        raise ValidationError(path, str(exc)) from None
