"""The fit's 95 % band and the search objectives built on it (issue 26's second and third ranking designs):
``potential`` (a job judged by its band's top at the search's next doubling) and ``elimination`` (the jobs
the band cannot rule out as the best share the top class)."""

from __future__ import annotations

import numpy as np
import pytest

from mlfc.policy import maif

RNG = np.random.default_rng(7)


def curve(t: np.ndarray, a: float, b: float, c: float, noise: float = 0.0) -> np.ndarray:
    return a - b * (t + 1.0) ** -c + noise * RNG.standard_normal(len(t))


def test_band_holds_the_truth_and_narrows_with_data() -> None:
    truth = dict(a=0.85, b=0.8, c=0.6)
    at = 120.0
    target = truth["a"] - truth["b"] * (at + 1) ** -truth["c"]
    widths = []
    for n in (8, 30, 100):
        t = np.arange(n, dtype=float)
        fit = maif.fit_arrays(t, curve(t, **truth, noise=0.01))
        lo, hi = fit.bounds(at)
        assert lo <= target <= hi, (n, lo, target, hi)
        assert lo <= fit.predict(at) <= hi
        widths.append(hi - lo)
    assert widths[0] > widths[1] > widths[2]  # more evaluations, a narrower band


def test_band_keeps_no_curve_above_the_ceiling() -> None:
    t = np.arange(12, dtype=float)
    rising = 0.1 + 0.02 * t + 0.01 * RNG.standard_normal(12)  # a slow learner still rising straight
    fit = maif.fit_arrays(t, rising)
    assert all(c.a <= 1.0 for c in fit.band)
    unbounded = maif.fit_arrays(t, rising, ceiling=None)
    assert unbounded.bounds(200.0)[1] > fit.bounds(200.0)[1]


def test_potential_is_judged_at_the_search_s_next_doubling() -> None:
    fits = {1: maif.fit_arrays(np.arange(60.0), curve(np.arange(60.0), 0.8, 0.7, 0.5)),
            2: maif.fit_arrays(np.arange(10.0), curve(np.arange(10.0), 0.8, 0.7, 0.5))}  # fmt: skip
    params = maif.MaifParams(objective="potential")
    assert maif.search_lookahead(fits.values(), params) == pytest.approx(2 * 60 - 1)
    for f in fits.values():
        assert maif.current_quality(f) <= maif.potential(f, 119.0) <= 1.0
    # the young job, starved at iteration 9, could still be anywhere by then: its band is the wider
    assert maif.potential(fits[2], 119.0) > maif.potential(fits[1], 119.0)


def _search(curves: dict[int, tuple[int, np.ndarray]], params: maif.MaifParams):
    fits = {j: maif.fit_arrays(np.arange(float(n)), y) for j, (n, y) in curves.items()}
    own = {j: maif.score_job(f, 1.0, 0.5, params) for j, f in fits.items()}
    return fits, maif.search_scores(fits, own, params)


def test_potential_serves_an_uncertain_challenger_before_a_known_leader() -> None:
    params = maif.MaifParams(objective="potential")
    t60, t12 = np.arange(60.0), np.arange(12.0)
    curves = {
        1: (60, curve(t60, 0.75, 0.7, 0.8, 0.005)),  # the leader, flattening at 0.75, well known
        2: (12, curve(t12, 0.95, 0.8, 0.3, 0.005)),  # below it now, starved early, still rising
        3: (60, curve(t60, 0.55, 0.5, 0.8, 0.005)),
    }  # known, and below the leader for good: no chance
    fits, scores = _search(curves, params)
    assert maif.current_quality(fits[2]) < maif.current_quality(fits[1])
    ranked = maif.rank_jobs(scores, {}, params)
    assert ranked[2].rank == 1 and ranked[3].rank == 3


def test_elimination_shares_the_top_class_among_the_jobs_not_ruled_out() -> None:
    params = maif.MaifParams(objective="elimination")
    t60, t12 = np.arange(60.0), np.arange(12.0)
    curves = {1: (60, curve(t60, 0.75, 0.7, 0.8, 0.005)), 2: (12, curve(t12, 0.95, 0.8, 0.3, 0.005)),
              3: (60, curve(t60, 0.55, 0.5, 0.8, 0.005)), 4: (60, curve(t60, 0.50, 0.5, 0.9, 0.005))}  # fmt: skip
    fits, scores = _search(curves, params)
    fits[5] = maif.Fit("prior")  # no curve yet: cannot be ruled out
    scores[5] = maif.score_job(fits[5], 1.0, 0.5, params)
    shared = maif.contenders(fits, params)
    assert shared == {1, 2, 5}
    ranked = maif.rank_jobs(scores, {}, params)
    maif.share_top(ranked, shared, params)
    assert {j for j, a in ranked.items() if a.priority == params.top_class} == shared
    below = sorted((j for j in ranked if j not in shared), key=lambda j: ranked[j].rank)
    assert [ranked[j].priority for j in below] == [params.top_class - 1, params.top_class - 2]
    assert all(any("contender" in r for r in ranked[j].reasons) for j in shared)


def test_new_objectives_are_accepted_and_validated() -> None:
    for objective in ("potential", "elimination"):
        assert maif.MaifParams(objective=objective).objective == objective
    with pytest.raises(maif.PolicyError):
        maif.MaifParams(lookahead=0.5)
