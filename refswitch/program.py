"""mlfc.p4's control-plane surface, stated independently of p4c: tables, actions, counters, register.

This is what the reference switch implements. The P4Runtime server checks a pushed P4Info against it
(names, match kinds, bit widths, parameters), and ``p4info.build_p4info`` turns it into a P4Info when
the compiled artifact is absent. Names are the P4Info names of docs/dataplane.md.
"""

from __future__ import annotations

from dataclasses import dataclass

# The program's @pkginfo (P4Info pkg_info); p4c adds the architecture.
PKG_NAME = "mlfc"
PKG_VERSION = "0.1.0"
PKG_ARCH = "v1model"

# Tables
ROUTES_V4 = "MlfcIngress.forwarding.routes_v4"
FLOWS = "MlfcIngress.classifier.flows"
JOB_PRIORITY = "MlfcIngress.queueing.job_priority"
DROP_THRESHOLD = "MlfcIngress.selective_drop.drop_threshold"
CONGESTION_LEVELS = "MlfcEgress.congestion.congestion_levels"
ECN_PROFILE = "MlfcEgress.ecn.ecn_profile"

# Actions
SET_NEXT_HOP = "MlfcIngress.forwarding.set_next_hop"
DROP = "MlfcIngress.forwarding.drop"
SET_JOB = "MlfcIngress.classifier.set_job"
NO_JOB = "MlfcIngress.classifier.no_job"
SET_PRIORITY = "MlfcIngress.queueing.set_priority"
SET_MIN_IMPORTANCE = "MlfcIngress.selective_drop.set_min_importance"
SET_LEVEL = "MlfcEgress.congestion.set_level"
MARK_WITH_PROBABILITY = "MlfcEgress.ecn.mark_with_probability"
MARK_ALWAYS = "MlfcEgress.ecn.mark_always"
NO_MARK = "MlfcEgress.ecn.no_mark"

# Counters and the register
JOB_PACKETS = "MlfcIngress.stats.job_packets"
JOB_DROPS = "MlfcIngress.selective_drop.job_drops"
JOB_ECN_MARKS = "MlfcEgress.ecn.job_ecn_marks"
SHIM_BAD_HEADER = "MlfcIngress.stats.shim_bad_header"
SHIM_TRUNCATED = "MlfcIngress.stats.shim_truncated"
CONGESTION_LEVEL_REGISTER = "congestion_level"

# Sizes (p4src/shared/size.p4)
MAX_JOBS = 4096
MAX_PORTS = 512
NUM_QUEUES = 8
CONGESTION_SLOTS = MAX_PORTS * NUM_QUEUES
DROP_PORT = 511  # v1model's drop port
PORT_BITS = 9
QDEPTH_BITS = 19


@dataclass(frozen=True, slots=True)
class MatchField:
    name: str
    bitwidth: int
    kind: str  # exact | lpm | ternary | range


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    bitwidth: int


@dataclass(frozen=True, slots=True)
class ActionSpec:
    name: str
    params: tuple[Param, ...] = ()


@dataclass(frozen=True, slots=True)
class TableSpec:
    name: str
    fields: tuple[MatchField, ...]
    actions: tuple[str, ...]
    default_action: str
    default_params: tuple[tuple[str, int], ...] = ()
    const_default: bool = False
    size: int = 1024

    @property
    def needs_priority(self) -> bool:
        return any(f.kind in ("ternary", "range", "optional") for f in self.fields)


@dataclass(frozen=True, slots=True)
class CounterSpec:
    name: str
    size: int
    unit: str  # PACKETS | BOTH


@dataclass(frozen=True, slots=True)
class RegisterSpec:
    name: str
    size: int
    bitwidth: int


# Dicts are in program order, which is p4c's P4Info order.
ACTIONS: dict[str, ActionSpec] = {
    a.name: a
    for a in (
        ActionSpec(DROP),
        ActionSpec(SET_NEXT_HOP, (Param("port", PORT_BITS), Param("src_mac", 48), Param("dst_mac", 48))),
        ActionSpec(SET_JOB, (Param("job_id", 16),)),
        ActionSpec(NO_JOB),
        ActionSpec(SET_PRIORITY, (Param("priority", 3),)),
        ActionSpec(SET_MIN_IMPORTANCE, (Param("importance", 4),)),
        ActionSpec(SET_LEVEL, (Param("l", 2),)),
        ActionSpec(MARK_ALWAYS),
        ActionSpec(MARK_WITH_PROBABILITY, (Param("threshold", 16),)),
        ActionSpec(NO_MARK),
    )
}

TABLES: dict[str, TableSpec] = {
    t.name: t
    for t in (
        TableSpec(
            ROUTES_V4,
            (MatchField("hdr.ipv4.dst_addr", 32, "lpm"),),
            (SET_NEXT_HOP, DROP),
            DROP,
            const_default=True,
            size=1024,
        ),
        TableSpec(
            FLOWS,
            (
                MatchField("hdr.ipv4.src_addr", 32, "ternary"),
                MatchField("hdr.ipv4.dst_addr", 32, "ternary"),
                MatchField("hdr.ipv4.protocol", 8, "ternary"),
                MatchField("meta.l4_src_port", 16, "ternary"),
                MatchField("meta.l4_dst_port", 16, "ternary"),
            ),
            (SET_JOB, NO_JOB),
            NO_JOB,
            const_default=True,
            size=1024,
        ),
        TableSpec(
            JOB_PRIORITY,
            (
                MatchField("meta.job_id", 16, "ternary"),
                MatchField("meta.iteration", 32, "range"),
                MatchField("meta.progress", 4, "range"),
            ),
            (SET_PRIORITY,),
            SET_PRIORITY,
            (("priority", 1),),
            size=1024,
        ),
        TableSpec(
            DROP_THRESHOLD,
            (MatchField("std_meta.egress_spec", PORT_BITS, "ternary"), MatchField("meta.level", 2, "exact")),
            (SET_MIN_IMPORTANCE,),
            SET_MIN_IMPORTANCE,
            (("importance", 0),),
            size=256,
        ),
        TableSpec(
            CONGESTION_LEVELS,
            (
                MatchField("std_meta.egress_port", PORT_BITS, "ternary"),
                MatchField("std_meta.deq_qdepth", QDEPTH_BITS, "range"),
            ),
            (SET_LEVEL,),
            SET_LEVEL,
            (("l", 0),),
            size=256,
        ),
        TableSpec(
            ECN_PROFILE,
            (
                MatchField("std_meta.egress_port", PORT_BITS, "ternary"),
                MatchField("meta.priority", 3, "ternary"),
                MatchField("std_meta.enq_qdepth", QDEPTH_BITS, "range"),
            ),
            (MARK_WITH_PROBABILITY, MARK_ALWAYS, NO_MARK),
            NO_MARK,
            size=4096,
        ),
    )
}

COUNTERS: dict[str, CounterSpec] = {
    c.name: c
    for c in (
        CounterSpec(JOB_PACKETS, MAX_JOBS, "BOTH"),
        CounterSpec(SHIM_BAD_HEADER, MAX_PORTS, "PACKETS"),
        CounterSpec(SHIM_TRUNCATED, MAX_PORTS, "PACKETS"),
        CounterSpec(JOB_DROPS, MAX_JOBS, "BOTH"),
        CounterSpec(JOB_ECN_MARKS, MAX_JOBS, "PACKETS"),
    )
}

REGISTERS: dict[str, RegisterSpec] = {
    CONGESTION_LEVEL_REGISTER: RegisterSpec(CONGESTION_LEVEL_REGISTER, CONGESTION_SLOTS, 2),
}
