"""Reno against RFC 5681 and MLTCP's rule: cwnd += F / cwnd (segments) per acknowledged segment in CA."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from mlfc.hosts.cc import Mltcp, Reno
from mlfc.policy.mltcp import MltcpParams, mltcp_factor

MSS = 1000


def tracker_at(ratio: float, params: MltcpParams | None = None) -> Mltcp:
    return Mltcp(params or MltcpParams(), SimpleNamespace(ratio=ratio))  # any bytes_ratio source


def in_ca(cc: Reno, segments: float) -> Reno:
    cc._cwnd = segments * MSS
    cc.ssthresh = segments * MSS
    return cc


def test_slow_start_adds_acked_bytes_until_ssthresh():
    cc = Reno(MSS)
    assert cc.cwnd == 10 * MSS  # RFC 6928
    cc.on_ack(3 * MSS, 0.001, False, 0.0)
    assert cc.cwnd == 13 * MSS
    cc.ssthresh = 14 * MSS
    cc.on_ack(2 * MSS, 0.001, False, 0.0)  # 1 segment of slow start, then 1 segment of CA
    assert cc.cwnd == pytest.approx(14 * MSS + MSS * MSS / (14 * MSS))


def test_plain_congestion_avoidance_is_one_over_cwnd():
    cc = in_ca(Reno(MSS), 20)
    cc.on_ack(MSS, 0.001, False, 0.0)
    assert cc.cwnd / MSS == pytest.approx(20 + 1 / 20)


@pytest.mark.parametrize("ratio", [0.0, 1.0])
def test_mltcp_increase_is_f_over_cwnd(ratio):
    params = MltcpParams(slope=1.0, intercept=0.5)
    cc = in_ca(Reno(MSS, tracker_at(ratio, params)), 20)
    cc.on_ack(MSS, 0.001, False, 0.0)
    f = mltcp_factor(ratio, params)
    assert f == (0.5 if ratio == 0 else 1.5)
    assert cc.cwnd / MSS == pytest.approx(20 + f / 20)


def test_mltcp_leaves_slow_start_and_decrease_alone():
    plain, ml = Reno(MSS), Reno(MSS, tracker_at(1.0))
    for cc in (plain, ml):
        cc.on_ack(5 * MSS, 0.001, False, 0.0)
    assert plain.cwnd == ml.cwnd == 15 * MSS
    for cc in (plain, ml):
        cc.on_loss(0.0)
    assert plain.cwnd == ml.cwnd == 7.5 * MSS


def test_loss_and_ece_halve_and_timeout_collapses():
    cc = in_ca(Reno(MSS), 40)
    cc.on_loss(0.0)
    assert (cc.cwnd, cc.ssthresh) == (20 * MSS, 20 * MSS)
    cc.on_ack(MSS, 0.001, True, 0.0)  # ECN echo: a congestion event, no increase
    assert cc.cwnd == 10 * MSS
    cc.on_timeout(0.0)
    assert cc.cwnd == MSS and cc.ssthresh == 5 * MSS
    small = in_ca(Reno(MSS), 3)
    small.on_loss(0.0)
    assert small.cwnd == 2 * MSS  # floor of 2 segments


def test_window_is_capped():
    cc = Reno(MSS)
    cc.on_ack(10**9, 0.001, False, 0.0)
    assert cc.cwnd == cc.params.max_window * MSS
    assert math.isinf(cc.ssthresh)


def test_idle_restart_goes_back_to_the_initial_window_keeping_three_quarters_as_ssthresh():
    cc = Reno(MSS)
    cc.on_ack(90 * MSS, 0.01, False, 0.0)  # slow start to 100 segments
    assert cc.cwnd == 100 * MSS
    cc.on_idle_restart(1.0)
    assert cc.cwnd == 10 * MSS and cc.in_slow_start
    assert cc.ssthresh == math.inf  # no loss yet: slow start may climb as far as before
    cc.on_loss(1.1)  # ssthresh 5 segments
    cc.on_idle_restart(2.0)
    assert cc.cwnd == 5 * MSS  # a window already below IW is kept
    assert cc.ssthresh == 5 * MSS
