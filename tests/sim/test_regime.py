"""The congestion regime of the simulated fabric (issue 45, mlfc.sim.regime): scaling keeps a push's length
in round trips, the shallow default is the ecn.py step the switches compile, and a tiny run counts its
congestion signals per flow per phase."""

from __future__ import annotations

import math

import pytest

from mlfc.policy import ecn
from mlfc.policy.mltcp import default_params
from mlfc.sim import bridge
from mlfc.sim.regime import (
    SHALLOW_K_BDP,
    RegimeError,
    RegimeFabric,
    compatible_jobs,
    deep,
    parse_regime,
    reactions_per_phase,
    shallow,
    signals_per_phase,
)
from mlfc.sim.simulation import SimConfig, run


@pytest.mark.parametrize("scale", [0.02, 0.05, 0.1, 0.5, 1.0])
def test_scaling_keeps_round_trips_per_push(scale: float) -> None:
    full = RegimeFabric(scale=1.0)
    fab = RegimeFabric(scale=scale)
    job_full = compatible_jobs(full, full.topology(), 16)[0]
    job = compatible_jobs(fab, fab.topology(), 16)[0]
    assert fab.push_rtts(job) == pytest.approx(full.push_rtts(job_full), rel=1e-5)
    assert fab.host_rate_bps == pytest.approx(scale * full.host_rate_bps)
    # the base round trip is the same, serialisation included: the delays take up what the slower links add
    topo = fab.topology()
    assert fab.link_delay_s() <= full.link_delay_s()
    assert set(topo.delays) == {fab.link_delay_s()}
    # compute is not scaled: the push lasts the same seconds, the jobs stay compatible at the same load
    assert job.compute_s == pytest.approx(job_full.compute_s, rel=1e-5)


def test_a_round_trip_shorter_than_serialisation_is_refused() -> None:
    with pytest.raises(RegimeError, match="larger scale"):
        RegimeFabric(scale=0.001)


def test_shallow_default_is_the_ecn_step_profile() -> None:
    fab = RegimeFabric()  # 10 Gb/s, 100 us: the regime DATACENTER_SHALLOW was sized for
    s = shallow(fab)
    assert isinstance(s.ecn, ecn.StepProfile)
    assert s.ecn == ecn.DATACENTER_SHALLOW
    assert s.ecn.k_bytes == round(SHALLOW_K_BDP * fab.bdp_bytes)
    assert s.queue_bytes == 4 * fab.bdp_bytes and s.mark_threshold_bytes == 30_000
    assert parse_regime("shallow", fab) == s
    # the switches compile the same object: marked above floor(K / 1500) packets
    deploy = bridge.deployment(["leaf1"], s.ecn, s.switch_settings(fab)["drop"], packet_bytes=fab.tcp.mtu)
    assert deploy.defaults.ecn is s.ecn
    assert ecn.compile_marking(s.ecn)[0].lo == 30_000 // 1500 + 1
    # at another scale K stays the same share of the bandwidth-delay product
    small = shallow(RegimeFabric(scale=0.03))
    assert small.ecn == ecn.StepProfile(k_bytes=round(SHALLOW_K_BDP * RegimeFabric(scale=0.03).bdp_bytes))


def test_deep_is_the_earlier_fabric_in_bandwidth_delay_products() -> None:
    fab = RegimeFabric(scale=0.1)  # BDP 125 KB, the earlier fabric's 127.5 KB
    d = deep(fab)
    assert d.queue_bytes == round(9_000_000 * 125_000 / 127_500)
    assert isinstance(d.ecn, ecn.RedProfile) and (d.ecn.kmin, d.ecn.kmax) == (261, 1046)
    assert d.mark_threshold_bytes > 3 * fab.bdp_bytes
    assert parse_regime("step:0.5:8", RegimeFabric()).ecn == ecn.StepProfile(k_bytes=62_500)
    with pytest.raises(RegimeError):
        parse_regime("shallowest", RegimeFabric())


@pytest.mark.ns3
def test_signals_are_counted_per_flow_per_phase(sim_env) -> None:
    fab = RegimeFabric(scale=0.02)
    topo = fab.topology()
    jobs = compatible_jobs(fab, topo, 2, full_push_bytes=10_000_000, jitter=0.0)
    regime = shallow(fab)
    its = 4
    res = run(SimConfig("regime-2", topo, jobs, its, mltcp=True, mltcp_params=default_params("reno"), tcp=fab.tcp,
                        **regime.switch_settings(fab)), progress=None)  # fmt: skip
    assert len(res.records) == its * 4  # 2 jobs x 2 workers
    assert res.flows == {1: 4, 2: 4}  # push and pull per worker
    marks = sum(c["ecn_marks"] + c["tail_drops"] + c["selective_drops"] for c in res.jobs.values())
    assert marks > 0  # both workers push at once into the PS link: the step marks
    assert signals_per_phase(res) == pytest.approx(marks / (2 * len(res.records)))
    # a reaction is at most one a window, so never more than the marks and drops that caused it
    assert 0 < sum(res.reactions.values()) <= marks
    assert reactions_per_phase(res) == pytest.approx(sum(res.reactions.values()) / (2 * len(res.records)))
    assert not math.isnan(reactions_per_phase(res))
