"""DCTCP against RFC 8257: alpha follows the marked fraction per observation window, an echo cuts
cwnd * (1 - alpha / 2), no marks is Reno; MLTCP's F on the additive increase (MLTCP-DCTCP)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from mlfc.hosts.cc import ALGORITHMS, Dctcp, DctcpParams, Mltcp, Reno, make_cc
from mlfc.hosts.transport import SenderConfig
from mlfc.policy.mltcp import MltcpParams, mltcp_factor, mltcp_scales

MSS = 1000
G = 1 / 16


def tracker_at(ratio: float, params: MltcpParams | None = None) -> Mltcp:
    return Mltcp(params or MltcpParams(), SimpleNamespace(ratio=ratio))  # any bytes_ratio source


def in_ca(cc: Dctcp, segments: float) -> Dctcp:
    """In congestion avoidance at ``segments``, an observation window of as much just begun."""
    cc._cwnd = cc.ssthresh = cc.window_bytes = segments * MSS
    return cc


def one_window(cc: Dctcp, fraction_marked: float, now: float = 0.0, acks: int = 10) -> None:
    """A window's worth (cwnd bytes) of ACKs, the first ``fraction_marked`` of the bytes echoed as marked."""
    per_ack = cc.window_bytes / acks
    marked_acks = round(fraction_marked * acks)
    for i in range(acks):
        cc.on_ecn_feedback(int(per_ack), int(per_ack) if i < marked_acks else 0, now)


def test_by_name_everywhere_a_controller_is_chosen():
    assert "dctcp" in ALGORITHMS
    cc = make_cc("dctcp", MSS)
    assert isinstance(cc, Dctcp) and cc.name == "dctcp" and cc.alpha == 1.0 and cc.cwnd == 10 * MSS
    assert SenderConfig(cc="dctcp").cc == "dctcp"
    with pytest.raises(ValueError):
        DctcpParams(g=0)


@pytest.mark.parametrize("fraction", [0.0, 0.3, 1.0])
def test_alpha_converges_to_the_marked_fraction(fraction):
    cc = in_ca(Dctcp(MSS), 20)
    for k in range(1, 121):
        one_window(cc, fraction)
        assert cc.windows == k
        assert cc.alpha == pytest.approx(fraction + (1 - fraction) * (1 - G) ** k)  # alpha_0 = 1
    assert cc.alpha == pytest.approx(fraction, abs=0.001)
    assert cc.cwnd == 20 * MSS  # feedback alone moves no window


def test_alpha_updates_once_per_window_of_acknowledged_bytes():
    cc = in_ca(Dctcp(MSS), 20)
    for _ in range(19):  # all marked, but the window (20 segments at its start) is not over
        cc.on_ecn_feedback(MSS, MSS, 0.0)
    assert cc.alpha == 1.0 and cc.windows == 0
    cc.on_ecn_feedback(MSS, 0, 0.0)
    assert cc.windows == 1 and cc.alpha == pytest.approx((1 - G) + G * 19 / 20)
    cc._cwnd = 8 * MSS  # a cut in the second window: the third is 8 segments, the cwnd at its start
    cc.on_ecn_feedback(10 * MSS, 0, 0.0)
    assert cc.windows == 1  # bytes acknowledged count, not ACKs: 10 of the second window's 20
    cc.on_ecn_feedback(10 * MSS, 0, 0.0)
    assert cc.windows == 2 and cc.window_bytes == 8 * MSS
    cc.on_ecn_feedback(8 * MSS, 8 * MSS, 0.0)
    assert cc.windows == 3


def test_a_window_also_ends_one_smoothed_rtt_after_it_began():
    """An application-limited flow acknowledges less than cwnd per RTT: the window still ends after one RTT."""
    cc = in_ca(Dctcp(MSS), 100)
    cc.on_ack(0, 0.01, False, 0.0)  # an RTT sample: srtt 10 ms
    cc.on_ecn_feedback(2 * MSS, MSS, 1.000)  # the window begins with its first ACK
    cc.on_ecn_feedback(2 * MSS, MSS, 1.005)
    assert cc.windows == 0
    cc.on_ecn_feedback(2 * MSS, MSS, 1.010)
    assert cc.windows == 1 and cc.alpha == pytest.approx((1 - G) + G * 0.5)


def test_an_echo_cuts_cwnd_by_alpha_over_two():
    cc = in_ca(Dctcp(MSS), 40)
    for _ in range(80):
        one_window(cc, 0.2)
    alpha = cc.alpha
    assert 0.2 < alpha < 0.21
    cc.on_ack(5 * MSS, 0.001, True, 1.0)  # the echoing ACK's bytes add nothing (RFC 3168)
    assert cc.cwnd == pytest.approx(40 * MSS * (1 - alpha / 2)) and cc.ssthresh == cc.cwnd
    assert cc.ecn_cuts == 1 and not cc.in_slow_start
    fresh = in_ca(Dctcp(MSS), 40)  # alpha 1 before any window: the first echo halves, as Reno's would
    fresh.on_ack(MSS, 0.001, True, 0.0)
    assert fresh.cwnd == 20 * MSS
    small = in_ca(Dctcp(MSS), 3)
    small.on_ack(MSS, 0.001, True, 0.0)
    assert small.cwnd == 2 * MSS  # floor of 2 segments


def test_loss_halves_whatever_alpha_and_timeout_collapses():
    cc = in_ca(Dctcp(MSS), 40)
    for _ in range(60):
        one_window(cc, 0.0)
    assert cc.alpha < 0.03
    cc.on_loss(0.0)
    assert cc.cwnd == cc.ssthresh == 20 * MSS  # RFC 8257 3.5: a loss as standard TCP's
    cc.on_timeout(0.0)
    assert cc.cwnd == MSS and cc.ssthresh == 10 * MSS


def test_without_marks_no_cut_and_it_grows_like_reno():
    dctcp, reno = Dctcp(MSS), Reno(MSS)
    now = 0.0
    for step in range(400):  # slow start, then congestion avoidance past ssthresh
        if step == 200:
            for cc in (dctcp, reno):
                cc.on_loss(now)
        now += 0.001
        for cc in (dctcp, reno):
            cc.on_ecn_feedback(MSS, 0, now)
            cc.on_ack(MSS, 0.01, False, now)
        assert dctcp.cwnd == reno.cwnd and dctcp.ssthresh == reno.ssthresh
    assert dctcp.ecn_cuts == 0 and dctcp.windows > 0 and dctcp.alpha < 0.5


@pytest.mark.parametrize("ratio", [0.0, 1.0])
def test_mltcp_scales_the_additive_increase(ratio):
    """MLTCP-DCTCP in congestion avoidance adds F / cwnd segments per acknowledged segment, F times plain."""
    params = MltcpParams(slope=1.0, intercept=0.5)
    f = mltcp_factor(ratio, params)
    plain, ml = in_ca(Dctcp(MSS), 20), in_ca(Dctcp(MSS, tracker_at(ratio, params)), 20)
    for cc in (plain, ml):
        cc.on_ack(MSS, 0.001, False, 0.0)
    assert plain.cwnd / MSS == pytest.approx(20 + 1 / 20)
    assert ml.cwnd / MSS == pytest.approx(20 + f / 20)
    # over many round trips: F times the plain growth (windows large, so the steps stay nearly linear)
    plain, ml = in_ca(Dctcp(MSS), 200), in_ca(Dctcp(MSS, tracker_at(ratio, params)), 200)
    for _ in range(5 * 200):
        for cc in (plain, ml):
            cc.on_ack(MSS, 0.001, False, 0.0)
    assert (ml.cwnd - 200 * MSS) == pytest.approx(f * (plain.cwnd - 200 * MSS), rel=0.03)


def test_mltcp_leaves_slow_start_and_the_cut_alone_under_the_papers_rule_and_scales_the_cut_when_bounded():
    plain, ml = Dctcp(MSS), Dctcp(MSS, tracker_at(1.0))
    for cc in (plain, ml):
        cc.on_ack(5 * MSS, 0.001, False, 0.0)
        cc.alpha = 0.5
    assert plain.cwnd == ml.cwnd == 15 * MSS
    for cc in (plain, ml):
        cc.on_ack(MSS, 0.001, True, 0.0)
    assert plain.cwnd == ml.cwnd == 15 * MSS * 0.75
    bounded = MltcpParams(7.0, 1.0, rule="bounded")
    cc = in_ca(Dctcp(MSS, tracker_at(0.5, bounded)), 40)
    cc.alpha = 0.5
    cc.on_ack(MSS, 0.001, True, 0.0)
    _, decrease = mltcp_scales(0.5, bounded)
    assert decrease < 1 and cc.cwnd == pytest.approx(40 * MSS * (1 - 0.25 * decrease))


def test_describe_carries_alpha():
    d = Dctcp(MSS).describe()
    assert d == {"cwnd": 10 * MSS, "rate": -1.0, "alpha": 1.0}
