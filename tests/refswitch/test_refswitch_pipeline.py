"""The pure pipeline (mlfc.refswitch.pipeline): the PTF scenarios of ptf-tests/, packet by packet,
with the expected behaviour taken from docs/dataplane.md and mlfc.policy."""

from __future__ import annotations

import math

import pytest
from refswitch_helpers import (
    HOST_IP,
    HOST_MAC,
    PORTS,
    SWITCH_MAC,
    drop_entries,
    ecn_entries,
    flow,
    forwarded,
    host_routes,
    job_priority,
    route,
    shim_packet,
    tcp_packet,
    truncated_shim,
)
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether

from mlfc import contract
from mlfc.controller import compile
from mlfc.controller.entries import Exact, Range, entry
from mlfc.policy.depth import PACKETS
from mlfc.policy.drop import DropPolicy, congestion_level, should_drop
from mlfc.policy.ecn import EcnProfile, StepProfile, compile_profile, compiled_probability, mark_probability
from mlfc.policy.priority import interleaving_bands
from mlfc.refswitch import packet as pk
from mlfc.refswitch import pipeline as pl
from mlfc.refswitch.state import SwitchState
from mlfc.refswitch.tables import Tables
from mlfc.testing.refswitch import install as install_entries
from mlfc.testing.refswitch import model_entry
from mlfc.wire import IMPORTANCE_LEVELS, SHIM_LEN, SHIM_VERSION, MlfcShim, MsgType


@pytest.fixture
def sw() -> tuple[Tables, SwitchState]:
    tables, state = Tables(), SwitchState()
    install_entries(tables, host_routes())
    return tables, state


def run(sw, pkt, port: int = 0, **kw) -> pl.Decision:
    tables, state = sw
    return pl.process(bytes(pkt), port, tables, state, **kw)


def install(sw, entries) -> None:
    install_entries(sw[0], entries)


# ---- forwarding ------------------------------------------------------------------------------------


def test_routed_to_every_port_with_rewrite(sw):
    for src in PORTS:
        for dst in PORTS:
            if src != dst:
                pkt = tcp_packet(src, dst, 1234, 80)
                d = run(sw, pkt, src)
                assert (d.egress_port, d.out) == (dst, forwarded(pkt, dst))


def test_checksum_is_recomputed_after_ttl_decrement(sw):
    d = run(sw, shim_packet(0, 2, job=3))
    ip_hdr = Ether(d.out)[IP]
    reported = ip_hdr.chksum
    del ip_hdr.chksum
    assert IP(bytes(ip_hdr)).chksum == reported
    assert ip_hdr.ttl == 63


def test_longest_prefix_wins(sw):
    install(
        sw,
        [
            route("10.1.0.0/16", 1, HOST_MAC[1]),
            route("10.1.2.0/24", 2, HOST_MAC[2]),
            route("10.0.0.0/8", 0, HOST_MAC[0]),
        ],
    )
    for dst, port in (("10.1.9.9", 1), ("10.1.2.3", 2), ("10.200.0.1", 0)):
        pkt = Ether(src=HOST_MAC[0], dst=SWITCH_MAC) / IP(src=HOST_IP[0], dst=dst) / UDP(dport=9) / (b"y" * 40)
        assert run(sw, pkt).egress_port == port


def test_a_batch_of_writes_takes_effect_when_it_ends(sw):
    routes = [route("10.1.0.0/16", 1, HOST_MAC[1]), route("10.1.2.0/24", 2, HOST_MAC[2])]
    pkt = Ether(src=HOST_MAC[0], dst=SWITCH_MAC) / IP(src=HOST_IP[0], dst="10.1.2.3") / UDP(dport=9) / (b"y" * 40)
    with sw[0].batch():
        install(sw, routes)
        assert run(sw, pkt).drop_reason == pl.DROP_NO_ROUTE  # lookups keep the table as it was
    assert run(sw, pkt).egress_port == 2  # then longest prefix, as if inserted one by one
    assert len(sw[0][routes[0].table]) == len(host_routes()) + 2


@pytest.mark.parametrize(
    ("pkt", "reason"),
    [
        (Ether() / IP(src=HOST_IP[0], dst="10.9.9.9") / UDP() / (b"x" * 40), pl.DROP_NO_ROUTE),
        (Ether() / IP(src=HOST_IP[0], dst=HOST_IP[1], ttl=1) / UDP() / b"x", pl.DROP_TTL),
        (Ether() / IP(src=HOST_IP[0], dst=HOST_IP[1], ttl=0) / UDP() / b"x", pl.DROP_TTL),
        (Ether(dst="ff:ff:ff:ff:ff:ff") / ARP(pdst=HOST_IP[1]), pl.DROP_NOT_IPV4),
        (Ether(type=0x0800) / b"\x45\x00\x00", pl.DROP_NOT_IPV4),  # ipv4 header cut short: parser error
        (b"\x00" * 10, pl.DROP_NOT_IPV4),
    ],
)
def test_dropped_without_route_ttl_or_ipv4(sw, pkt, reason):
    d = run(sw, pkt)
    assert d.dropped and d.drop_reason == reason


def test_route_to_the_drop_port_drops(sw):
    install(sw, [route("10.3.0.0/16", contract.V1MODEL_DROP_PORT, HOST_MAC[1])])
    assert run(sw, Ether() / IP(dst="10.3.0.1") / UDP() / b"x").dropped


def test_bad_ipv4_checksum_is_dropped(sw):
    pkt = bytearray(bytes(tcp_packet(0, 1, 1, 2)))
    pkt[24] ^= 0xFF  # corrupt the header checksum
    d = run(sw, bytes(pkt))
    assert d.dropped and d.drop_reason == pl.DROP_BAD_CHECKSUM
    assert not any(sw[1].snapshot().values())


def test_ipv4_options_are_dropped_uncounted(sw):
    pkt = Ether() / IP(src=HOST_IP[0], dst=HOST_IP[1], options=b"\x01\x01\x01\x00") / UDP() / (b"z" * 30)
    d = run(sw, pkt)
    assert d.dropped and d.drop_reason == pl.DROP_IPV4_OPTIONS
    assert not any(sw[1].snapshot().values())


def test_ihl_below_five_is_dropped(sw):
    frame = bytearray(bytes(tcp_packet(0, 1, 1, 2)))
    frame[14] = 0x44  # IHL 4, checksum still valid for the 20 bytes: dropped for the IHL alone
    frame[24:26] = b"\x00\x00"
    frame[24:26] = (0xFFFF ^ pk.ones_complement_sum(bytes(frame[14:34]))).to_bytes(2, "big")
    d = run(sw, bytes(frame))
    assert d.dropped and d.drop_reason == pl.DROP_IPV4_OPTIONS


# ---- classification and counters -------------------------------------------------------------------


def test_shim_job_is_counted(sw):
    pkts = [shim_packet(0, 1, job=21, seq=i, size=150 + i) for i in range(5)]
    for p in pkts:
        assert run(sw, p).out == forwarded(p, 1)
    assert sw[1].counter(contract.JOB_PACKETS, 21) == (5, sum(len(p) for p in pkts))


def test_five_tuple_flow_gets_its_job(sw):
    install(sw, [flow(42, src=HOST_IP[0], dst=HOST_IP[1], protocol=6, dst_port=5001)])
    matching = [tcp_packet(0, 1, 40000 + i, 5001, size=300) for i in range(4)]
    for p in matching:
        assert run(sw, p).job_id == 42
    assert run(sw, tcp_packet(0, 1, 40000, 5002)).job_id == 0
    assert run(sw, tcp_packet(2, 1, 40000, 5001), 2).job_id == 0
    assert sw[1].counter(contract.JOB_PACKETS, 42) == (4, 4 * 300)
    unmatched = tcp_packet(0, 1, 40000, 5002)
    assert sw[1].counter(contract.JOB_PACKETS, 0) == (2, 2 * len(unmatched)), "packets without a job count at index 0"


def test_wildcard_flow_and_large_job_ids(sw):
    install(sw, [flow(7, dst=HOST_IP[2])])
    for i in range(3):
        run(sw, tcp_packet(0, 2, 1000 + i, 80))
    assert sw[1].counter(contract.JOB_PACKETS, 7)[0] == 3
    run(sw, shim_packet(0, 1, job=60000))
    assert sw[1].counter(contract.JOB_PACKETS, 0)[0] == 1, "ids >= 4096 share index 0"


def test_flow_priority_order_and_first_inserted_on_ties(sw):
    install(sw, [flow(1, 1, dst=HOST_IP[1]), flow(2, 5, dst=HOST_IP[1], dst_port=80), flow(3, 5, dst=HOST_IP[1])])
    assert run(sw, tcp_packet(0, 1, 9, 80)).job_id == 2
    assert run(sw, tcp_packet(0, 1, 9, 81)).job_id == 3  # both priority 5 match nothing else: 3 beats 1


# ---- malformed shims ------------------------------------------------------------------------------


def test_malformed_are_forwarded_counted_and_never_classified(sw):
    install(sw, [job_priority(5, 6, priority=1), flow(9, 1, dst=HOST_IP[1])])
    bad = [shim_packet(0, 1, job=5, version=1), shim_packet(0, 1, job=5, msg_type=9)]
    short = [truncated_shim(2, 1, n) for n in (0, 1, 8, 15, SHIM_LEN - 1)]
    for p in bad:
        d = run(sw, p, 0)
        assert (d.egress_port, d.out, d.priority, d.job_id) == (1, forwarded(p, 1), contract.PRIORITY_DEFAULT, 0)
    for p in short:
        d = run(sw, p, 2)
        assert (d.egress_port, d.out, d.priority, d.job_id) == (1, forwarded(p, 1), contract.PRIORITY_DEFAULT, 0)
    assert sw[1].counter(contract.SHIM_BAD_HEADER_COUNTER, 0)[0] == 2
    assert sw[1].counter(contract.SHIM_TRUNCATED_COUNTER, 2)[0] == len(short)
    assert sw[1].counter(contract.SHIM_TRUNCATED_COUNTER, 0)[0] == 0
    assert sw[1].counter(contract.JOB_PACKETS, 5)[0] == 0
    assert sw[1].counter(contract.JOB_PACKETS, 9)[0] == 0, "a malformed shim is not classified by the 5-tuple either"


def test_short_payload_is_truncated_whatever_its_first_byte(sw):
    run(sw, truncated_shim(0, 1, 5, first=0x30), 0)
    assert sw[1].counter(contract.SHIM_TRUNCATED_COUNTER, 0)[0] == 1
    assert sw[1].counter(contract.SHIM_BAD_HEADER_COUNTER, 0)[0] == 0


@pytest.mark.parametrize("first", [SHIM_VERSION << 4, 0x30])
def test_padded_short_frame_is_truncated_by_its_udp_length(sw, first):
    """Padded to Ethernet's 60 bytes, a 5-byte shim would be read from the padding: the UDP length says no."""
    install(sw, [flow(9, 1, dst=HOST_IP[1])])
    frame = bytes(truncated_shim(0, 1, 5, first=first)).ljust(60, b"\x00")
    d = run(sw, frame)
    expected = (1, contract.PRIORITY_DEFAULT, 0, contract.SHIM_TRUNCATED)
    assert (d.egress_port, d.priority, d.job_id, d.shim_status) == expected
    assert d.out[42:] == frame[42:], "payload and padding are forwarded untouched"
    assert sw[1].counter(contract.SHIM_TRUNCATED_COUNTER, 0)[0] == 1
    assert sw[1].counter(contract.JOB_PACKETS, 9)[0] == 0


def test_udp_length_short_of_a_full_shim_is_truncated(sw):
    pkt = shim_packet(0, 1, job=3)
    frame = bytearray(bytes(pkt))
    frame[38:40] = (8 + SHIM_LEN - 1).to_bytes(2, "big")  # the whole shim in the frame, the UDP length 1 byte short
    d = run(sw, bytes(frame))
    assert (d.shim_status, d.job_id, d.priority) == (contract.SHIM_TRUNCATED, 0, contract.PRIORITY_DEFAULT)


def test_frame_ending_inside_a_shim_whose_udp_length_claims_more(sw):
    """The parser's verdict, UDP length notwithstanding: a v1 first byte runs out of bytes (truncated); a
    bad first byte stops before extracting, so the frame's length is never tested (bad header)."""
    for first, status in ((SHIM_VERSION << 4, contract.SHIM_TRUNCATED), (0x30, contract.SHIM_BAD_HEADER)):
        frame = bytearray(bytes(truncated_shim(0, 1, 5, first=first)))
        frame[38:40] = (8 + SHIM_LEN).to_bytes(2, "big")
        assert run(sw, bytes(frame)).shim_status == status
    assert sw[1].counter(contract.SHIM_TRUNCATED_COUNTER, 0)[0] == 1
    assert sw[1].counter(contract.SHIM_BAD_HEADER_COUNTER, 0)[0] == 1


def test_empty_shim_payload_is_truncated(sw):
    frame = bytearray(bytes(truncated_shim(0, 1, 0)))
    frame[38:40] = (100).to_bytes(2, "big")  # even with a UDP length that leaves room: lookahead fails
    assert run(sw, bytes(frame)).shim_status == contract.SHIM_TRUNCATED


def test_malformed_are_never_selectively_dropped(sw):
    policy = DropPolicy(level_depths=(1, 2, 3), min_importance=(0, 8, 8, 8))
    install(sw, drop_entries(policy))
    for v in (0, 1, 15):
        _leave(sw, 10)
        assert not run(sw, shim_packet(0, 1, job=1, importance=0, version=v)).dropped
    _leave(sw, 10)
    assert run(sw, shim_packet(0, 1, job=1, importance=0)).dropped, "a valid low-importance shim is dropped"


# ---- priority classes ------------------------------------------------------------------------------


def test_control_class_default_class_and_job_classes(sw):
    install(
        sw,
        [
            job_priority(1, 1),
            job_priority(2, 5),
            job_priority(1, 6, iterations=(10, 20), priority=2),
            job_priority(3, 7),
            job_priority(4, 0),
            flow(2, dst=HOST_IP[2]),
        ],
    )
    cases = [
        (shim_packet(0, 1, job=1, iteration=5), 1),
        (shim_packet(0, 1, job=1, iteration=15), 6),
        (shim_packet(0, 1, job=1, iteration=21), 1),
        (shim_packet(0, 1, job=2), 5),
        (shim_packet(0, 1, job=3), 6),  # 7 is reserved: lowered to 6
        (shim_packet(0, 1, job=4), 0),  # below the default: demoted
        (shim_packet(0, 1, job=99), contract.PRIORITY_DEFAULT),
        (shim_packet(0, 1, job=2, msg_type=MsgType.ACK, payload=b"\x00" * 4), 5),  # an ACK: its job's class
        (shim_packet(0, 1, job=1, iteration=15, msg_type=MsgType.ACK, payload=b"\x00" * 4), 6),
        (shim_packet(0, 1, job=4, msg_type=MsgType.CNP), 7),
        (tcp_packet(0, 2, 1, 2), 5),  # untagged, classified by the 5-tuple as job 2
        (tcp_packet(0, 1, 1, 2), contract.PRIORITY_DEFAULT),
    ]
    for pkt, klass in cases:
        assert run(sw, pkt).priority == klass, pkt.summary()


def test_progress_bands_from_policy(sw):
    bands = interleaving_bands(levels=4, base=2)
    install(sw, [job_priority(8, b.priority, progress=(b.lo, b.hi), priority=2) for b in bands])
    for progress in range(16):
        expected = next(b.priority for b in bands if b.lo <= progress <= b.hi)
        assert run(sw, shim_packet(0, 1, job=8, progress=progress)).priority == expected


def test_changed_default_action_applies_to_unmatched(sw):
    sw[0][contract.JOB_PRIORITY].set_default(contract.SET_PRIORITY, {"priority": 3})
    assert run(sw, shim_packet(0, 1, job=77)).priority == 3
    sw[0][contract.JOB_PRIORITY].reset_default()
    assert run(sw, shim_packet(0, 1, job=77)).priority == 1


# ---- ECN -------------------------------------------------------------------------------------------


def _ce(d: pl.Decision) -> bool:
    return d.out is not None and Ether(d.out)[IP].tos & 3 == 3


def test_ecn_above_kmax_always_below_kmin_never(sw):
    profile = EcnProfile(kmin=2, kmax=5, pmax=0.5)
    install(sw, ecn_entries(profile, port=1))
    observed = 0
    for depth in range(0, 40):
        ect = run(sw, shim_packet(0, 1, job=1, ecn=2), enq_depth=depth)
        observed += _ce(ect)
        non_ect = run(sw, shim_packet(0, 1, job=1, ecn=0), enq_depth=depth)
        assert not _ce(non_ect), "non-ECT is never marked"
        if depth > profile.kmax:
            want = forwarded(shim_packet(0, 1, job=1, ecn=2), 1, ce=True, telemetry=(0, depth * PACKETS.unit_bytes))
            assert _ce(ect) and ect.out == want
        if depth <= profile.kmin:
            assert not _ce(ect)
    marked_ect = run(sw, shim_packet(0, 1, job=1, ecn=3), enq_depth=100)
    assert not marked_ect.ecn_marked, "already-CE packets are left alone"
    other_port = run(sw, shim_packet(0, 2, job=1, ecn=1), enq_depth=100)
    assert not _ce(other_port), "the profile is installed for port 1 only"
    assert sw[1].counter(contract.JOB_ECN_MARKS, 1)[0] == observed >= 40 - profile.kmax - 1


def test_an_empty_queue_is_never_marked_even_by_a_hand_written_entry(sw):
    """As v1model: an ECT packet that finds its queue empty is not looked up (no compiled profile marks
    depth 0), so an entry covering depth 0 marks from depth 1 on."""
    always = entry(contract.ECN_PROFILE, {contract.ENQ_QDEPTH: Range(0, 9)}, contract.MARK_ALWAYS, priority=1)
    install(sw, [always])
    assert not _ce(run(sw, shim_packet(0, 1, job=1, ecn=2), enq_depth=0))
    assert _ce(run(sw, shim_packet(0, 1, job=1, ecn=2), enq_depth=1))
    assert all(r.lo >= 1 for k in range(0, 40, 7) for r in compile_profile(EcnProfile(kmin=k, kmax=k + 8)))


def test_ecn_marked_fraction_between_kmin_and_kmax():
    """Between Kmin and Kmax each depth's marks lie within 4.5 binomial standard deviations of
    compile_profile's probability (itself within 1/65536 of mark_probability)."""
    tables, state = Tables(), SwitchState()
    profile = EcnProfile(kmin=4, kmax=32, pmax=0.2)
    install_entries(tables, host_routes() + ecn_entries(profile))
    ranges = compile_profile(profile)
    rng = pl.default_rng(12345)
    frame = bytes(shim_packet(0, 1, job=3, ecn=2))
    n = 1500
    total = 0
    for depth in (5, 10, 18, 25, 32):
        p = compiled_probability(ranges, depth)
        assert abs(p - mark_probability(profile, depth)) <= 1 / 65536
        marks = sum(pl.process(frame, 0, tables, state, enq_depth=depth, rng=rng).ecn_marked for _ in range(n))
        total += marks
        sigma = math.sqrt(n * p * (1 - p))
        assert abs(marks - n * p) <= 4.5 * sigma, f"depth {depth}: {marks} marks of {n}, expected {n * p:.0f}"
    assert state.counter(contract.JOB_ECN_MARKS, 3)[0] == total


def test_a_step_profile_per_class_marks_above_k_and_not_below(sw):
    """The controller's entries for one switch (mlfc.controller.compile.ecn_entries): on port 1, class 3
    steps at K = 8,200 bytes (5 packets of 1500, rounded down) and class 1 at 15 packets, over a port
    profile that marks any queue; port 2 keeps the every-port RED default. Each class meets its own K."""
    install(sw, [job_priority(2, 3), job_priority(4, 5)])  # job 2 rides class 3, job 4 class 5, job 1 class 1
    profiles = {
        (0, None): EcnProfile(kmin=20, kmax=30, pmax=0.0),  # every port: nothing below 31 packets
        (1, None): StepProfile(k_bytes=0),  # port 1, every class: any queue is marked
        (1, 3): StepProfile(k_bytes=8_200),
        (1, 1): StepProfile(k_bytes=15 * 1500),
    }
    install(sw, compile.ecn_entries(profiles))
    for job, k in ((2, 5), (1, 15)):
        for depth in range(1, 40):
            d = run(sw, shim_packet(0, 1, job=job, ecn=2), enq_depth=depth)
            assert _ce(d) == (depth > k), f"job {job} (class {d.priority}) at depth {depth}"
    # class 5 on port 1 has no profile of its own: the port's marks from depth 1
    assert _ce(run(sw, shim_packet(0, 1, job=4, ecn=2), enq_depth=1))
    # port 2: the every-port default, whatever the class
    for job in (1, 2, 4):
        assert not _ce(run(sw, shim_packet(0, 2, job=job, ecn=2), enq_depth=30))
        assert _ce(run(sw, shim_packet(0, 2, job=job, ecn=2), enq_depth=31))


# ---- selective drop ---------------------------------------------------------------------------------

POLICY = DropPolicy(level_depths=(4, 8, 12), min_importance=(0, 2, 4, 8))


def _leave(sw, deq_depth: int, port: int = 1, klass: int = 1) -> None:
    """A packet leaves (port, class) with ``deq_depth`` packets behind it: egress records the level."""
    tables, state = sw
    src = 0 if port != 0 else 1
    ing = pl.ingress(bytes(shim_packet(src, port, job=1, importance=15)), src, tables, state)
    assert ing.egress_port == port and ing.priority == klass
    pl.egress(ing, 0, deq_depth, tables, state, pl.default_rng(0))


def test_nothing_dropped_when_uncongested(sw):
    install(sw, drop_entries(POLICY))
    for imp in range(IMPORTANCE_LEVELS):
        assert not run(sw, shim_packet(0, 1, job=1, importance=imp)).dropped
    assert sw[1].counter(contract.JOB_DROPS, 1) == (0, 0)


@pytest.mark.parametrize("backlog", [2, 5, 9, 13, 40])
def test_low_importance_dropped_by_level(sw, backlog):
    install(sw, drop_entries(POLICY))
    install(sw, [flow(1, src=HOST_IP[0], dst=HOST_IP[1], protocol=6)])
    _leave(sw, backlog)
    level = congestion_level(POLICY, backlog)
    probes = [shim_packet(0, 1, job=1, importance=imp, seq=imp) for imp in range(IMPORTANCE_LEVELS)]
    dropped = [p for p in probes if run(sw, p).dropped]
    expected = [p for p in probes if should_drop(POLICY, level, p["MlfcShim"].importance, MsgType.DATA)]
    assert dropped == expected
    never = [
        shim_packet(0, 1, job=1, msg_type=MsgType.ACK, payload=b"\x00" * 4),
        shim_packet(0, 1, job=1, msg_type=MsgType.CNP),
        tcp_packet(0, 1, 5555, 6666),
    ]
    assert not any(run(sw, p).dropped for p in never), "ACK, CNP and untagged are never dropped"
    assert sw[1].counter(contract.JOB_DROPS, 1) == (len(expected), sum(len(p) for p in expected))
    assert sw[1].counter(contract.JOB_PACKETS, 1)[0] == 1 + len(probes) + len(never), "ingress counts before dropping"


def test_level_is_per_port_and_queue_and_clears_when_draining(sw):
    install(sw, drop_entries(POLICY))
    install(sw, [job_priority(2, 4)])
    _leave(sw, 20, port=1, klass=1)
    assert run(sw, shim_packet(0, 1, job=1, importance=0)).dropped
    assert not run(sw, shim_packet(0, 2, job=1, importance=0)).dropped, "port 2 is not congested"
    assert not run(sw, shim_packet(0, 1, job=2, importance=0)).dropped, "class 4 of port 1 is not congested"
    _leave(sw, 0, port=1, klass=1)
    assert not run(sw, shim_packet(0, 1, job=1, importance=0)).dropped, "a drained queue clears its level"


def test_level_zero_is_never_looked_up(sw):
    """As v1model: an uncongested queue drops nothing, whatever a hand-written level-0 entry says; the
    controller compiles thresholds for levels 1..3 only."""
    install(sw, [entry(contract.DROP_THRESHOLD, {contract.LEVEL: Exact(0)}, contract.SET_MIN_IMPORTANCE,
                       {"importance": 8})])  # fmt: skip
    _leave(sw, 0)
    assert not run(sw, shim_packet(0, 1, job=1, importance=0)).dropped
    compiled = [e for e in compile.drop_entries(POLICY) if e.table == contract.DROP_THRESHOLD]
    assert len(compiled) == 3 and all(dict(e.match)[contract.LEVEL] != Exact(0) for e in compiled)


def test_job_zero_drops_are_counted_at_index_zero(sw):
    install(sw, drop_entries(POLICY))
    _leave(sw, 30)
    assert run(sw, shim_packet(0, 1, job=0, importance=0)).dropped
    assert sw[1].counter(contract.JOB_DROPS, 0)[0] == 1
    assert sw[1].counter(contract.JOB_PACKETS, 0)[0] == 1, "counted (untracked) before it was dropped"


# ---- queue telemetry ---------------------------------------------------------------------------------


def _telemetry(d: pl.Decision) -> tuple[int, int]:
    shim = Ether(d.out)[MlfcShim]
    return shim.rate_class, shim.queue_bytes


def _udp_checksum_ok(frame: bytes) -> bool:
    pkt = Ether(frame)
    fresh = pkt.copy()
    del fresh[UDP].chksum
    return Ether(bytes(fresh))[UDP].chksum == pkt[UDP].chksum


def _rate(sw, port: int, rate_class: int) -> None:
    """The host route through ``port`` with the port's rate class, as the controller writes it."""
    sw[0][contract.ROUTES_V4].modify(model_entry(route(f"{HOST_IP[port]}/32", port, HOST_MAC[port],
                                                       rate_class=rate_class)))  # fmt: skip


def test_telemetry_is_the_deepest_queue_of_the_path_and_its_ports_rate_class(sw):
    """Depth in bytes (packets of 1500: mlfc.policy.depth.PACKETS), the rate class the route gives its egress
    port (0 without one), written when this hop's queue is at least as deep as what the packet
    carries: the path's maximum, the last hop at it naming the rate."""
    assert PACKETS.unit_bytes == 1500
    _rate(sw, 1, 56)
    assert _telemetry(run(sw, shim_packet(0, 1), enq_depth=0)) == (56, 0)
    assert _telemetry(run(sw, shim_packet(0, 2), enq_depth=3)) == (0, 3 * 1500)
    assert _telemetry(run(sw, shim_packet(0, 1), enq_depth=7)) == (56, 7 * 1500)
    # an earlier hop's deeper queue stays; an equal or shallower one is replaced by this hop's
    assert _telemetry(run(sw, shim_packet(0, 1, rate_class=9, queue_bytes=10501), enq_depth=7)) == (9, 10501)
    assert _telemetry(run(sw, shim_packet(0, 1, rate_class=9, queue_bytes=10500), enq_depth=7)) == (56, 10500)
    assert _telemetry(run(sw, shim_packet(0, 1, rate_class=9, queue_bytes=100), enq_depth=7)) == (56, 10500)


def test_telemetry_is_written_into_data_only(sw):
    """An ACK's telemetry is the receiver's echo and a CNP carries none: the switch leaves both as sent."""
    _rate(sw, 1, 3)
    for msg in (MsgType.ACK, MsgType.CNP):
        pkt = shim_packet(0, 1, msg_type=msg, rate_class=7, queue_bytes=11, ecn=0)
        d = run(sw, pkt, enq_depth=20)
        assert _telemetry(d) == (7, 11) and d.out == forwarded(pkt, 1)


@pytest.mark.parametrize("queue_bytes", [0, 1, 1 << 31, 0xFFFFFFFF])
@pytest.mark.parametrize("enq_depth", [0, 1, 5, 333, contract.MAX_QDEPTH])
def test_telemetry_keeps_the_udp_checksum_right(sw, queue_bytes, enq_depth):
    """A non-zero UDP checksum is updated incrementally (RFC 1624) to what a full recomputation gives; 0
    (no checksum) stays 0."""
    _rate(sw, 1, 255)
    pkt = shim_packet(0, 1, udp_checksum=True, rate_class=1, queue_bytes=queue_bytes, payload=b"\x5a\xa5" * 40)
    d = run(sw, pkt, enq_depth=enq_depth)
    assert _udp_checksum_ok(d.out)
    written = enq_depth * 1500 >= queue_bytes
    assert _telemetry(d) == ((255, enq_depth * 1500) if written else (1, queue_bytes))
    assert d.out == forwarded(pkt, 1, telemetry=_telemetry(d))
    no_checksum = run(sw, shim_packet(0, 1, queue_bytes=queue_bytes), enq_depth=enq_depth)
    assert Ether(no_checksum.out)[UDP].chksum == 0
