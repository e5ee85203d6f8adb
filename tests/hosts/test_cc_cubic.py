"""CUBIC against RFC 9438: the window curve W_cubic(t) = C (t - K)^3 + W_max and MLTCP's scaled growth."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from mlfc.hosts.cc import Cubic, Mltcp
from mlfc.hosts.cc.cubic import cubic_k, w_cubic
from mlfc.policy.mltcp import MltcpParams, mltcp_factor

MSS = 1000


def test_curve_constants():
    assert cubic_k(100, 70, 0.4) == pytest.approx((30 / 0.4) ** (1 / 3))
    k = cubic_k(100, 70)
    assert w_cubic(0, 100, k) == pytest.approx(70)
    assert w_cubic(k, 100, k) == pytest.approx(100)
    assert w_cubic(k + 2, 100, k) == pytest.approx(100 + 0.4 * 8)


def after_loss(cc: Cubic, w: float, now: float = 0.0) -> Cubic:
    cc.w = w
    cc.ssthresh = w
    cc.on_loss(now)
    return cc


def test_loss_sets_beta_and_k():
    cc = after_loss(Cubic(MSS), 100)
    assert cc.w == pytest.approx(70)  # beta = 0.7
    assert cc.w_max == 100
    assert cc.k == pytest.approx((30 / 0.4) ** (1 / 3))
    again = after_loss(cc, 90, 1.0)  # below the last maximum: fast convergence lowers W_max
    assert again.w_max == pytest.approx(90 * 1.7 / 2)


def test_ece_is_cubics_congestion_event_with_beta_0_7():
    """An ECN echo (the transport's new congestion event, one per round trip) is a congestion event as a loss
    is (RFC 9438 section 4.6, RFC 3168): cwnd and ssthresh to beta_cubic = 0.7 of the window, not Reno's half,
    W_max, K and W_est as after a loss; the echoing ACK's bytes add nothing; fast convergence on the next."""
    ece = Cubic(MSS)
    ece.w = ece.ssthresh = 100
    ece.on_ack(5 * MSS, 0.01, True, 2.0)
    loss = after_loss(Cubic(MSS), 100, 2.0)
    assert ece.w == pytest.approx(70) and ece.ssthresh == pytest.approx(70)
    assert (ece.w_max, ece.k, ece.w_est, ece.epoch_start) == (loss.w_max, loss.k, loss.w_est, loss.epoch_start)
    assert ece.w_max == 100 and ece.k == pytest.approx((30 / 0.4) ** (1 / 3))
    ece.w = 90  # below the last maximum
    ece.on_ack(MSS, 0.01, True, 3.0)
    assert ece.w == pytest.approx(63) and ece.w_max == pytest.approx(90 * 1.7 / 2)
    ece.on_ack(MSS, 0.01, False, 3.0)  # no echo: congestion avoidance grows again
    assert ece.w > 63


def test_window_follows_the_cubic_curve():
    """One ACK per segment, RTT 100 ms, W_max 1000 (the cubic region, not the Reno-friendly one):
    cwnd tracks W_cubic(t + RTT) through the concave and convex parts of the curve."""
    rtt = 0.1
    cc = after_loss(Cubic(MSS), 1000)
    k = cc.k
    now = 0.0
    checkpoints = {round(k * f / rtt) for f in (0.25, 0.5, 1.0, 1.5)}
    seen = {}
    for step in range(1, round(1.5 * k / rtt) + 1):
        now = step * rtt
        for _ in range(int(cc.w)):  # one window of ACKs per RTT, spread over the RTT
            cc.on_ack(MSS, rtt, False, now)
        if step in checkpoints:
            seen[step] = (cc.w, w_cubic(now + rtt, 1000, k))
    for w, expected in seen.values():
        assert w == pytest.approx(expected, rel=0.03)
    first, *_, last = sorted(seen)
    assert seen[first][0] < 1000 < seen[last][0]  # concave below W_max, convex past it


@pytest.mark.parametrize("ratio", [0.0, 1.0])
def test_mltcp_scales_growth_toward_w_cubic(ratio):
    params = MltcpParams(slope=1.0, intercept=0.5)
    tracker = Mltcp(params, SimpleNamespace(ratio=ratio))  # any bytes_ratio source (the transport's: progress)
    plain = after_loss(Cubic(MSS), 200)
    ml = after_loss(Cubic(MSS, tracker), 200)
    assert plain.w == ml.w == pytest.approx(140)
    now = 1.0  # W_cubic(1 s) ~ 168 > W_est: the cubic region
    target = min(max(w_cubic(now + 0.01, 200, plain.k), 140), 1.5 * 140)
    plain.on_ack(MSS, 0.01, False, now)
    ml.on_ack(MSS, 0.01, False, now)
    f = mltcp_factor(ratio, params)
    assert plain.w - 140 == pytest.approx((target - 140) / 140)
    assert ml.w - 140 == pytest.approx(f * (target - 140) / 140)


def test_mltcp_off_is_plain_cubic():
    a, b = after_loss(Cubic(MSS), 150), after_loss(Cubic(MSS, None), 150)
    for i in range(200):
        a.on_ack(MSS, 0.01, False, i * 0.005)
        b.on_ack(MSS, 0.01, False, i * 0.005)
    assert a.w == b.w


def test_reno_friendly_region_uses_w_est():
    """Small window, short RTT: W_cubic grows slower than Reno would, so cwnd follows W_est (+0.53/RTT)."""
    cc = after_loss(Cubic(MSS), 200)
    for step in range(1, 101):
        for _ in range(int(cc.w)):
            cc.on_ack(MSS, 0.01, False, step * 0.01)
    assert cc.w == pytest.approx(cc.w_est)
    assert cc.w - 140 == pytest.approx(100 * cc.alpha_cubic, rel=0.05)
    assert cc.w > w_cubic(1.0, 200, cc.k) + 10


def test_timeout_restarts_from_one_segment():
    cc = after_loss(Cubic(MSS), 100)
    cc.on_timeout(1.0)
    assert cc.w == 1 and cc.epoch_start is None


def test_idle_restart_returns_to_the_initial_window_and_a_fresh_epoch():
    cc = after_loss(Cubic(MSS), 100)
    assert cc.w > 10
    w = cc.w
    cc.on_idle_restart(5.0)
    assert cc.w == 10 and cc.epoch_start is None
    assert cc.ssthresh == pytest.approx(max(w, 0.75 * w))  # ssthresh after the loss was w itself
