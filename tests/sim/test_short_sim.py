"""Short ns-3 runs with exact expectations: one flow alone fills its link, two unmodified flows share
a bottleneck fairly, MLTCP's F inside a running simulation is the policy's F, MAIF ranks and the switches follow."""

from __future__ import annotations

import pytest

from mlfc.policy.maif import MaifParams
from mlfc.policy.mltcp import MltcpParams, bytes_ratio, mltcp_factor
from mlfc.sim.jobs import SimJob
from mlfc.sim.lab import dumbbell
from mlfc.sim.network import TcpSettings
from mlfc.sim.simulation import SimConfig, run
from mlfc.sim.topology import GBPS, from_lab

pytestmark = pytest.mark.ns3

TCP = TcpSettings()  # 1500 MTU, 1448-byte segments
PPP = 2  # point-to-point framing per packet


def goodput_limit(rate: float) -> float:
    """Payload bits/s of a saturated link: segments of mss payload in mss + 52 + 2 bytes on the wire."""
    return rate * TCP.mss / (TCP.packet_bytes + PPP)


def push_rate(r) -> float:
    return 8 * r.bytes / (r.push_end - r.comm_start)


def test_one_flow_alone_reaches_line_rate(sim_env) -> None:
    topo = from_lab(dumbbell(1), 100 * GBPS, None, 1e-6)
    job = SimJob(1, "bulk", 20_000_000, TCP.mss, 0.0, ("j1w0",), "j1ps")
    res = run(SimConfig("alone", topo, (job,), 2, tcp=TCP, queue_limit=1000), progress=None)
    assert len(res.records) == 2
    for r in res.records:
        assert 0.97 * goodput_limit(100 * GBPS) <= push_rate(r) <= goodput_limit(100 * GBPS) * 1.0001
    assert all(c["tail_drops"] == 0 and c["selective_drops"] == 0 for c in res.jobs.values())
    assert res.stats.events > 0 and res.stats.sim_per_wall > 0


def test_two_unmodified_flows_share_a_bottleneck_fairly(sim_env) -> None:
    rate = 10 * GBPS
    topo = from_lab(dumbbell(2), 100 * GBPS, rate, 1e-6)
    jobs = tuple(SimJob(j, f"j{j}", 20_000_000, TCP.mss, 0.0, (f"j{j}w0",), f"j{j}ps") for j in (1, 2))
    res = run(SimConfig("fair", topo, jobs, 1, tcp=TCP, queue_limit=1000), progress=None)
    rates = [push_rate(r) for r in sorted(res.records, key=lambda r: r.job)]
    jain = sum(rates) ** 2 / (len(rates) * sum(x * x for x in rates))
    assert jain >= 0.98, rates
    both = 8 * sum(r.bytes for r in res.records) / (max(r.push_end for r in res.records) - 0.001)
    assert 0.9 * goodput_limit(rate) <= both <= goodput_limit(rate) * 1.0001


def test_mltcp_factor_in_a_running_simulation_is_the_policy_factor(sim_env) -> None:
    params = MltcpParams()
    topo = from_lab(dumbbell(2), 100 * GBPS, 10 * GBPS, 1e-6)
    jobs = tuple(SimJob(j, f"j{j}", 4_000_000, 4_000_000, 0.001, (f"j{j}w0",), f"j{j}ps") for j in (1, 2))
    res = run(
        SimConfig("f", topo, jobs, 3, mltcp=True, mltcp_params=params, tcp=TCP, queue_limit=200, record_f=True),
        progress=None,
    )
    assert len(res.f_samples) > 100
    for sent, per, f in res.f_samples:
        assert per in (4_000_000,)
        assert f == pytest.approx(mltcp_factor(bytes_ratio(sent, per), params), rel=1e-12)
    ratios = [bytes_ratio(s, p) for s, p, _ in res.f_samples]
    assert min(ratios) < 0.1 and max(ratios) > 0.9  # the samples span the iteration
    assert res.restarts >= 4 * 2  # every connection restarted its window after each idle compute phase


def test_maif_ranks_by_the_curves_and_the_switches_serve_the_top_job_first(sim_env) -> None:
    """Two jobs share a 10 Gb/s bottleneck. Job 1's curve is flat from the start (tau 0.05: at acc_max after one
    iteration), job 2 keeps improving (tau 40). The engine explores both first (equal priors: job order), and once
    both have min_points iterations it puts job 1 on the plateau (bottom class) and job 2 alone in the top class.
    From that decision on the switches serve job 2's pushes at the bottleneck's full rate (sharing it, as both do
    before, gives each about half)."""
    rate = 10 * GBPS
    topo = from_lab(dumbbell(2), 100 * GBPS, rate, 1e-6)
    jobs = (
        SimJob(1, "flat", 2_000_000, 2_000_000, 0.002, ("j1w0",), "j1ps", acc_max=0.9, tau=0.05),
        SimJob(2, "improving", 2_000_000, 2_000_000, 0.002, ("j2w0",), "j2ps", acc_max=0.9, tau=40),
    )
    p = MaifParams(horizon_s=0.05)
    res = run(SimConfig("maif", topo, jobs, 8, priorities="maif", maif=p, tcp=TCP), progress=None)
    assert len(res.records) == 16
    assert res.decisions[0][1] == {1: p.top_class, 2: p.top_class - 1}
    ranked = [t for t, d in res.decisions if d == {1: p.bottom_class, 2: p.top_class}]
    assert ranked, f"no decision put job 1 on the plateau and job 2 first: {res.decisions}"
    assert all(d.get(2, p.top_class) == p.top_class for t, d in res.decisions if t >= ranked[0])
    before = [r for r in res.records if r.job == 2 and r.iteration == 1]
    after = [r for r in res.records if r.job == 2 and r.comm_start > ranked[0]]
    assert after and all(push_rate(r) >= 0.9 * goodput_limit(rate) for r in after), [push_rate(r) for r in after]
    assert all(push_rate(r) < 0.6 * goodput_limit(rate) for r in before)  # both pushed at once, sharing the link
