"""Traffic manager and the switch on a virtual clock: strict priority behind one shared port rate,
BMv2's per-queue limiters, depths, and ECN / selective drop driven by the queues' real depths."""

from __future__ import annotations

import math

import pytest
from refswitch_helpers import drop_entries, ecn_entries, host_routes, job_priority, shim_packet
from scapy.layers.inet import IP
from scapy.layers.l2 import Ether

from mlfc import contract
from mlfc.policy.drop import DropPolicy, should_drop
from mlfc.policy.ecn import EcnProfile, mark_probability
from mlfc.refswitch.sim import VirtualSwitch
from mlfc.refswitch.tm import PER_QUEUE, SHARED, QueueConfigError, TrafficManager
from mlfc.testing.refswitch import install
from mlfc.wire import IMPORTANCE_LEVELS, MlfcShim, MsgType


def test_shared_rate_serves_strictly_by_priority():
    tm = TrafficManager(8, SHARED)
    tm.set_rate(10, port=1)
    for i in range(5):
        tm.enqueue(1, 1, f"low{i}", 0.0)
    for i in range(3):
        tm.enqueue(1, 5, f"high{i}", 0.0)
    out = tm.drain(10.0)
    assert [d.item for d in out] == ["high0", "high1", "high2", "low0", "low1", "low2", "low3", "low4"]
    assert [round(d.time, 6) for d in out] == [round(i / 10, 6) for i in range(8)], "one port rate for all queues"


def test_shared_rate_starves_the_low_class_while_a_high_class_is_busy():
    """Both classes offer 8 pkt/s to an 8 pkt/s port: everything that leaves is high and the low
    queue only grows until the high class stops. (Times are exact binary fractions.)"""
    tm = TrafficManager(8, SHARED, default_depth=1000)
    tm.set_rate(8, port=1)
    out = []
    for k in range(100):  # 12.5 s of arrivals
        t = k / 8
        tm.enqueue(1, 1, ("low", k), t)
        tm.enqueue(1, 6, ("high", k), t)
        out += tm.drain(t)
    assert all(d.item[0] == "high" for d in out)
    assert len(out) == 100 and tm.depth(1, 1) == 100
    rest = tm.drain(100.0)
    assert [d.item for d in rest] == [("low", k) for k in range(100)], "FIFO within a class"


def test_per_queue_mode_limits_each_queue_on_its_own_like_bmv2():
    """BMv2: with the same rate on two busy classes they interleave (each gets the rate)."""
    tm = TrafficManager(8, PER_QUEUE)
    tm.set_rate(10, port=1)  # a port-level rate sets every priority queue of the port
    for i in range(10):
        tm.enqueue(1, 1, ("low", i), 0.0)
        tm.enqueue(1, 6, ("high", i), 0.0)
    out = tm.drain(2.0)
    assert len(out) == 20, "each queue drains at 10 pkt/s in parallel: 20 packets in ~1 s"
    assert max(d.time for d in out) == pytest.approx(0.9)
    kinds = [d.item[0] for d in out]
    assert kinds[:4] == ["high", "low", "high", "low"], "equal rates interleave"


def test_per_queue_mode_fixes_departure_times_at_enqueue_like_bmv2():
    tm = TrafficManager(8, PER_QUEUE)
    tm.set_rate(1, 1, 1)
    for i in range(5):
        tm.enqueue(1, 1, i, 0.0)
    tm.set_rate(1_000_000, 1, 1)  # BMv2: does not move packets already queued
    assert [d.time for d in tm.drain(100.0)] == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_shared_mode_rate_change_applies_to_queued_packets():
    tm = TrafficManager(8, SHARED)
    tm.set_rate(1, port=1)
    for i in range(5):
        tm.enqueue(1, 1, i, 0.0)
    assert len(tm.drain(0.5)) == 1
    tm.set_rate(0, port=1)  # 0: unlimited
    assert len(tm.drain(0.5)) == 4


def test_queue_cap_inside_the_shared_port_rate():
    """A per-queue rate in shared mode caps that queue; the port still serves others strictly."""
    tm = TrafficManager(8, SHARED)
    tm.set_rate(100, port=1)
    tm.set_rate(10, 1, 6)
    for i in range(5):
        tm.enqueue(1, 6, ("high", i), 0.0)
        tm.enqueue(1, 1, ("low", i), 0.0)
    out = tm.drain(0.05)
    assert [d.item for d in out] == [("high", 0), ("low", 0), ("low", 1), ("low", 2), ("low", 3), ("low", 4)]


def test_depth_limit_tail_drops_and_reports_depths():
    tm = TrafficManager(8, SHARED, default_depth=64)
    tm.set_depth(3, 2, 4)
    results = [tm.enqueue(2, 4, i, 0.0) for i in range(5)]
    assert results == [(True, 0), (True, 1), (True, 2), (False, 3), (False, 3)]
    tm.set_rate(1, port=2)
    deps = tm.drain(0.0)
    assert [(d.enq_depth, d.deq_depth) for d in deps] == [(0, 2)]
    assert tm.enqueue(2, 8, "x", 0.0) == (False, 0), "a priority >= the number of queues is dropped (BMv2)"


def test_queue_config_errors():
    tm = TrafficManager(8, SHARED)
    with pytest.raises(QueueConfigError):
        tm.set_rate(-1)
    with pytest.raises(QueueConfigError):
        tm.set_depth(10, 1, 8)
    with pytest.raises(QueueConfigError):
        TrafficManager(8, "fair")


# ---- the switch on a virtual clock --------------------------------------------------------------------


def _switch(mode: str = SHARED) -> VirtualSwitch:
    from mlfc.refswitch.tm import TrafficManager as TM

    vs = VirtualSwitch(tm=TM(8, mode))
    install(vs.tables, host_routes())
    return vs


def _order(vs: VirtualSwitch) -> list[tuple[int, int]]:
    return [(Ether(e.decision.out)[MlfcShim].job_id, Ether(e.decision.out)[MlfcShim].chunk_seq) for e in vs.emitted]


def test_job_class_overtakes_queued_traffic_behind_a_shared_rate():
    vs = _switch()
    install(vs.tables, [job_priority(1, 1), job_priority(2, 5)])
    vs.tm.set_rate(2, port=1)
    for i in range(20):
        vs.send(bytes(shim_packet(0, 1, job=1, seq=i)), 0, at=i * 0.001)
    for i in range(5):
        vs.send(bytes(shim_packet(0, 1, job=2, seq=100 + i)), 0, at=0.05 + i * 0.001)
    vs.run_all()
    order = _order(vs)
    assert order[:1] == [(1, 0)], "the first low packet left before the highs arrived"
    assert order[1:6] == [(2, 100 + i) for i in range(5)], f"highs overtake every queued low: {order}"
    assert [s for j, s in order if j == 1] == list(range(20)), "FIFO within a class"
    times = [e.time for e in vs.emitted]
    assert times[-1] == pytest.approx(24 * 0.5), "25 packets at 2 pkt/s through one port"


def test_cnps_take_the_control_class_and_acks_their_jobs():
    vs = _switch()
    install(vs.tables, [job_priority(1, 1), job_priority(2, 5)])
    vs.tm.set_rate(2, port=1)
    for i in range(20):
        vs.send(bytes(shim_packet(0, 1, job=1, seq=i)), 0, at=0.0)
    vs.send(bytes(shim_packet(0, 1, job=1, msg_type=MsgType.ACK, seq=500, payload=b"\x00" * 4)), 0, at=0.1)
    vs.send(bytes(shim_packet(0, 1, job=2, msg_type=MsgType.ACK, seq=501, payload=b"\x00" * 4)), 0, at=0.1)
    vs.send(bytes(shim_packet(0, 1, job=1, msg_type=MsgType.CNP, seq=502)), 0, at=0.1)
    vs.run_all()
    seqs = [s for _, s in _order(vs)]
    # the CNP first (control class), then job 2's ACK (class 5) ahead of job 1's queued data; job 1's own
    # ACK waits in job 1's class behind its data (FIFO), as that data would
    assert seqs[1:3] == [502, 501], seqs
    assert seqs[-1] == 500, seqs
    assert [e.decision.priority for e in vs.emitted][1:3] == [7, 5]
    assert vs.emitted[-1].decision.priority == 1


def test_bmv2_mode_does_not_starve_at_equal_rates():
    vs = _switch(PER_QUEUE)
    install(vs.tables, [job_priority(2, 5)])
    vs.tm.set_rate(10, port=1)
    for i in range(10):
        vs.send(bytes(shim_packet(0, 1, job=1, seq=i)), 0, at=0.0)
        vs.send(bytes(shim_packet(0, 1, job=2, seq=100 + i)), 0, at=0.0)
    vs.run_all()
    jobs = [j for j, _ in _order(vs)]
    # job 1's first packet finds the port idle and leaves at once; then each 0.1 s slot carries one
    # packet of each class (the higher first): equal per-queue rates interleave.
    assert jobs[:8] == [1, 2, 2, 1, 2, 1, 2, 1]


def _is_ce(e) -> bool:
    return Ether(e.decision.out)[IP].tos & 3 == 3


def test_ecn_marks_follow_the_queue_depth_of_a_held_queue():
    """A burst into a 1 pkt/s queue: the first packet leaves at once, packet i >= 1 is enqueued
    behind exactly i - 1 packets."""
    profile = EcnProfile(kmin=2, kmax=5, pmax=0.5)
    vs = _switch()
    install(vs.tables, ecn_entries(profile, port=1))
    vs.tm.set_rate(1, port=1)
    for i in range(40):
        vs.send(bytes(shim_packet(0, 1, job=1, seq=i, ecn=2 if i % 2 == 0 else 0)), 0, at=0.0)
    vs.run_all()
    for e in vs.emitted:
        depth = e.decision.enq_depth
        seq = Ether(e.decision.out)[MlfcShim].chunk_seq
        assert depth == max(0, seq - 1)
        if seq % 2:
            assert not _is_ce(e)
        elif depth > profile.kmax:
            assert _is_ce(e)
        elif depth <= profile.kmin:
            assert not _is_ce(e)
    assert vs.state.counter(contract.JOB_ECN_MARKS, 1)[0] == sum(_is_ce(e) for e in vs.emitted)


def test_marked_fraction_follows_the_profile_in_a_held_queue():
    """Like ptf-tests/test_ecn.MarkedFractionFollowsTheProfile: marks between Kmin and Kmax within 4
    standard deviations (binomial) of the profile's expectation for the depths the packets saw."""
    profile = EcnProfile(kmin=50, kmax=650, pmax=0.4)
    vs = _switch()
    install(vs.tables, ecn_entries(profile))
    vs.tm.set_depth(2000, 1, 1)
    vs.tm.set_rate(1, port=1)
    for i in range(profile.kmax + 1):
        vs.send(bytes(shim_packet(0, 1, job=1, seq=i, size=100)), 0, at=0.0)
    vs.run_all()
    band = [e for e in vs.emitted if profile.kmin < e.decision.enq_depth <= profile.kmax]
    marks = sum(_is_ce(e) for e in band)
    ps = [mark_probability(profile, e.decision.enq_depth) for e in band]
    expected, sigma = sum(ps), math.sqrt(sum(p * (1 - p) for p in ps))
    assert abs(marks - expected) <= 4 * sigma, f"{marks} marks, expected {expected:.1f} +- {sigma:.1f}"


def test_selective_drop_under_congestion_only():
    """Like ptf-tests/test_selective_drop: a backlog of protected packets in a 1 pkt/s queue; once two
    have left, the level recorded is that of the queue behind them and probes are dropped by policy."""
    policy = DropPolicy(level_depths=(4, 8, 12), min_importance=(0, 2, 4, 8))
    vs = _switch()
    install(vs.tables, drop_entries(policy))
    vs.tm.set_depth(4096, 1, 1)
    vs.tm.set_rate(1, port=1)
    backlog = 20
    for i in range(backlog):
        vs.send(bytes(shim_packet(0, 1, job=1, importance=15, seq=10_000 + i)), 0, at=0.0)
    vs.run_until(1.5)  # two have left: the second left 18 packets behind it -> level 3
    probes = [shim_packet(0, 1, job=1, importance=imp, seq=imp) for imp in range(IMPORTANCE_LEVELS)]
    decisions = [vs.send(bytes(p), 0) for p in probes]
    for imp, d in enumerate(decisions):
        assert (d is not None and d.dropped) == should_drop(policy, 3, imp, MsgType.DATA), imp
    vs.run_all()
    # Once the queue has drained the level is 0 again: nothing is dropped.
    assert all(vs.send(bytes(p), 0, at=vs.now + 100) is None for p in probes)
