"""Packets and table entries shared by the reference-switch tests (addresses as in ptf-tests/mlfc_base.py).

Policies come from mlfc.policy (compile_profile, level_ranges, DropPolicy); these helpers only place
their output into the tables the way docs/dataplane.md says the controller does.
"""

from __future__ import annotations

from scapy.layers.l2 import Ether

from mlfc import contract as P
from mlfc.policy.drop import NUM_LEVELS, DropPolicy, level_ranges
from mlfc.policy.ecn import MAX_QDEPTH, EcnProfile, compile_profile
from mlfc.refswitch.tables import Entry, Exact, Lpm, Range, Ternary, make_entry
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

PORT_MASK = 0x1FF


def mac(text: str) -> int:
    return int(text.replace(":", ""), 16)


def ip(text: str) -> int:
    a, b, c, d = (int(x) for x in text.split("."))
    return (a << 24) | (b << 16) | (c << 8) | d


def forwarded(pkt: Ether, out_port: int, *, ce: bool = False) -> bytes:
    """The bytes the switch should emit for ``pkt`` routed to host ``out_port``."""
    return bytes(forwarded_packet(pkt, out_port, ce=ce))


# ---- entries ------------------------------------------------------------------------------------


def route(prefix: str, port: int, dst_mac: str, src_mac: str = SWITCH_MAC) -> Entry:
    addr, _, plen = prefix.partition("/")
    return make_entry(
        P.ROUTES_V4,
        {P.IPV4_DST: Lpm(ip(addr), int(plen or 32))},
        P.SET_NEXT_HOP,
        {"port": port, "src_mac": mac(src_mac), "dst_mac": mac(dst_mac)},
    )


def host_routes() -> list[Entry]:
    return [route(f"{HOST_IP[p]}/32", p, HOST_MAC[p]) for p in PORTS]


def flow(
    job: int,
    priority: int = 1,
    src: str | None = None,
    dst: str | None = None,
    protocol: int | None = None,
    src_port: int | None = None,
    dst_port: int | None = None,
) -> Entry:
    match = {}
    for name, value, width in (
        (P.IPV4_SRC, src and ip(src), 32),
        (P.IPV4_DST, dst and ip(dst), 32),
        (P.IP_PROTOCOL, protocol, 8),
        (P.L4_SRC_PORT, src_port, 16),
        (P.L4_DST_PORT, dst_port, 16),
    ):
        if value is not None:
            match[name] = Ternary(value, (1 << width) - 1)
    return make_entry(P.FLOWS, match, P.SET_JOB, {"job_id": job}, priority)


def job_priority(
    job: int | None,
    klass: int,
    *,
    iterations: tuple[int, int] | None = None,
    progress: tuple[int, int] | None = None,
    priority: int = 1,
) -> Entry:
    match = {}
    if job is not None:
        match[P.JOB_ID] = Ternary(job, 0xFFFF)
    if iterations is not None:
        match[P.ITERATION] = Range(*iterations)
    if progress is not None:
        match[P.PROGRESS] = Range(*progress)
    return make_entry(P.JOB_PRIORITY, match, P.SET_PRIORITY, {"priority": klass}, priority)


def _depth_match(lo: int, hi: int) -> Range | None:
    return None if (lo, hi) == (0, MAX_QDEPTH) else Range(lo, hi)


def ecn_entries(profile: EcnProfile, port: int | None = None) -> list[Entry]:
    """``ecn_profile`` entries for ``mlfc.policy.ecn.compile_profile(profile)``."""
    out = []
    for i, r in enumerate(compile_profile(profile)):
        match: dict = {}
        if port is not None:
            match[P.EGRESS_PORT] = Ternary(port, PORT_MASK)
        if (depth := _depth_match(r.lo, r.hi)) is not None:
            match[P.ENQ_QDEPTH] = depth
        if r.always:
            out.append(make_entry(P.ECN_PROFILE, match, P.MARK_ALWAYS, priority=i + 1))
        else:
            out.append(make_entry(P.ECN_PROFILE, match, P.MARK_WITH_PROBABILITY, {"threshold": r.threshold}, i + 1))
    return out


def drop_entries(policy: DropPolicy) -> list[tuple[str, Entry]]:
    """``congestion_levels`` and ``drop_threshold`` entries for a DropPolicy (mlfc.policy.drop)."""
    out = []
    for lo, hi, level in level_ranges(policy):
        out.append(
            (
                P.CONGESTION_LEVELS,
                make_entry(
                    P.CONGESTION_LEVELS,
                    {P.DEQ_QDEPTH: Range(lo, hi)},
                    P.SET_LEVEL,
                    {"l": level},
                    1,
                ),
            )
        )
    for level in range(NUM_LEVELS):
        out.append(
            (
                P.DROP_THRESHOLD,
                make_entry(
                    P.DROP_THRESHOLD,
                    {P.LEVEL: Exact(level)},
                    P.SET_MIN_IMPORTANCE,
                    {"importance": policy.min_importance[level]},
                    0,
                ),
            )
        )
    return out
