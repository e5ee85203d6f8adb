"""The MAIF search's figures on hand-made records (pure Python: no ns-3 needed): time to accuracy,
the lead configuration, a job's class over the decisions, the horizon on the scaled clock."""

from __future__ import annotations

import math

import pytest

from mlfc.policy.maif import MaifParams
from mlfc.sim.experiments import MAIF_FABRIC, class_over_time, line_rate_time, maif_params, search_jobs, search_times
from mlfc.sim.jobs import SimJob
from mlfc.sim.lab import IterationRecord, synthetic_accuracy
from mlfc.sim.topology import leaf_spine


def rec(job: int, worker: int, it: int, end: float) -> IterationRecord:
    return IterationRecord("t", job, f"w{worker}", it, end - 1.0, end - 0.5, end, end, 1000)


def test_search_times_on_two_configurations() -> None:
    fast = SimJob(1, "fast", 1000, 1000, 0.0, ("a", "b"), "c", acc_max=0.9, tau=1.0)
    slow = SimJob(2, "slow", 1000, 1000, 0.0, ("d", "e"), "f", acc_max=0.6, tau=1.0)
    its = 4
    # job 1's iteration i ends at 10 (i+1) (worker 1 last), job 2's at 3 (i+1): job 2 runs faster
    records = [rec(1, w, i, 10.0 * (i + 1) - (1 - w)) for i in range(its) for w in (0, 1)]
    records += [rec(2, 0, i, 3.0 * (i + 1)) for i in range(its)]
    st = search_times(records, [fast, slow], its)
    a_star = synthetic_accuracy(its - 1, 0.9, 1.0)  # job 1's final accuracy is A*
    first = next(i for i in range(its) if synthetic_accuracy(i, 0.9, 1.0) >= 0.9 * a_star)
    assert st.lead == 1 and st.lead_iterations == first + 1
    assert st.search[0] == 10.0 * (first + 1)  # the slowest worker's end counts
    # each job to 90 % of its own final accuracy: same iteration for both (same tau), means of their times
    assert st.jobs[0] == pytest.approx((10.0 * (first + 1) + 3.0 * (first + 1)) / 2)
    with pytest.raises(ValueError, match="miss"):
        search_times(records[:-1], [fast, slow], its)


def test_class_over_time_weights_by_duration() -> None:
    decisions = [(1.0, {1: 6, 2: 5}), (3.0, {1: 2, 2: 6}), (4.0, {2: 6})]
    cls, top = class_over_time(decisions, 1, 5.0, 6)
    assert cls == pytest.approx((2 * 6 + 1 * 2 + 1 * 0) / 4)  # absent from the last decision: class 0
    assert top == pytest.approx(2 / 4)
    assert all(math.isnan(v) for v in class_over_time(decisions, 1, 0.5, 6))


def test_maif_horizon_follows_the_time_scale_and_configs_fill_every_host() -> None:
    p = maif_params(0.02)
    assert p.horizon_s == pytest.approx(MaifParams().horizon_s * 0.02)
    assert p.top_class == MaifParams().top_class
    topo = leaf_spine(**MAIF_FABRIC)
    jobs = search_jobs(topo, 16, 1, 0.02)
    assert [j.job_id for j in jobs] == list(range(1, 17))
    workers = [w for j in jobs for w in j.workers]
    assert sorted(workers) == sorted(list(topo.hosts) * 2)  # two workers on every host
    assert sorted(j.ps for j in jobs) == sorted(topo.hosts)  # one PS on every host
    assert search_jobs(topo, 16, 1, 0.02) == jobs and search_jobs(topo, 16, 2, 0.02) != jobs


def test_line_rate_bound_takes_the_configuration_that_gets_there_first() -> None:
    topo = leaf_spine(**MAIF_FABRIC)
    # 1 MB each way per worker over the PS's 100 Gb/s link: 2 x 2 x 8e6 / 1e11 = 0.32 ms a step on the wire
    quick = SimJob(1, "quick", 1_000_000, 1_000_000, 0.001, ("l1h1", "l2h1"), "l3h2", acc_max=0.8, tau=1.0)
    best = SimJob(2, "best", 1_000_000, 1_000_000, 0.001, ("l1h2", "l2h2"), "l3h3", acc_max=0.9, tau=10.0)
    its = 30
    a_star = synthetic_accuracy(its - 1, 0.9, 10.0)
    for q in (0.85, 0.95):
        first = min(
            next(i for i in range(its) if synthetic_accuracy(i, j.acc_max, j.tau) >= q * a_star)
            for j in (quick, best)
            if synthetic_accuracy(its - 1, j.acc_max, j.tau) >= q * a_star
        )
        assert line_rate_time(topo, (quick, best), its, q) == pytest.approx((first + 1) * (0.001 + 0.00032))
    # 0.85 A* = 0.725: quick (final 0.8) gets there at iteration 2; 0.95 A* is beyond it: only best counts
    assert line_rate_time(topo, (quick, best), its, 0.85) == pytest.approx(3 * 0.00132)
