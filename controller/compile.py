"""Intent + deployment file -> the table entries every switch should hold.

Two steps, both pure: ``validate_intent`` turns the protobuf into a checked ``Policy`` (raising a
``ValidationError`` that names the field), ``compile_switch`` turns a policy into ``TableEntry``
values with the shared policy functions of mlfc/policy/ (never reimplemented here).

Entry priorities (P4Runtime: higher wins) in ``job_priority``: an iteration window of a job beats the
job-wide entry, which beats the job-0 guard, which beats the interleaving bands. In ``ecn_profile``
a profile is per (port, priority queue): a port's own class profile beats a class's every-port profile,
which beats a port's profile, which beats the every-port default (``ecn_config.precedence``); every
profile but the default covers all depths (``no_mark`` in its gaps) so a lower one never leaks into it.

Queue depths are compiled in the switch's depth unit (``mlfc.policy.depth.DepthUnit``): packets on
v1model; for a Tofino switch 80-byte cells, depth ranges in packets converted with
``mlfc.policy.depth.packets_to_cells`` and an ECN step's K in bytes with ``depth.bytes_to_depth``; an
iteration window becomes the ternary prefixes that cover it (the TNA program matches the iteration
ternary: ``contract.TOFINO_TERNARY_FOR_RANGE``), so the same intent gives the same entries on both
targets apart from those encodings.

Validation lives in controller/validate.py (the checked ``Policy`` and its parts); each table's compile
step here is a short function next to the rule that orders its priorities.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mlfc import contract
from mlfc.controller.config import DeploymentConfig, SwitchConfig, queue_settings
from mlfc.controller.ecn_config import (
    EVERY_CLASS,
    EVERY_PORT,
    PRECEDENCE_EVERY_PORT,
    PRECEDENCE_PORT,
    EcnTarget,
    precedence,
)
from mlfc.controller.entries import Exact, Lpm, Match, Range, TableEntry, Ternary, entry, ranges_as_ternaries
from mlfc.controller.errors import ValidationError
from mlfc.controller.pipeline import Pipeline
from mlfc.controller.validate import Job, Policy, validate_intent
from mlfc.policy import depth, drop, ecn, priority, telemetry
from mlfc.policy.priority import PolicyError
from mlfc.proto import intent_pb2 as pb

PORT_MASK = (1 << contract.PORT_BITS) - 1
CLASS_MASK = (1 << contract.PRIORITY_BITS) - 1

# job_priority entry priorities: higher wins (windows > job > job-0 guard > interleaving bands).
PRIO_WINDOW = 40
PRIO_JOB = 30
PRIO_NO_JOB_GUARD = 20
PRIO_BAND = 10
# ecn_profile: port + class 4 > class on every port 3 > port 2 > every port 1 (ecn_config.precedence).
PRIO_ECN_PORT = PRECEDENCE_PORT
PRIO_ECN_ANY = PRECEDENCE_EVERY_PORT
# Tables with ternary/range keys need a non-zero priority even when entries never overlap.
PRIO_SINGLE = 1


@dataclass(frozen=True)
class CompiledIntent:
    policy: Policy
    entries: Mapping[str, tuple[TableEntry, ...]]  # switch name -> desired entries

    @property
    def entries_per_switch(self) -> int:
        return max((len(e) for e in self.entries.values()), default=0)


# ---- compilation ----------------------------------------------------------------------------


def compile_intent(intent: pb.Intent, config: DeploymentConfig, pipeline: Pipeline | None = None) -> CompiledIntent:
    """Validate, then compile for every switch; with ``pipeline``, also check table capacities."""
    policy = validate_intent(intent, config)
    return compile_policy(policy, config, pipeline)


def compile_policy(policy: Policy, config: DeploymentConfig, pipeline: Pipeline | None = None) -> CompiledIntent:
    per_switch = {
        sw.name: tuple(compile_switch(policy, sw, config.depth_unit(sw), port_rates(sw, config)))
        for sw in config.switches
    }
    if pipeline is not None:
        for sw_name, entries in per_switch.items():
            check_capacity(entries, pipeline, sw_name)
    return CompiledIntent(policy, per_switch)


def compile_switch(
    policy: Policy,
    sw: SwitchConfig,
    unit: depth.DepthUnit = depth.PACKETS,
    rates_bps: Mapping[int, float] | None = None,
) -> list[TableEntry]:
    """Every entry one switch should hold: its static routes (with their ports' rate classes) plus the policy.
    ``unit``: what one unit of queue depth is on this switch (packets on BMv2, 80-byte cells on Tofino);
    ``rates_bps``: its ports' rates (``port_rates``)."""
    out: list[TableEntry] = []
    out += route_entries(sw, rates_bps or {})
    out += flow_entries(policy.jobs)
    out += job_priority_entries(policy.jobs, policy.interleaving)
    out += drop_entries(policy.drop_policy, unit.per_packet)
    out += ecn_entries(policy.ecn_for_switch(sw.name), unit)
    if sw.target == "tofino":
        out = ranges_as_ternaries(out, TOFINO_TERNARY_WIDTHS)
    return out


# The keys the TNA program matches ternary where v1model has a range, with their widths.
TOFINO_TERNARY_WIDTHS = {
    table: {f.name: f.bitwidth for f in contract.TABLES[table].fields if f.name in fields}
    for table, fields in contract.TOFINO_TERNARY_FOR_RANGE.items()
}


def _depth_range(lo: int, hi: int, cells: int) -> Range | None:
    """A depth range (packets) as the switch matches it; None when no reachable depth is left."""
    converted = depth.packets_to_cells(lo, hi, cells)
    return None if converted is None else Range(*converted)


def route_entries(sw: SwitchConfig, rates_bps: Mapping[int, float] | None = None) -> list[TableEntry]:
    """``routes_v4``: each static route's next hop, with the rate class of its egress port, which the queue
    telemetry carries (mlfc.policy.telemetry; a port without a configured rate has class 0, unknown)."""
    rates_bps = rates_bps or {}
    out = []
    for i, r in enumerate(sw.routes_v4):
        # A /0 route is the LPM don't-care: P4Runtime wants the field omitted.
        match = (
            {contract.IPV4_DST: Lpm(int(r.prefix.network_address), r.prefix.prefixlen)} if r.prefix.prefixlen else {}
        )
        out.append(
            entry(
                contract.ROUTES_V4,
                match,
                contract.SET_NEXT_HOP,
                {
                    "port": r.port,
                    "src_mac": r.src_mac,
                    "dst_mac": r.dst_mac,
                    "rate_class": port_rate_class(rates_bps.get(r.port, 0.0)),
                },
                origin=f"{sw.name}.routes_v4[{i}]",
            )
        )
    return out


def port_rates(sw: SwitchConfig, config: DeploymentConfig) -> dict[int, float]:
    """Each port's configured rate in bits/s (a rate in packets/s at ``defaults.packet_bytes``); none for a
    Tofino switch, whose port rates are traffic-manager configuration (docs/tofino.md)."""
    packet_bits = 8 * config.defaults.packet_bytes
    rates = {}
    for port, q in queue_settings(sw, config.defaults.queue).items():
        bps = q.rate_bps or packet_bits * (q.rate_pps or 0)
        if bps > 0:
            rates[port] = float(bps)
    return rates


def port_rate_class(bps: float) -> int:
    """The rate class the telemetry reports for a port of ``bps`` bits/s (0, unknown, for no configured rate)."""
    return telemetry.rate_class(bps) if bps > 0 else telemetry.UNKNOWN


def flow_entries(jobs: tuple[Job, ...]) -> list[TableEntry]:
    out = []
    for job in jobs:
        for k, f in enumerate(job.flows):
            match: dict[str, Match] = {}
            if f.src and f.src.prefixlen:
                match[contract.IPV4_SRC] = Ternary(int(f.src.network_address), int(f.src.netmask))
            if f.dst and f.dst.prefixlen:
                match[contract.IPV4_DST] = Ternary(int(f.dst.network_address), int(f.dst.netmask))
            if f.protocol:
                match[contract.IP_PROTOCOL] = Ternary(f.protocol, 0xFF)
            if f.src_port:
                match[contract.L4_SRC_PORT] = Ternary(f.src_port, 0xFFFF)
            if f.dst_port:
                match[contract.L4_DST_PORT] = Ternary(f.dst_port, 0xFFFF)
            out.append(
                entry(
                    contract.FLOWS,
                    match,
                    contract.SET_JOB,
                    {"job_id": job.job_id},
                    priority=1 + f.specificity,
                    origin=f"job {job.job_id} flows[{k}]",
                )
            )
    return out


def job_priority_entries(jobs: tuple[Job, ...], interleaving: bool) -> list[TableEntry]:
    out = []
    for job in jobs:
        job_match = {contract.JOB_ID: Ternary(job.job_id, contract.MAX_JOB_ID)}
        out.append(
            entry(
                contract.JOB_PRIORITY,
                job_match,
                contract.SET_PRIORITY,
                {"priority": job.priority},
                PRIO_JOB,
                origin=f"job {job.job_id}",
            )
        )
        for k, w in enumerate(job.windows):
            match: dict[str, Match] = dict(job_match)
            if (w.first, w.last) != (0, contract.MAX_ITERATION):  # the full range is a don't-care: omitted
                match[contract.ITERATION] = Range(w.first, w.last)
            out.append(
                entry(
                    contract.JOB_PRIORITY,
                    match,
                    contract.SET_PRIORITY,
                    {"priority": w.priority},
                    PRIO_WINDOW,
                    origin=f"job {job.job_id} windows[{k}]",
                )
            )
    if interleaving:
        # Untagged/unknown traffic (job 0) has progress 0 and would otherwise fall into band 0.
        out.append(
            entry(
                contract.JOB_PRIORITY,
                {contract.JOB_ID: Ternary(0, contract.MAX_JOB_ID)},
                contract.SET_PRIORITY,
                {"priority": contract.PRIORITY_DEFAULT},
                PRIO_NO_JOB_GUARD,
                origin="interleaving: job 0",
            )
        )
        for band in priority.interleaving_bands():
            out.append(
                entry(
                    contract.JOB_PRIORITY,
                    {contract.PROGRESS: Range(band.lo, band.hi)},
                    contract.SET_PRIORITY,
                    {"priority": band.priority},
                    PRIO_BAND,
                    origin=f"interleaving band {band.lo}..{band.hi}",
                )
            )
    return out


def drop_entries(policy: drop.DropPolicy, cells: int = 1) -> list[TableEntry]:
    out = []
    for lo, hi, level in drop.level_ranges(policy):
        depths = _depth_range(lo, hi, cells)
        if depths is None:
            continue
        out.append(
            entry(
                contract.CONGESTION_LEVELS,
                {contract.DEQ_QDEPTH: depths},
                contract.SET_LEVEL,
                {"l": level},
                PRIO_SINGLE,
                origin=f"drop level {level}",
            )
        )
    for level in range(contract.UNCONGESTED_LEVEL + 1, drop.NUM_LEVELS):  # level 0 is never looked up
        out.append(
            entry(
                contract.DROP_THRESHOLD,
                {contract.LEVEL: Exact(level)},
                contract.SET_MIN_IMPORTANCE,
                {"importance": policy.min_importance[level]},
                origin=f"drop threshold {level}",  # exact key only: P4Runtime wants priority 0
            )
        )
    return out


def ecn_entries(
    profiles: Mapping[EcnTarget, ecn.MarkingProfile] | Mapping[int, ecn.MarkingProfile],
    unit: depth.DepthUnit = depth.PACKETS,
) -> list[TableEntry]:
    """``ecn_profile`` for one switch: ``profiles`` by (port, priority) (EVERY_PORT: every port,
    EVERY_CLASS: every class; a bare port means every class of it), ranges in ``unit``."""
    targets = {(key, EVERY_CLASS) if isinstance(key, int) else key: p for key, p in profiles.items()}
    out = []
    for (port, klass), profile in sorted(targets.items(), key=lambda kv: _target_order(kv[0])):
        try:
            ranges = ecn.compile_marking(profile, unit)
        except PolicyError as exc:
            raise ValidationError("ecn", f"port {port or 'any'} class {_class_text(klass)}: {exc}") from None
        selector: dict[str, Match] = {}
        if port != EVERY_PORT:
            selector[contract.EGRESS_PORT] = Ternary(port, PORT_MASK)
        if klass is not EVERY_CLASS:
            selector[contract.QUEUE_PRIORITY] = Ternary(klass, CLASS_MASK)
        prio = precedence(port, klass)
        origin = f"ecn port {port or 'any'} class {_class_text(klass)}"
        for r in ranges:
            match = {**selector, **_depth_match(r.lo, r.hi)}
            if r.always:
                out.append(entry(contract.ECN_PROFILE, match, contract.MARK_ALWAYS, {}, prio, origin))
            else:
                out.append(
                    entry(
                        contract.ECN_PROFILE,
                        match,
                        contract.MARK_WITH_PROBABILITY,
                        {"threshold": r.threshold},
                        prio,
                        origin,
                    )
                )
        if prio != PRIO_ECN_ANY:  # above the default: its own at every depth, so nothing lower leaks in
            for lo, hi in _gaps(ranges):
                match = {**selector, **_depth_match(lo, hi)}
                out.append(entry(contract.ECN_PROFILE, match, contract.NO_MARK, {}, prio, origin))
    return out


def _target_order(target: EcnTarget) -> tuple[int, int]:
    port, klass = target
    return (port, -1 if klass is EVERY_CLASS else klass)


def _class_text(klass: int | None) -> str:
    return "any" if klass is EVERY_CLASS else str(klass)


def _depth_match(lo: int, hi: int) -> dict[str, Match]:
    """An enqueue-depth range as a match: the full range is a don't-care, omitted."""
    return {} if (lo, hi) == (0, contract.MAX_QDEPTH) else {contract.ENQ_QDEPTH: Range(lo, hi)}


def _gaps(ranges: list[ecn.MarkRange]) -> list[tuple[int, int]]:
    """Depths in 0..MAX_QDEPTH not covered by ``ranges`` (sorted, disjoint)."""
    gaps = []
    nxt = 0
    for r in ranges:
        if r.lo > nxt:
            gaps.append((nxt, r.lo - 1))
        nxt = r.hi + 1
    if nxt <= contract.MAX_QDEPTH:
        gaps.append((nxt, contract.MAX_QDEPTH))
    return gaps


def check_capacity(entries: tuple[TableEntry, ...], pipeline: Pipeline, switch: str) -> None:
    counts: dict[str, int] = {}
    for e in entries:
        counts[e.table] = counts.get(e.table, 0) + 1
    for table, n in counts.items():
        size = pipeline.table_size(table)
        if size and n > size:
            field_name = {
                contract.FLOWS: "jobs.flows",
                contract.JOB_PRIORITY: "jobs",
                contract.ROUTES_V4: "routes_v4",
                contract.ECN_PROFILE: "ecn",
            }.get(table, table)
            raise ValidationError(field_name, f"{switch}: {n} entries for {table} exceed its size {size}")
