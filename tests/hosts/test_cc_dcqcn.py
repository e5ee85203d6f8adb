"""DCQCN's reaction point against the SIGCOMM'15 rules, and MLTCP's scaled R_AI / R_HAI."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from mlfc.hosts.cc import Dcqcn, DcqcnParams, Mltcp
from mlfc.hosts.progress import IterationProgress
from mlfc.hosts.transport.packet import HEADER_LEN
from mlfc.hosts.transport.transmit import count_sent
from mlfc.policy.mltcp import MltcpParams, mltcp_factor

LINE = 1e9
T = 55e-6 * 40  # the paper's 55 us at 40 Gb/s, scaled to 1 Gb/s


def fresh(mltcp: Mltcp | None = None, **kw) -> Dcqcn:
    return Dcqcn(1000, mltcp, DcqcnParams(line_rate=LINE, **kw), now=0.0)


def test_defaults_scale_with_line_rate():
    p = DcqcnParams(line_rate=LINE)
    assert p.g == 1 / 256 and p.fast_recovery_steps == 5 and p.b == 10e6
    assert p.k == p.t == pytest.approx(T)  # same number of packet times per period as the paper's 55 us at 40G
    assert DcqcnParams(line_rate=40e9).t == pytest.approx(55e-6)
    assert p.r_ai == LINE / 1000  # 40 Mb/s at 40 Gb/s
    cc = fresh()
    assert cc.rc == cc.rt == LINE and cc.pacing_rate == LINE / 8


def test_cnp_cuts_rate_and_updates_alpha():
    cc = fresh()
    cc.on_cnp(0.0)
    assert cc.rt == LINE
    assert cc.rc == pytest.approx(LINE * (1 - 1.0 / 2))  # alpha starts at 1
    assert cc.alpha == pytest.approx((1 - 1 / 256) * 1.0 + 1 / 256)
    alpha, rc = cc.alpha, cc.rc
    cc.on_cnp(cc.params.n)  # the next cut allowed (one per N)
    assert cc.rt == rc
    assert cc.rc == pytest.approx(rc * (1 - alpha / 2))
    assert cc.alpha == pytest.approx((1 - 1 / 256) * alpha + 1 / 256)


def test_alpha_decays_without_cnp_every_k():
    cc = fresh(increase_timer=1.0)  # isolate the alpha timer
    cc.on_cnp(0.0)
    a = cc.alpha
    cc.on_timer(0.5 * T)
    assert cc.alpha == a
    cc.on_timer(3.5 * T)
    assert cc.alpha == pytest.approx(a * (1 - 1 / 256) ** 3)


def test_recovery_phases():
    cc = fresh(byte_counter=1e12)  # timer events only: T_count grows, BC stays 0
    cc.on_cnp(0.0)
    rt = cc.rt
    # fast recovery: F = 5 timer events halve the distance to R_T, R_T fixed
    for i in range(1, 6):
        before = cc.rc
        cc.on_timer(i * T + 1e-9)
        assert cc.rt == rt
        assert cc.rc == pytest.approx((rt + before) / 2)
    cc.on_cnp(6 * T)  # restart from a known point, R_T below line rate
    rt, rc = cc.rt, cc.rc
    for i in range(1, 6):
        cc.on_timer(6 * T + i * T + 1e-9)
    rc = cc.rc
    cc.on_timer(6 * T + 6 * T + 1e-9)  # 6th event: additive increase (BC = 0 <= F)
    assert cc.rt == pytest.approx(rt + LINE / 1000)
    assert cc.rc == pytest.approx((cc.rt + rc) / 2)


def test_hyper_increase_when_both_counters_pass_f():
    cc = fresh(byte_counter=1000.0, increase_timer=1.0)
    cc.on_cnp(0.0)
    cc.rc = cc.rt = 0.1 * LINE  # far from the cap
    cc.on_sent(6000, 0.0)  # 6 byte-counter events; timer count still 0: fast recovery then additive
    assert cc.bc_count == 6 and cc.t_count == 0
    assert cc.rt == pytest.approx(0.1 * LINE + LINE / 1000)
    cc.t_count = 6  # as if the timer had fired 6 times too
    rt = cc.rt
    cc.on_sent(1000, 0.0)  # BC = 7, T = 6: min - F = 1
    assert cc.rt == pytest.approx(rt + 1 * 10 * LINE / 1000)


@pytest.mark.parametrize("ratio", [0.0, 1.0])
def test_mltcp_scales_additive_and_hyper_increase(ratio):
    params = MltcpParams(slope=1.0, intercept=0.5)
    tracker = Mltcp(params, SimpleNamespace(ratio=ratio))  # any bytes_ratio source (the transport's: progress)
    f = mltcp_factor(ratio, params)
    cc = fresh(tracker, byte_counter=1000.0, increase_timer=1.0)
    cc.on_cnp(0.0)
    cc.rc = cc.rt = 0.1 * LINE
    cc.on_sent(6000, 0.0)
    assert cc.rt == pytest.approx(0.1 * LINE + f * LINE / 1000)  # F * R_AI
    cc.t_count = 6
    rt = cc.rt
    cc.on_sent(1000, 0.0)
    assert cc.rt == pytest.approx(rt + f * 10 * LINE / 1000)  # F * R_HAI


def test_rates_capped_and_floored():
    cc = fresh()
    for i in range(1, 2000):
        cc.on_timer(i * T + 1e-9)
    assert cc.rc <= LINE and cc.rt <= LINE
    for i in range(5000):
        cc.on_cnp(1.0 + i * cc.params.n)
    assert cc.rc == pytest.approx(LINE / 1000)
    cc.on_timeout(2.0)
    assert cc.rc == LINE / 1000


def test_timer_catch_up_is_bounded():
    cc = fresh(byte_counter=1e12)
    cc.on_cnp(0.0)
    cc.on_timer(10.0)  # a 10 s stall would be 180k events
    assert cc.t_count == cc.params.max_catch_up


def ratio_source(ratio: float) -> SimpleNamespace:
    return SimpleNamespace(ratio=ratio)  # any bytes_ratio source (the transport's: IterationProgress)


def test_at_most_one_cut_per_n():
    p = DcqcnParams(line_rate=LINE)
    assert p.n == pytest.approx(50e-6 * 40)  # the paper's CNP interval, scaled like K and T
    assert DcqcnParams(line_rate=40e9).n == pytest.approx(50e-6)
    cc = fresh()
    cc.on_cnp(0.0)
    rc, rt, alpha = cc.rc, cc.rt, cc.alpha
    cc.on_cnp(0.5 * p.n)  # CE marks still draining from the queue: no second cut
    cc.on_loss(0.9 * p.n)
    assert (cc.rc, cc.rt, cc.alpha) == (rc, rt, alpha)
    assert cc.cnps == 2 and cc.ignored_cuts == 2
    cc.on_cnp(p.n)
    assert cc.rc == pytest.approx(rc * (1 - alpha / 2)) and cc.ignored_cuts == 2
    cc.on_timeout(p.n + 1e-6)  # an RTO is never ignored
    assert cc.rc == LINE / 1000


@pytest.mark.parametrize("ratio", [0.0, 0.5, 1.0])
def test_mltcp_scales_the_cut(ratio):
    params = MltcpParams(slope=2.0, intercept=0.5)
    f = mltcp_factor(ratio, params)
    cc = fresh(Mltcp(params, ratio_source(ratio)))
    cc.on_cnp(0.0)  # alpha = 1
    assert cc.rt == LINE
    assert cc.rc == pytest.approx(LINE * 0.5 ** (1 / f))  # F = 0.5: to a quarter; F = 2.5: to 76 %


@pytest.mark.parametrize("ratio", [0.0, 1.0])
def test_fast_recovery_stays_dcqcns_halving_under_mltcp(ratio):
    """F acts on the cut and the increases, not on fast recovery: scaling it too made a flow near the end of
    its iteration return to its pre-cut rate within one period, which overflowed the lab's queue."""
    cc = fresh(Mltcp(MltcpParams(slope=2.0, intercept=0.5), ratio_source(ratio)), byte_counter=1e12)
    cc.on_cnp(0.0)
    rt, rc = cc.rt, cc.rc
    cc.on_timer(T + 1e-9)
    assert cc.rt == rt
    assert cc.rc == pytest.approx((rt + rc) / 2)


def test_f_of_one_is_plain_dcqcn():
    one = Mltcp(MltcpParams(slope=0.0, intercept=1.0), ratio_source(0.7))
    plain, unit = fresh(byte_counter=20_000.0), fresh(one, byte_counter=20_000.0)
    t = 0.0
    for step in range(400):
        t += T / 3
        for cc in (plain, unit):
            if step % 7 == 0:
                cc.on_cnp(t)
            cc.on_sent(3000, t)
            cc.on_timer(t)
        assert unit.rc == pytest.approx(plain.rc) and unit.rt == pytest.approx(plain.rt)
        assert unit.alpha == pytest.approx(plain.alpha)


def contend(lead_ratio: float, late_ratio: float, params: MltcpParams | None) -> tuple[float, float]:
    """Two flows through one marking queue for 40 increase periods: both get a CNP whenever the sum of
    their rates is above the link (a synchronised cut, the worst case for interleaving). Returns their
    mean rates (bits/s)."""
    link = 0.2 * LINE
    flows = [
        fresh(None if params is None else Mltcp(params, ratio_source(r)), byte_counter=1e12)
        for r in (lead_ratio, late_ratio)
    ]
    for cc in flows:
        cc.rc = cc.rt = link / 2
    sums = [0.0, 0.0]
    steps = 400
    for i in range(1, steps + 1):
        t = i * T / 10
        congested = sum(cc.rc for cc in flows) > link
        for k, cc in enumerate(flows):
            if congested:
                cc.on_cnp(t)
            cc.on_timer(t)
            sums[k] += cc.rc / steps
    return sums[0], sums[1]


def test_the_flow_further_into_its_iteration_wins_the_contention():
    """Plain DCQCN shares the link evenly; with MLTCP the flow that has sent 80 % of its iteration takes
    the larger share from one that has sent 10 %, within one communication phase (~40 increase periods
    here), even when every CNP cuts both."""
    a, b = contend(0.8, 0.1, None)
    assert a == pytest.approx(b, rel=1e-9)
    lead, late = contend(0.8, 0.1, MltcpParams())
    assert lead > 1.1 * late
    assert lead + late == pytest.approx(a + b, rel=0.1)  # the link stays about as used as without MLTCP


@pytest.mark.parametrize("byte_counter", [3_000.0, 20_000.0, 10e6, 3 * (HEADER_LEN + 1400.0), 1428.0 * 7 + 333])
def test_a_batch_counted_between_events_is_the_same_as_chunk_by_chunk(byte_counter):
    """count_sent (the sender's batched count) leaves progress and the controller, F included, where
    counting each chunk would: several events per batch, one, none."""

    def fresh_pair() -> tuple[IterationProgress, Dcqcn]:
        progress = IterationProgress()
        progress.start_iteration(200_000)
        cc = Dcqcn(1400, Mltcp(MltcpParams(slope=2.0, intercept=0.5), progress),
                   DcqcnParams(line_rate=10e9, byte_counter=byte_counter), now=0.0)  # fmt: skip
        cc.rc = cc.rt = 1e9
        return progress, cc

    batches = [[1400] * 45, [1400] * 7 + [333], [1400], [], [1400] * 45]  # []: a batch of retransmissions only
    a_progress, a = fresh_pair()
    b_progress, b = fresh_pair()
    for k, sizes in enumerate(batches):
        now = 0.001 * k
        for size in sizes:
            a_progress.on_sent(size, now)
            a.on_sent(HEADER_LEN + size, now)
        count_sent(b_progress, b, sizes, now)
        assert (b_progress.bytes_this_iteration, b.bytes_since_event, b.bc_count) == (
            a_progress.bytes_this_iteration, a.bytes_since_event, a.bc_count)  # fmt: skip
        assert (b.rc, b.rt) == pytest.approx((a.rc, a.rt), rel=1e-12)
    assert a.bc_count >= (1 if byte_counter < 1e6 else 0)
