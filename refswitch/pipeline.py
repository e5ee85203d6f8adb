"""mlfc.p4's ingress and egress as pure functions of (packet, port, tables, state).

``ingress`` is MlfcIngress (Forwarding, Classifier, Queueing, IngressStats, SelectiveDrop) and decides
drop or (egress port, priority queue); ``egress`` is MlfcEgress (CongestionMonitor, Ecn, Telemetry) plus the
deparser and checksum update, given the queue depths the traffic manager observed. ``process`` runs
both for a packet that meets empty queues: the per-packet decision the differential tests compare.

Drops before any counting: non-IPv4, IPv4 with options (IHL != 5) and a bad IPv4 header checksum.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from mlfc import contract
from mlfc.policy import depth
from mlfc.refswitch import packet as pk
from mlfc.refswitch.state import SwitchState
from mlfc.refswitch.tables import Tables
from mlfc.wire import IMPORTANCE_PROTECTED, MsgType

# Why a packet was dropped (None: forwarded).
DROP_NOT_IPV4 = "not_ipv4"
DROP_BAD_CHECKSUM = "bad_ipv4_checksum"
DROP_IPV4_OPTIONS = "ipv4_options"
DROP_TTL = "ttl_expired"
DROP_NO_ROUTE = "no_route"
DROP_SELECTIVE = "selective_drop"
DROP_QUEUE_FULL = "queue_full"  # traffic manager: tail drop
DROP_PRIORITY_RANGE = "priority_out_of_range"  # traffic manager: priority >= number of queues

RandomSource = Callable[[], int]  # 16-bit uniform numbers, as v1model's random(r, 0, 0xFFFF)


@dataclass(slots=True)
class IngressResult:
    parsed: pk.Parsed
    ingress_port: int
    egress_port: int | None  # None: dropped in ingress
    priority: int
    drop_reason: str | None = None
    job_id: int = 0
    counter_index: int = 0
    src_mac: int = 0
    dst_mac: int = 0
    ttl: int = 0
    port_class: int = 0  # the egress port's rate class, from the route: the queue telemetry's

    @property
    def length(self) -> int:
        return len(self.parsed.frame)


@dataclass(slots=True)
class Decision:
    """What the switch did with one packet."""

    egress_port: int | None  # None: dropped
    priority: int
    drop_reason: str | None
    ecn_marked: bool = False
    out: bytes | None = None
    job_id: int = 0
    shim_status: int = contract.SHIM_NONE
    enq_depth: int = 0
    deq_depth: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def dropped(self) -> bool:
        return self.egress_port is None


def _dropped(parsed: pk.Parsed, port: int, reason: str) -> IngressResult:
    return IngressResult(parsed, port, None, contract.PRIORITY_DEFAULT, reason)


def ingress(frame: bytes, ingress_port: int, tables: Tables, state: SwitchState) -> IngressResult:
    p = pk.parse(frame)
    if not p.ipv4_valid:
        # Hosts use static ARP: non-IPv4 frames are not forwarded (and not counted).
        return _dropped(p, ingress_port, DROP_NOT_IPV4)
    if p.ihl != 5:
        # The checksum is verified and recomputed over the 20-byte base header only.
        return _dropped(p, ingress_port, DROP_IPV4_OPTIONS)
    if not pk.ipv4_checksum_ok(p):
        return _dropped(p, ingress_port, DROP_BAD_CHECKSUM)

    # Forwarding
    egress_spec = contract.V1MODEL_DROP_PORT
    reason: str | None = None
    src_mac = dst_mac = port_class = 0
    ttl = p.ttl
    if p.ttl <= 1:
        reason = DROP_TTL
    else:
        action, params = tables[contract.ROUTES_V4].lookup((p.dst_addr,))
        if action == contract.SET_NEXT_HOP:
            egress_spec, src_mac, dst_mac, port_class = params
            ttl = p.ttl - 1
            if egress_spec == contract.V1MODEL_DROP_PORT:
                reason = DROP_NO_ROUTE
        else:
            reason = DROP_NO_ROUTE

    # Classifier: its truncation verdict overrides the parser's status
    status = p.shim_status = pk.shim_verdict(p)
    shim = p.shim
    tagged = status == contract.SHIM_OK
    job_id = iteration = importance = progress = 0
    if tagged:
        job_id, iteration, importance, progress = shim.job_id, shim.iteration, shim.importance, shim.progress
    elif status == contract.SHIM_NONE:
        action, params = tables[contract.FLOWS].lookup(
            (p.src_addr, p.dst_addr, p.protocol, p.l4_src_port, p.l4_dst_port)
        )
        if action == contract.SET_JOB:
            job_id = params[0]

    # Queueing
    if tagged and shim.msg_type == MsgType.CNP:  # ACKs take their job's class, as its data does
        priority = contract.PRIORITY_CONTROL
    elif status in (contract.SHIM_OK, contract.SHIM_NONE):
        priority = tables[contract.JOB_PRIORITY].lookup((job_id, iteration, progress))[1][0]
        if priority == contract.PRIORITY_CONTROL:  # reserved: a job entry can never claim it
            priority = contract.PRIORITY_CONTROL - 1
    else:
        priority = contract.PRIORITY_DEFAULT

    # IngressStats: every packet that got this far (forwarding's drops included), before selective drop;
    # index 0 is "untracked": no job, or an id beyond the counter
    counter_index = job_id if job_id < contract.MAX_JOBS else 0
    length = len(frame)
    state.count(contract.JOB_PACKETS, counter_index, length)
    if status == contract.SHIM_BAD_HEADER:
        state.count(contract.SHIM_BAD_HEADER_COUNTER, ingress_port, length)
    elif status == contract.SHIM_TRUNCATED:
        state.count(contract.SHIM_TRUNCATED_COUNTER, ingress_port, length)

    # SelectiveDrop: tagged DATA below the protected class, headed for a real port
    if (
        tagged
        and shim.msg_type == MsgType.DATA
        and importance < IMPORTANCE_PROTECTED
        and egress_spec != contract.V1MODEL_DROP_PORT
    ):
        level = state.congestion_level[egress_spec * contract.NUM_QUEUES + priority]
        # as v1model: an uncongested queue is not looked up (nothing is dropped at level 0)
        min_importance = 0
        if level != contract.UNCONGESTED_LEVEL:
            min_importance = tables[contract.DROP_THRESHOLD].lookup((level,))[1][0]
        if importance < min_importance:
            egress_spec = contract.V1MODEL_DROP_PORT
            reason = DROP_SELECTIVE
            state.count(contract.JOB_DROPS, counter_index, length)

    return IngressResult(
        p,
        ingress_port,
        None if egress_spec == contract.V1MODEL_DROP_PORT else egress_spec,
        priority,
        reason,
        job_id,
        counter_index,
        src_mac,
        dst_mac,
        ttl,
        port_class,
    )


def egress(
    ing: IngressResult,
    enq_depth: int,
    deq_depth: int,
    tables: Tables,
    state: SwitchState,
    rng: RandomSource,
) -> Decision:
    """Egress for a packet ingress forwarded, with the depths of its priority queue (packets)."""
    port = ing.egress_port
    assert port is not None, "egress runs only for forwarded packets"
    p = ing.parsed
    enq_depth = min(enq_depth, contract.MAX_QDEPTH)
    deq_depth = min(deq_depth, contract.MAX_QDEPTH)

    # CongestionMonitor: the level of this (port, queue) as this packet leaves it
    level = tables[contract.CONGESTION_LEVELS].lookup((deq_depth,))[1][0]
    state.congestion_level[port * contract.NUM_QUEUES + ing.priority] = level

    # Ecn: ECT packets that found a queue (as v1model: an empty queue is not looked up, no profile marks it),
    # by (port, the packet's priority queue, enqueue depth)
    marked = False
    dscp_ecn = p.dscp_ecn
    ecn = dscp_ecn & 3
    if enq_depth != 0 and ecn not in (contract.ECN_NOT_ECT, contract.ECN_CE):
        action, params = tables[contract.ECN_PROFILE].lookup((port, ing.priority, enq_depth))
        if action == contract.MARK_ALWAYS or (action == contract.MARK_WITH_PROBABILITY and rng() < params[0]):
            marked = True
            dscp_ecn |= contract.ECN_CE
            state.count(contract.JOB_ECN_MARKS, ing.counter_index, ing.length)

    out = pk.rewrite(p, ing.src_mac, ing.dst_mac, ing.ttl, dscp_ecn)

    # Telemetry: a tagged DATA packet carries the deepest queue of its path (bytes: packets of the default
    # size, as BMv2 reports) and that port's rate class (the route's); this hop's when at least as deep as what
    # it carries
    shim = p.shim
    if p.shim_status == contract.SHIM_OK and shim is not None and shim.msg_type == MsgType.DATA:
        queue_bytes = depth.depth_bytes(enq_depth, depth.PACKETS)
        if queue_bytes >= shim.queue_bytes:
            out = bytearray(out)
            pk.write_telemetry(out, ing.port_class, queue_bytes)
            out = bytes(out)
    return Decision(port, ing.priority, None, marked, out, ing.job_id, p.shim_status, enq_depth, deq_depth)


def dropped_decision(ing: IngressResult, reason: str | None = None) -> Decision:
    return Decision(None, ing.priority, reason or ing.drop_reason, False, None, ing.job_id, ing.parsed.shim_status)


def default_rng(seed: int | None = None) -> RandomSource:
    r = random.Random(seed)
    return lambda: r.getrandbits(16)


def process(
    frame: bytes,
    ingress_port: int,
    tables: Tables,
    state: SwitchState,
    *,
    enq_depth: int = 0,
    deq_depth: int = 0,
    rng: RandomSource | None = None,
) -> Decision:
    """Ingress then egress for a packet that finds its queue at ``enq_depth`` and leaves ``deq_depth``
    behind (both 0: an idle switch, one packet at a time)."""
    ing = ingress(frame, ingress_port, tables, state)
    if ing.egress_port is None:
        return dropped_decision(ing)
    return egress(ing, enq_depth, deq_depth, tables, state, rng or default_rng())
