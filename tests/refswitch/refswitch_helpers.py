"""Packets and table entries shared by the reference-switch tests (addresses as in ptf-tests/mlfc_base.py).

Entries are built as the controller builds them (``mlfc.controller.entries.TableEntry``, field names
from mlfc/contract.py): they go to a switch over P4Runtime as they are, and into in-process model
tables through ``install`` (protobuf, then the reference switch's codec). Policies come from
mlfc.policy (compile_profile, level_ranges, DropPolicy); these helpers only place their output into
the tables the way docs/dataplane.md says the controller does.
"""

from __future__ import annotations

from scapy.layers.l2 import Ether

from mlfc import contract
from mlfc.controller.entries import Exact, Lpm, Match, Range, TableEntry, Ternary, entry
from mlfc.policy.drop import NUM_LEVELS, DropPolicy, level_ranges
from mlfc.policy.ecn import EcnProfile, compile_profile
from mlfc.testing.packets import (  # noqa: F401 - re-exported for the test modules
    HOST_IP,
    HOST_MAC,
    PORTS,
    SWITCH_MAC,
    shim_packet,
    tcp_packet,
    truncated_shim,
)
from mlfc.testing.packets import forwarded as forwarded_packet

PORT_MASK = (1 << contract.PORT_BITS) - 1


def mac(text: str) -> int:
    return int(text.replace(":", ""), 16)


def ip(text: str) -> int:
    a, b, c, d = (int(x) for x in text.split("."))
    return (a << 24) | (b << 16) | (c << 8) | d


def exact_ternary(value: int, bits: int) -> Ternary:
    """A ternary match on every bit of a ``bits``-wide field."""
    return Ternary(value, (1 << bits) - 1)


def forwarded(pkt: Ether, out_port: int, *, ce: bool = False, telemetry: tuple[int, int] | None = None) -> bytes:
    """The bytes the switch should emit for ``pkt`` routed to host ``out_port`` (``telemetry``: the
    (rate_class, queue_bytes) written into a DATA shim)."""
    return bytes(forwarded_packet(pkt, out_port, ce=ce, telemetry=telemetry))


# ---- entries ------------------------------------------------------------------------------------


def route(prefix: str, port: int, dst_mac: str, src_mac: str = SWITCH_MAC, rate_class: int = 0) -> TableEntry:
    """A /32 (or prefix) route out of ``port``; ``rate_class``: the port's, which the queue telemetry carries."""
    addr, _, plen = prefix.partition("/")
    return entry(
        contract.ROUTES_V4,
        {contract.IPV4_DST: Lpm(ip(addr), int(plen or 32))},
        contract.SET_NEXT_HOP,
        {"port": port, "src_mac": mac(src_mac), "dst_mac": mac(dst_mac), "rate_class": rate_class},
    )


def host_routes() -> list[TableEntry]:
    return [route(f"{HOST_IP[p]}/32", p, HOST_MAC[p]) for p in PORTS]


def flow(
    job: int,
    priority: int = 1,
    src: str | None = None,
    dst: str | None = None,
    protocol: int | None = None,
    src_port: int | None = None,
    dst_port: int | None = None,
) -> TableEntry:
    match: dict[str, Match] = {}
    for name, value in (
        (contract.IPV4_SRC, src and ip(src)),
        (contract.IPV4_DST, dst and ip(dst)),
        (contract.IP_PROTOCOL, protocol),
        (contract.L4_SRC_PORT, src_port),
        (contract.L4_DST_PORT, dst_port),
    ):
        if value is not None:
            match[name] = exact_ternary(value, contract.TABLES[contract.FLOWS].field(name).bitwidth)
    return entry(contract.FLOWS, match, contract.SET_JOB, {"job_id": job}, priority)


def job_priority(
    job: int | None,
    klass: int,
    *,
    iterations: tuple[int, int] | None = None,
    progress: tuple[int, int] | None = None,
    priority: int = 1,
) -> TableEntry:
    match: dict[str, Match] = {}
    if job is not None:
        match[contract.JOB_ID] = exact_ternary(job, contract.JOB_ID_BITS)
    if iterations is not None:
        match[contract.ITERATION] = Range(*iterations)
    if progress is not None:
        match[contract.PROGRESS] = Range(*progress)
    return entry(contract.JOB_PRIORITY, match, contract.SET_PRIORITY, {"priority": klass}, priority)


def _depth_match(lo: int, hi: int) -> Range | None:
    return None if (lo, hi) == (0, contract.MAX_QDEPTH) else Range(lo, hi)


def ecn_entries(profile: EcnProfile, port: int | None = None) -> list[TableEntry]:
    """``ecn_profile`` entries for ``mlfc.policy.ecn.compile_profile(profile)``."""
    out = []
    for i, r in enumerate(compile_profile(profile)):
        match: dict[str, Match] = {}
        if port is not None:
            match[contract.EGRESS_PORT] = Ternary(port, PORT_MASK)
        if (depth := _depth_match(r.lo, r.hi)) is not None:
            match[contract.ENQ_QDEPTH] = depth
        if r.always:
            out.append(entry(contract.ECN_PROFILE, match, contract.MARK_ALWAYS, priority=i + 1))
        else:
            out.append(
                entry(contract.ECN_PROFILE, match, contract.MARK_WITH_PROBABILITY, {"threshold": r.threshold}, i + 1)
            )
    return out


def drop_entries(policy: DropPolicy) -> list[TableEntry]:
    """``congestion_levels`` and ``drop_threshold`` entries for a DropPolicy (mlfc.policy.drop)."""
    out = []
    for lo, hi, level in level_ranges(policy):
        out.append(
            entry(contract.CONGESTION_LEVELS, {contract.DEQ_QDEPTH: Range(lo, hi)}, contract.SET_LEVEL, {"l": level}, 1)
        )
    for level in range(NUM_LEVELS):
        out.append(
            entry(
                contract.DROP_THRESHOLD,
                {contract.LEVEL: Exact(level)},
                contract.SET_MIN_IMPORTANCE,
                {"importance": policy.min_importance[level]},
                0,
            )
        )
    return out
