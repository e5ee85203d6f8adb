"""The dataplane contract: what mlfc.p4 offers the control plane, stated once.

Tables, actions, counters and the register by their P4Info names; match fields with kinds and
widths; action parameters; table and counter sizes; priority classes; codepoints. The controller
checks a loaded P4Info against it and compiles intents with these names, the reference switch
implements it (and builds a P4Info from it where the compiled artifact is absent), the PTF tests
address the switch through it. ``tests/unit/test_contract.py`` holds it against the committed
P4Info and p4src/shared/{define,size}.p4 (and the target's define file), so P4 and Python cannot drift
apart silently.

Dicts are in program order, which is p4c's P4Info order.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from mlfc.wire import IMPORTANCE_LEVELS, PROGRESS_BUCKETS, SHIM_FIELDS

# ---- the program ---------------------------------------------------------------------------------

PKG_NAME = "mlfc"  # @pkginfo; p4c adds the architecture
PKG_VERSION = "0.1.0"
PKG_ARCH = "v1model"

# ---- widths (bits) -------------------------------------------------------------------------------

PORT_BITS = 9  # PortId_t (v1model and Tofino)
QDEPTH_BITS = 19  # QueueDepth_t: enq_qdepth / deq_qdepth (v1model and Tofino)
JOB_ID_BITS = 16
ITERATION_BITS = 32
PRIORITY_BITS = 3
IMPORTANCE_BITS = 4
PROGRESS_BITS = 4
LEVEL_BITS = 2  # congestion_level_t
THRESHOLD_BITS = 16  # ECN marking threshold against a 16-bit random number
RATE_CLASS_BITS = 8  # the shim's rate_class: the egress port's rate (mlfc.policy.telemetry)
QUEUE_BYTES_BITS = 32  # the shim's queue_bytes: the deepest queue met along the path, bytes
assert 1 << IMPORTANCE_BITS == IMPORTANCE_LEVELS and 1 << PROGRESS_BITS == PROGRESS_BUCKETS
assert dict(SHIM_FIELDS)["rate_class"] == RATE_CLASS_BITS and dict(SHIM_FIELDS)["queue_bytes"] == QUEUE_BYTES_BITS

MAX_QDEPTH = (1 << QDEPTH_BITS) - 1
MAX_JOB_ID = (1 << JOB_ID_BITS) - 1  # job 0 means "no job"
MAX_ITERATION = (1 << ITERATION_BITS) - 1
MAX_RATE_CLASS = (1 << RATE_CLASS_BITS) - 1

# ---- sizes (p4src/shared/size.p4; NUM_QUEUES and CONGESTION_SLOTS: v1model/include/define_v1model.p4) ---

ROUTES_V4_SIZE = 1024
FLOW_CLASSIFIER_SIZE = 1024
JOB_PRIORITY_SIZE = 1024
ECN_PROFILE_SIZE = 4096
CONGESTION_LEVEL_SIZE = 256
DROP_THRESHOLD_SIZE = 256
MAX_JOBS = 4096  # per-job counters are indexed by job id; ids >= MAX_JOBS count at index 0 ("untracked")
MAX_PORTS = 512
NUM_QUEUES = 8
CONGESTION_SLOTS = MAX_PORTS * NUM_QUEUES

# ---- classes and codepoints (p4src/shared/define.p4) ---------------------------------------------

PRIORITY_CONTROL = 7  # CNPs (and nothing else): tiny volume, never behind data; ACKs take their job's class
PRIORITY_DEFAULT = 1  # untagged, malformed or unmatched traffic
MAX_JOB_PRIORITY = PRIORITY_CONTROL - 1  # job classes are 0..6

ECN_NOT_ECT = 0
ECN_ECT0 = 2
ECN_CE = 3

# Congestion level 0 means uncongested: nothing is selectively dropped there, so v1model does not look
# up a drop threshold for it and the controller installs none (mlfc/policy/drop.py).
UNCONGESTED_LEVEL = 0

# What the parser and classifier made of a packet addressed to a shim port.
SHIM_NONE = 0  # not addressed to a shim port
SHIM_OK = 1  # a valid v1 shim of a known message type
SHIM_BAD_HEADER = 2  # unknown version or message type
SHIM_TRUNCATED = 3  # shorter than the 20-byte shim

# v1model: egress_spec 511 drops; the controller never routes to it.
V1MODEL_DROP_PORT = (1 << PORT_BITS) - 1
MAX_PORT = V1MODEL_DROP_PORT - 1

# ---- names ---------------------------------------------------------------------------------------

# Tables
ROUTES_V4 = "MlfcIngress.forwarding.routes_v4"
FLOWS = "MlfcIngress.classifier.flows"
JOB_PRIORITY = "MlfcIngress.queueing.job_priority"
DROP_THRESHOLD = "selective_drop.drop_threshold"  # ingress on v1model, egress on TNA: no pipeline prefix
CONGESTION_LEVELS = "MlfcEgress.congestion.congestion_levels"
ECN_PROFILE = "MlfcEgress.ecn.ecn_profile"

# Actions
DROP = "MlfcIngress.forwarding.drop"
SET_NEXT_HOP = "MlfcIngress.forwarding.set_next_hop"
SET_JOB = "MlfcIngress.classifier.set_job"
NO_JOB = "MlfcIngress.classifier.no_job"
SET_PRIORITY = "MlfcIngress.queueing.set_priority"
SET_MIN_IMPORTANCE = "selective_drop.set_min_importance"
SET_LEVEL = "MlfcEgress.congestion.set_level"
MARK_ALWAYS = "MlfcEgress.ecn.mark_always"
MARK_WITH_PROBABILITY = "MlfcEgress.ecn.mark_with_probability"
NO_MARK = "MlfcEgress.ecn.no_mark"

# Counters and the register
JOB_PACKETS = "MlfcIngress.stats.job_packets"
SHIM_BAD_HEADER_COUNTER = "MlfcIngress.stats.shim_bad_header"
SHIM_TRUNCATED_COUNTER = "MlfcIngress.stats.shim_truncated"
JOB_DROPS = "selective_drop.job_drops"
JOB_ECN_MARKS = "MlfcEgress.ecn.job_ecn_marks"
CONGESTION_LEVEL_REGISTER = "congestion_level"

JOB_COUNTERS = (JOB_PACKETS, JOB_DROPS, JOB_ECN_MARKS)  # indexed by job id
PORT_COUNTERS = (SHIM_BAD_HEADER_COUNTER, SHIM_TRUNCATED_COUNTER)  # indexed by ingress port

# Match fields: P4Info names, set with @name on each key in P4 so they are the same on every target
# (the key expressions differ: std_meta.egress_port on v1model, eg_intr_md.egress_port on TNA).
IPV4_SRC = "ipv4_src"
IPV4_DST = "ipv4_dst"
IP_PROTOCOL = "ip_proto"
L4_SRC_PORT = "l4_sport"
L4_DST_PORT = "l4_dport"
JOB_ID = "job_id"
ITERATION = "iteration"
PROGRESS = "progress"
LEVEL = "level"
EGRESS_PORT = "egress_port"
# The packet's priority queue: the class ingress chose (v1model meta.priority, TNA the bridged priority).
QUEUE_PRIORITY = "priority"
ENQ_QDEPTH = "enq_qdepth"  # the packet's queue at enqueue
DEQ_QDEPTH = "deq_qdepth"  # the packet's queue at dequeue: what is still queued behind it


# ---- the contract as data ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MatchField:
    name: str
    bitwidth: int
    kind: str  # exact | lpm | ternary | range

    @property
    def full(self) -> int:
        return (1 << self.bitwidth) - 1


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
    size: int = 1024  # the default (p4src/shared/size.p4)
    max_size: int = 16384  # the largest a deployment may compile in: tested (mlfc/pipeline_sizes.py)

    @property
    def needs_priority(self) -> bool:
        return any(f.kind in ("ternary", "range", "optional") for f in self.fields)

    def field(self, name: str) -> MatchField:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"{self.name} has no match field {name}")


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


ACTIONS: dict[str, ActionSpec] = {
    a.name: a
    for a in (
        ActionSpec(DROP),
        # rate_class: the egress port's, which the queue telemetry carries (docs/wire-format.md; 0 unknown)
        ActionSpec(
            SET_NEXT_HOP,
            (
                Param("port", PORT_BITS),
                Param("src_mac", 48),
                Param("dst_mac", 48),
                Param("rate_class", RATE_CLASS_BITS),
            ),
        ),
        ActionSpec(SET_JOB, (Param("job_id", JOB_ID_BITS),)),
        ActionSpec(NO_JOB),
        ActionSpec(SET_PRIORITY, (Param("priority", PRIORITY_BITS),)),
        ActionSpec(SET_MIN_IMPORTANCE, (Param("importance", IMPORTANCE_BITS),)),
        ActionSpec(SET_LEVEL, (Param("l", LEVEL_BITS),)),
        ActionSpec(MARK_ALWAYS),
        ActionSpec(MARK_WITH_PROBABILITY, (Param("threshold", THRESHOLD_BITS),)),
        ActionSpec(NO_MARK),
    )
}

TABLES: dict[str, TableSpec] = {
    t.name: t
    for t in (
        TableSpec(
            ROUTES_V4,
            (MatchField(IPV4_DST, 32, "lpm"),),
            (SET_NEXT_HOP, DROP),
            DROP,
            const_default=True,
            size=ROUTES_V4_SIZE,
        ),
        TableSpec(
            FLOWS,
            (
                MatchField(IPV4_SRC, 32, "ternary"),
                MatchField(IPV4_DST, 32, "ternary"),
                MatchField(IP_PROTOCOL, 8, "ternary"),
                MatchField(L4_SRC_PORT, 16, "ternary"),
                MatchField(L4_DST_PORT, 16, "ternary"),
            ),
            (SET_JOB, NO_JOB),
            NO_JOB,
            const_default=True,
            size=FLOW_CLASSIFIER_SIZE,
        ),
        TableSpec(
            JOB_PRIORITY,
            (
                MatchField(JOB_ID, JOB_ID_BITS, "ternary"),
                MatchField(ITERATION, ITERATION_BITS, "range"),
                MatchField(PROGRESS, PROGRESS_BITS, "range"),
            ),
            (SET_PRIORITY,),
            SET_PRIORITY,
            (("priority", PRIORITY_DEFAULT),),
            size=JOB_PRIORITY_SIZE,
        ),
        TableSpec(
            DROP_THRESHOLD,
            (MatchField(LEVEL, LEVEL_BITS, "exact"),),
            (SET_MIN_IMPORTANCE,),
            SET_MIN_IMPORTANCE,
            (("importance", 0),),
            size=DROP_THRESHOLD_SIZE,
            max_size=DROP_THRESHOLD_SIZE,  # levels and depths: never more
        ),
        TableSpec(
            CONGESTION_LEVELS,
            (MatchField(DEQ_QDEPTH, QDEPTH_BITS, "range"),),
            (SET_LEVEL,),
            SET_LEVEL,
            (("l", 0),),
            size=CONGESTION_LEVEL_SIZE,
            max_size=CONGESTION_LEVEL_SIZE,  # levels and depths: never more
        ),
        TableSpec(
            ECN_PROFILE,
            (
                MatchField(EGRESS_PORT, PORT_BITS, "ternary"),
                MatchField(QUEUE_PRIORITY, PRIORITY_BITS, "ternary"),
                MatchField(ENQ_QDEPTH, QDEPTH_BITS, "range"),
            ),
            (MARK_WITH_PROBABILITY, MARK_ALWAYS, NO_MARK),
            NO_MARK,
            size=ECN_PROFILE_SIZE,
        ),
    )
}

# Where the TNA program's key differs from TABLES: the Tofino compiler takes a range match only on a
# key of at most 5 PHV nibbles (20 bits), and the iteration is 32, so on Tofino the iteration key is
# ternary and the controller writes an iteration window as the prefixes that cover it.
TOFINO_TERNARY_FOR_RANGE: dict[str, tuple[str, ...]] = {JOB_PRIORITY: (ITERATION,)}

COUNTERS: dict[str, CounterSpec] = {
    c.name: c
    for c in (
        CounterSpec(JOB_PACKETS, MAX_JOBS, "BOTH"),
        CounterSpec(SHIM_BAD_HEADER_COUNTER, MAX_PORTS, "PACKETS"),
        CounterSpec(SHIM_TRUNCATED_COUNTER, MAX_PORTS, "PACKETS"),
        CounterSpec(JOB_DROPS, MAX_JOBS, "BOTH"),
        CounterSpec(JOB_ECN_MARKS, MAX_JOBS, "PACKETS"),
    )
}

# v1model only: egress writes it, ingress reads it. The TNA program drops in egress and has no register.
REGISTERS: dict[str, RegisterSpec] = {
    CONGESTION_LEVEL_REGISTER: RegisterSpec(CONGESTION_LEVEL_REGISTER, CONGESTION_SLOTS, LEVEL_BITS),
}


# ---- where the compiled pipeline lives -----------------------------------------------------------

REPO_ROOT = Path(__file__).resolve().parents[1]
# MLFC_P4_BUILD points at another build of the programs (e.g. a candidate checked against the model).
P4_BUILD = Path(os.environ.get("MLFC_P4_BUILD") or REPO_ROOT / "p4src" / "build")


def artifact(name: str) -> Path:
    """``p4src/build/<name>`` of this checkout (e.g. ``mlfc.p4info.txtpb``, ``mlfc.json``)."""
    return P4_BUILD / name


# v1model: BMv2 and the reference switch.
P4INFO = artifact("mlfc.p4info.txtpb")
BMV2_JSON = artifact("mlfc.json")

# TNA (Tofino 1): bf-p4c's outputs for p4src/tna/mlfc.p4 (docs/tofino.md).
TOFINO_BUILD = P4_BUILD / "tofino"
TOFINO_P4INFO = TOFINO_BUILD / "mlfc.p4info.txtpb"
TOFINO_BFRT = TOFINO_BUILD / "bfrt.json"
TOFINO_CONTEXT = TOFINO_BUILD / "pipe" / "context.json"
TOFINO_BINARY = TOFINO_BUILD / "pipe" / "tofino.bin"
