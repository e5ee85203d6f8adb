"""The network-decided withheld share (mlfc.policy.withhold): f, the congestion estimate, and which chunks."""

from __future__ import annotations

import pytest

from mlfc.policy import loss
from mlfc.policy.priority import PolicyError
from mlfc.policy.telemetry import class_rate, rate_class
from mlfc.policy.withhold import (
    ROOM_BYTES,
    CongestionEstimate,
    WithholdPolicy,
    choose_withheld,
    congestion_sample,
    echo_excess,
    link_rate,
    own_share,
    repair_bound,
    share_for,
    withheld_share,
)
from mlfc.wire import IMPORTANCE_PROTECTED

P = WithholdPolicy(signal="share")
MARKS = WithholdPolicy()


def test_a_free_link_withholds_nothing():
    assert share_for(P, 0.0) == 0.0
    assert withheld_share(P, 0.0, 1.0) == 0.0
    assert choose_withheld([0] * 10, [100] * 10, withheld_share(P, 0.0, 0.5)) == []


def test_the_share_grows_with_congestion_up_to_the_bound():
    for policy in (P, MARKS):
        shares = [withheld_share(policy, c / 20, 0.3) for c in range(21)]
        assert shares == sorted(shares) and shares[1] > 0
        assert max(shares) == 0.3  # the loss bound caps it
    assert withheld_share(MARKS, 0.05, 0.3) == pytest.approx(0.1)  # gain 2: 5 % marked -> 10 % withheld
    assert withheld_share(P, 0.2, 0.3) == pytest.approx(0.2)  # gain 1: others take 20 % -> 20 % withheld
    assert share_for(WithholdPolicy(gain=2.0), 1.0) == 1.0
    assert (P.gain, MARKS.gain, WithholdPolicy(gain=3.0, signal="share").gain) == (1.0, 2.0, 3.0)
    assert WithholdPolicy().signal == "marks"  # the measured design stays the default


@pytest.mark.parametrize(
    "bad", [{"gain": -1.0}, {"gain": float("inf")}, {"weight": 0.0}, {"weight": 1.5}, {"signal": "rtt"}]
)
def test_bad_policies_are_refused(bad):
    with pytest.raises(PolicyError):
        WithholdPolicy(**bad)


def test_out_of_range_inputs_are_refused():
    with pytest.raises(PolicyError):
        share_for(P, 1.5)
    with pytest.raises(PolicyError):
        withheld_share(P, 0.1, -0.1)
    with pytest.raises(PolicyError):
        choose_withheld([0, 0], [1], 0.5)
    with pytest.raises(PolicyError):
        CongestionEstimate(P).update(2.0)


def test_the_estimate_is_an_ewma_of_the_pushes_congestion():
    e = CongestionEstimate(WithholdPolicy(weight=0.5))
    assert e.value == 0.0
    assert e.update(0.4) == pytest.approx(0.2)
    assert e.update(0.4) == pytest.approx(0.3)
    for _ in range(40):
        e.update(0.0)
    assert e.value < 1e-9  # a link that frees up stops withholding


def test_a_marks_sample_is_the_larger_of_the_marked_and_the_lost_share():
    assert congestion_sample(MARKS, 10, 0.0, 0) == 0.0
    assert congestion_sample(MARKS, 10, 0.25, 1) == 0.25
    assert congestion_sample(MARKS, 10, 0.05, 3) == pytest.approx(0.3)
    assert congestion_sample(MARKS, 0, 1.0, 5) == 0.0
    assert congestion_sample(MARKS, 2, 0.0, 9) == 1.0
    assert congestion_sample(MARKS, 10, 0.05, 0, own_share=0.1) == pytest.approx(0.05)  # the share is not its signal


def test_a_share_sample_is_what_others_take_of_a_busy_link_however_often_it_is_marked():
    # Alone and marked often: served at the link's rate while the queue stands, nothing taken by others.
    assert congestion_sample(P, 100, 0.3, 0, own_share=1.0) == 0.0
    # One of three: a third of the busy link, the others take two thirds; the mark rate does not matter.
    assert congestion_sample(P, 100, 0.01, 0, own_share=1 / 3) == pytest.approx(2 / 3)
    assert congestion_sample(P, 100, 0.5, 0, own_share=1 / 3) == pytest.approx(2 / 3)
    # No marked ACK, no standing queue: no congestion, unless chunks were dropped.
    assert congestion_sample(P, 100, 0.0, 0, own_share=None) == 0.0
    assert congestion_sample(P, 100, 0.0, 20, own_share=None) == pytest.approx(0.2)
    assert congestion_sample(P, 100, 0.1, 40, own_share=0.9) == pytest.approx(0.4)
    assert congestion_sample(P, 0, 0.1, 40, own_share=0.1) == 0.0


def test_own_share_is_the_delivery_rate_over_the_capacity():
    assert own_share(50.0, 200.0) == 0.25
    assert own_share(250.0, 200.0) == 1.0  # a window above the capacity seen so far (it is updated first)
    assert own_share(0.0, 200.0) is None and own_share(10.0, 0.0) is None


def test_least_important_first_within_the_share_never_protected_nor_the_last():
    classes = [5, 0, IMPORTANCE_PROTECTED, 1, 0, 0, 7, 2]
    sizes = [100] * 8
    mags = [0.5, 0.3, 9.0, 0.1, 0.2, 0.4, 0.6, 0.0]
    # 30 % of 800 bytes = 240: two whole chunks, the class-0 ones of smallest magnitude (4: 0.2, 1: 0.3)
    assert choose_withheld(classes, sizes, 0.3, mags) == [1, 4]
    assert choose_withheld(classes, sizes, 0.4, mags) == [1, 4, 5]
    everything = choose_withheld(classes, sizes, 1.0, mags)
    assert 2 not in everything and 7 not in everything  # protected; the last (end-of-tensor marker)
    assert everything == [0, 1, 3, 4, 5, 6]
    assert choose_withheld(classes, sizes, 0.125, None) == [1]  # ties: the earlier chunk


@pytest.mark.parametrize("share", [0.0, 0.01, 0.05, 0.12, 0.33, 0.5, 0.99, 1.0])
def test_the_share_is_never_exceeded(share):
    sizes = [1400] * 30 + [523]
    classes = [i % 8 for i in range(31)]
    chosen = choose_withheld(classes, sizes, share)
    assert sum(sizes[i] for i in chosen) <= share * sum(sizes)
    assert chosen == sorted(set(chosen))


# ---- the telemetry signal: the queue the switches report, echoed ---------------------------------------

TELEMETRY = WithholdPolicy(signal="telemetry")
LINK_BPS = 12e6  # a lab bottleneck: 1000 full-size packets/s
LINK = LINK_BPS / 8  # bytes/s
CLASS = rate_class(LINK_BPS)


def _push_sample(echoes: list[tuple[int, float]], capacity: float = 0.0, rate_class_: int = CLASS) -> float:
    """A push's congestion sample from its ACKs' echoes (queue_bytes, the flow's delivery rate then)."""
    excess = [echo_excess(q, rate_class_, r, capacity) for q, r in echoes]
    read = [e for e in excess if e is not None]
    mean = sum(read) / len(read) if read else None
    return congestion_sample(TELEMETRY, 100, 0.0, 0, None, mean)


def test_telemetry_withholds_nothing_while_the_queue_leaves_room():
    """Room: at most ROOM_BYTES queued (below the marking threshold), or a queue that drains within
    DRAIN_TARGET at the port's rate, however small the flow's share of the link."""
    assert ROOM_BYTES == 4 * 1500
    for queue in (0, 1500, ROOM_BYTES):
        assert echo_excess(queue, CLASS, LINK / 10, 0.0) == 0.0
    fast = rate_class(100e9)  # 100 Gb/s drains 200 KB within 20 us
    assert echo_excess(200_000, fast, 1e6, 0.0) == 0.0 and echo_excess(300_000, fast, 1e6, 0.0) > 0.9
    sample = _push_sample([(ROOM_BYTES, LINK / 3)] * 50)
    assert sample == 0.0
    assert withheld_share(TELEMETRY, sample, 0.5) == 0.0
    assert choose_withheld([0] * 10, [100] * 10, withheld_share(TELEMETRY, sample, 0.5)) == []


@pytest.mark.parametrize("flows", [1, 2, 3, 4, 8])
def test_a_persistent_queue_has_each_flow_withhold_its_share_of_the_excess(flows):
    """N backlogged flows on a saturated link, the queue standing all the push: each is served 1/N of the
    link, so 1 - 1/N of its demand is excess, and that is what it withholds (up to the bound). Alone, a flow
    withholds nothing however deep the queue. The rate class reads the link within 9 %, on the low side, so
    the estimate is never above the truth."""
    deep = 40 * 1500
    sample = _push_sample([(deep, LINK / flows)] * 200)
    truth = 1 - 1 / flows
    assert truth - 0.1 <= sample <= truth
    if flows == 1:
        assert sample == 0.0
    assert withheld_share(TELEMETRY, sample, 0.5) == pytest.approx(min(0.5, sample))
    # the flow's own highest delivery rate, when above the class's lowest rate, is the link's rate
    assert _push_sample([(deep, LINK / flows)] * 10, capacity=LINK) == pytest.approx(truth)


def test_telemetry_counts_how_much_of_the_push_the_queue_stood():
    """A queue standing for half the ACKs counts half; a burst's queue at a few ACKs counts little."""
    deep, share = 40 * 1500, LINK / 3
    full = _push_sample([(deep, share)] * 100)
    assert _push_sample([(deep, share)] * 50 + [(0, share)] * 50) == pytest.approx(full / 2)
    assert _push_sample([(deep, share)] * 2 + [(0, share)] * 98) == pytest.approx(full / 50)


def test_telemetry_respects_the_bound_and_counts_drops():
    deep = 40 * 1500
    sample = _push_sample([(deep, LINK / 8)] * 100)
    assert sample > 0.8
    for bound in (0.0, 0.1, 0.5):
        share = withheld_share(TELEMETRY, sample, bound)
        assert share == bound
        withheld = choose_withheld([0] * 99 + [IMPORTANCE_PROTECTED], [1000] * 100, share)
        assert len(withheld) * 1000 <= bound * 100 * 1000
    assert congestion_sample(TELEMETRY, 100, 0.9, 20, 0.1, 0.0) == 0.2  # marks and shares do not count; drops do


def test_telemetry_without_a_known_rate_or_delivery_rate_is_no_sample():
    assert link_rate(0, 0.0) is None and echo_excess(10**6, 0, 1e6, 0.0) is None  # no class, no capacity
    # the larger of the two lower bounds: the class's lowest rate (bits/s / 8) or the flow's capacity (bytes/s)
    assert link_rate(0, 5e5) == 5e5 and link_rate(CLASS, 2e6) == 2e6
    assert link_rate(CLASS, 0.0) == link_rate(CLASS, 5e5) == pytest.approx(class_rate(CLASS) / 8)
    assert echo_excess(10**6, CLASS, 0.0, 0.0) is None  # a standing queue, no delivery rate measured yet
    assert _push_sample([(10**6, 0.0)] * 10) == 0.0  # nothing read: nothing withheld


def test_rate_classes_are_lower_bounds_within_nine_percent():
    for bps in (1e5, 12e6, 1e9, 25e9, 100e9, 400e9, 1.6e12):
        k = rate_class(bps)
        assert 1 <= k <= 255 and class_rate(k) <= bps < class_rate(k) * 1.0906
    assert class_rate(0) is None and rate_class(1.0) == 1 and rate_class(1e30) == 255
    with pytest.raises(PolicyError):
        rate_class(0)
    with pytest.raises(PolicyError):
        class_rate(256)


@pytest.mark.parametrize(("withheld", "nbytes"), [(0, 100), (1, 3), (29, 10000), (1024, 7001), (4096, 4096), (7, 997)])
def test_the_repair_bound_covers_the_withheld_bytes_and_under_a_basis_point_more(withheld, nbytes):
    bound = repair_bound(withheld, nbytes)
    bp = loss.to_basis_points(bound)  # what the wire carries (truncated)
    assert bp * nbytes // loss.LOSS_BOUND_SCALE >= withheld  # every withheld byte is covered
    assert bp == 0 if withheld == 0 else (bp - 1) * nbytes < withheld * loss.LOSS_BOUND_SCALE  # and no more


@pytest.mark.parametrize(("withheld", "nbytes"), [(-1, 10), (11, 10), (0, 0)])
def test_a_repair_bound_of_impossible_bytes_is_refused(withheld, nbytes):
    with pytest.raises(PolicyError, match="withheld_bytes"):
        repair_bound(withheld, nbytes)
