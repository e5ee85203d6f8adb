"""The policy bridge: the controller's compiled table entries become the simulated switch's tables.

The simulated switch holds exactly what a P4 switch would: an intent (the coordinator's, or a
treatment's) goes through ``mlfc.controller.compile`` — which builds the entries from mlfc/policy
(``ecn.compile_profile``, ``drop.level_ranges``, ``priority.interleaving_bands``) — and the entries
of the three policy tables are loaded into ``SwitchTables`` (cpp/mlfc_sim.h), which evaluates them
per packet with the P4 match semantics (ternary, range, exact; highest entry priority wins).
Routes and the 5-tuple flow table are not loaded: the simulator routes by its own topology and
tags all job traffic.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mlfc import contract
from mlfc.controller.compile import compile_intent
from mlfc.controller.config import Defaults, DeploymentConfig, SwitchConfig
from mlfc.controller.entries import Exact, Range, TableEntry, Ternary
from mlfc.policy import depth, drop, ecn
from mlfc.policy.drop import DropPolicy
from mlfc.proto import intent_pb2 as ipb
from mlfc.wire import IMPORTANCE_PROTECTED, PROGRESS_BUCKETS

ANY32 = (0, 0)
FULL_ITER = (0, contract.MAX_ITERATION)
FULL_PROGRESS = (0, PROGRESS_BUCKETS - 1)
FULL_DEPTH = (0, contract.MAX_QDEPTH)
ALWAYS = ecn.RANDOM_RANGE
IGNORED_TABLES = (contract.ROUTES_V4, contract.FLOWS)


class BridgeError(ValueError):
    """An entry uses a match field or action the simulated switch does not model."""


@dataclass(frozen=True)
class PriorityRow:
    job: tuple[int, int]  # value, mask
    iteration: tuple[int, int]  # lo, hi
    progress: tuple[int, int]
    entry_priority: int
    cls: int


@dataclass(frozen=True)
class LevelRow:
    depth: tuple[int, int]
    level: int


@dataclass(frozen=True)
class EcnRow:
    port: tuple[int, int]
    cls: tuple[int, int]
    depth: tuple[int, int]
    entry_priority: int
    threshold: int  # 0 never, ALWAYS always, else marked when a 16-bit random number is below it


@dataclass(frozen=True)
class Tables:
    priority: tuple[PriorityRow, ...]
    levels: tuple[LevelRow, ...]
    min_importance: tuple[int, ...]  # per level, 0 where no entry (the table's default action)
    ecn: tuple[EcnRow, ...]


def deployment(
    switches: Sequence[str],
    ecn_profile: ecn.MarkingProfile,
    drop_policy: DropPolicy,
    interleaving: bool = False,
    packet_bytes: int = depth.DEFAULT_PACKET_BYTES,
) -> DeploymentConfig:
    """A deployment file for the simulated fabric (no addresses: nothing connects to these switches).
    ``packet_bytes``: the frames the simulated switches count (their queues count packets), which turns a
    step profile's K in bytes into packets as on BMv2."""
    return DeploymentConfig(
        switches=tuple(SwitchConfig(name, grpc_addr="127.0.0.1:1", device_id=i + 1) for i, name in enumerate(switches)),
        defaults=Defaults(
            ecn=ecn_profile, drop_policy=drop_policy, interleaving=interleaving, packet_bytes=packet_bytes
        ),
    )


def compile_tables(intent: ipb.Intent, config: DeploymentConfig) -> dict[str, Tables]:
    """Per switch, the policy tables the controller would install for ``intent``."""
    compiled = compile_intent(intent, config)
    return {sw: tables_from_entries(entries) for sw, entries in compiled.entries.items()}


def _ternary(m: object, what: str) -> tuple[int, int]:
    if m is None:
        return ANY32
    if not isinstance(m, Ternary):
        raise BridgeError(f"{what}: expected a ternary match, got {m!r}")
    return (m.value, m.mask)


def _range(m: object, full: tuple[int, int], what: str) -> tuple[int, int]:
    if m is None:
        return full
    if not isinstance(m, Range):
        raise BridgeError(f"{what}: expected a range match, got {m!r}")
    return (m.lo, m.hi)


def _only(e: TableEntry, allowed: Iterable[str]) -> dict:
    match = e.match_dict()
    extra = set(match) - set(allowed)
    if extra:
        raise BridgeError(f"{e}: match field(s) {sorted(extra)} not modelled by the simulated switch")
    return match


def tables_from_entries(entries: Iterable[TableEntry]) -> Tables:
    prio: list[PriorityRow] = []
    levels: list[LevelRow] = []
    min_imp = [0] * drop.NUM_LEVELS
    ecn_rows: list[EcnRow] = []
    for e in entries:
        if e.table in IGNORED_TABLES:
            continue
        params = e.params_dict()
        if e.table == contract.JOB_PRIORITY:
            m = _only(e, (contract.JOB_ID, contract.ITERATION, contract.PROGRESS))
            if e.action != contract.SET_PRIORITY:
                raise BridgeError(f"{e}: unknown action")
            prio.append(
                PriorityRow(
                    _ternary(m.get(contract.JOB_ID), str(e)),
                    _range(m.get(contract.ITERATION), FULL_ITER, str(e)),
                    _range(m.get(contract.PROGRESS), FULL_PROGRESS, str(e)),
                    e.priority,
                    params["priority"],
                )
            )
        elif e.table == contract.CONGESTION_LEVELS:
            m = _only(e, (contract.DEQ_QDEPTH,))
            levels.append(LevelRow(_range(m.get(contract.DEQ_QDEPTH), FULL_DEPTH, str(e)), params["l"]))
        elif e.table == contract.DROP_THRESHOLD:
            m = _only(e, (contract.LEVEL,))
            level = m.get(contract.LEVEL)
            if not isinstance(level, Exact) or not 0 <= level.value < drop.NUM_LEVELS:
                raise BridgeError(f"{e}: the level must be an exact level 0..{drop.NUM_LEVELS - 1}")
            min_imp[level.value] = params["importance"]
        elif e.table == contract.ECN_PROFILE:
            m = _only(e, (contract.EGRESS_PORT, contract.QUEUE_PRIORITY, contract.ENQ_QDEPTH))
            if e.action == contract.MARK_WITH_PROBABILITY:
                thr = params["threshold"]
            elif e.action == contract.MARK_ALWAYS:
                thr = ALWAYS
            elif e.action == contract.NO_MARK:
                thr = 0
            else:
                raise BridgeError(f"{e}: unknown action")
            ecn_rows.append(
                EcnRow(
                    _ternary(m.get(contract.EGRESS_PORT), str(e)),
                    _ternary(m.get(contract.QUEUE_PRIORITY), str(e)),  # the packet's priority queue
                    _range(m.get(contract.ENQ_QDEPTH), FULL_DEPTH, str(e)),
                    e.priority,
                    thr,
                )
            )
        else:
            raise BridgeError(f"{e}: table {e.table} is not modelled by the simulated switch")
    return Tables(tuple(prio), tuple(levels), tuple(min_imp), tuple(ecn_rows))


def load(cpp_tables: object, tables: Tables) -> None:
    """Replace the contents of one ``mlfcsim::SwitchTables`` with ``tables``."""
    t = cpp_tables
    t.defaultClass = contract.PRIORITY_DEFAULT
    t.controlClass = contract.PRIORITY_CONTROL
    t.protectedImportance = IMPORTANCE_PROTECTED
    t.randomRange = ecn.RANDOM_RANGE
    t.ClearPriority()
    for r in tables.priority:
        t.AddPriority(r.job[0], r.job[1], *r.iteration, *r.progress, r.entry_priority, r.cls)
    t.levels.clear()
    for lv in tables.levels:
        t.AddLevel(lv.depth[0], lv.depth[1], lv.level)
    for level, imp in enumerate(tables.min_importance):
        t.SetMinImportance(level, imp)
    t.ClearEcn()
    for r in tables.ecn:
        t.AddEcn(r.port[0], r.port[1], r.cls[0], r.cls[1], r.depth[0], r.depth[1], r.entry_priority, r.threshold)


def treatment_intent(priorities: str, job_classes: dict[int, int] | None = None) -> ipb.Intent:
    """The intent a treatment starts from: none (FIFO: every job in the default class), interleave
    (classes by progress band), maif (the coordinator's decisions replace it as they come)."""
    if priorities not in ("none", "maif", "interleave"):
        raise ValueError(f"priorities={priorities!r} is not none, maif or interleave")
    intent = ipb.Intent(interleaving=priorities == "interleave", source="mlfc-sim")
    for job, cls in sorted((job_classes or {}).items()):
        intent.jobs.add(job_id=job, priority=cls)
    return intent
