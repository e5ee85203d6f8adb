"""MAIF (mlfc/policy/maif.py) as plain functions: curve fits, gain prediction, ranking with hysteresis, stragglers."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlfc.policy import maif
from mlfc.policy.priority import PolicyError

P = maif.MaifParams()


def power(t: np.ndarray, a: float = 0.9, b: float = 0.8, c: float = 0.5) -> np.ndarray:
    return a - b * (t + 1.0) ** -c


def expo(t: np.ndarray, a: float = 0.8, b: float = 0.7, k: float = 0.05) -> np.ndarray:
    return a - b * np.exp(-k * t)


def test_fit_recovers_power_law_with_noise() -> None:
    t = np.arange(0, 300, dtype=float)
    y = power(t) + np.random.default_rng(1).normal(0, 0.004, len(t))
    fit = maif.fit_arrays(t, y)
    assert fit.model in ("power", "exp")
    assert fit.r2 > 0.98
    # The prediction 100 iterations ahead is close to the truth, which is what ranking relies on.
    assert fit.predict(400) == pytest.approx(power(np.array(400.0)), abs=0.01)


def test_fit_recovers_exponential_and_picks_it() -> None:
    t = np.arange(0, 120, dtype=float)
    fit = maif.fit_arrays(t, expo(t))
    assert fit.model == "exp"
    assert fit.a == pytest.approx(0.8, abs=0.005)
    assert fit.c == pytest.approx(0.05, rel=0.1)


@pytest.mark.parametrize(
    ("points", "model"),
    [
        ([], "prior"),
        ([(5, 0.3)], "prior"),
        ([(1, 0.1), (2, 0.2), (3, 0.3)], "prior"),  # fewer than min_points distinct iterations
        ([(4, 0.1), (4, 0.5), (4, 0.2), (4, 0.9), (4, 0.3)], "prior"),  # one iteration, many values
        ([(i, 0.42) for i in range(10)], "flat"),
        ([(1, math.nan), (2, math.inf), (3, 0.1)], "prior"),  # non-finite points are ignored
    ],
)
def test_fit_degenerate_data_falls_back(points: list[tuple[float, float]], model: str) -> None:
    fit = maif.fit_curve(points)
    assert fit.model == model
    assert maif.predicted_gain(fit, 100) == 0.0


def test_fit_handles_unsorted_repeated_and_huge_iterations() -> None:
    t = np.arange(1_000_000, 1_000_200, dtype=float)
    y = expo(t - t[0])
    rng = np.random.default_rng(0)
    idx = rng.permutation(len(t))
    fit = maif.fit_curve(list(zip(np.concatenate([t[idx], t[:5]]), np.concatenate([y[idx], y[:5]]), strict=True)))
    assert fit.model in ("power", "exp")
    assert fit.last_iteration == 1_000_199
    assert math.isfinite(maif.predicted_gain(fit, 10))


def test_decreasing_curve_predicts_no_gain() -> None:
    t = np.arange(50, dtype=float)
    fit = maif.fit_arrays(t, 0.9 - 0.005 * t)
    assert maif.predicted_gain(fit, 20) == 0.0


def test_gain_is_capped_at_upper_bound() -> None:
    t = np.arange(40, dtype=float)
    fit = maif.fit_arrays(t, power(t, a=1.3, b=1.2, c=0.3))  # an asymptote above 100 % accuracy
    assert fit.predict(fit.last_iteration) < 0.95 and fit.predict(10_000) > 1.1
    capped = maif.predicted_gain(fit, 10_000, upper=1.0)
    assert capped == pytest.approx(1.0 - fit.predict(fit.last_iteration))
    assert maif.predicted_gain(fit, 10_000, upper=None) > capped + 0.1


def test_loss_quality_is_fraction_of_first_loss_removed() -> None:
    q = maif.to_quality(maif.LOSS, [2.0, 1.0, 0.5])
    assert q.tolist() == [0.0, 0.5, 0.75]
    assert maif.to_quality(maif.LOSS, [-1.0, -2.0]).tolist() == [1.0, 2.0]  # non-positive reference
    with pytest.raises(PolicyError):
        maif.to_quality("perplexity", [1.0])


def _scores(curves: dict[int, tuple[np.ndarray, np.ndarray]], iter_s: float = 0.2, net_s: float = 0.05):
    return {j: maif.score_job(maif.fit_arrays(t, y), iter_s, net_s, P) for j, (t, y) in curves.items()}


def test_plateauing_job_yields_to_improving_job() -> None:
    t = np.arange(0, 200, dtype=float)
    plateau = expo(t, a=0.85, b=0.75, k=0.08)  # already at 0.85 and flat: it was ahead so far
    improving = power(t, a=0.95, b=0.9, c=0.35)  # lower accuracy now, still climbing
    assert plateau[-1] > improving[-1]
    scores = _scores({1: (t, plateau), 2: (t, improving)})
    assert scores[2].gain > 100 * scores[1].gain
    # Job 1 held the top class before; the improving job still takes it.
    prev = {1: maif.Previous(rank=1, priority=6), 2: maif.Previous(rank=2, priority=5)}
    out = maif.rank_jobs(scores, prev, P)
    assert out[2].rank == 1 and out[2].priority == P.top_class
    assert out[1].priority < out[2].priority
    assert out[1].plateau and out[1].priority == P.bottom_class


def test_faster_network_use_wins_on_equal_curves() -> None:
    t = np.arange(0, 100, dtype=float)
    fit = maif.fit_arrays(t, power(t))
    cheap = maif.score_job(fit, 0.2, 0.02, P)
    costly = maif.score_job(fit, 0.2, 0.15, P)
    assert cheap.gain == pytest.approx(costly.gain)
    out = maif.rank_jobs({1: costly, 2: cheap}, {}, P)
    assert out[2].rank == 1


def _score(v: float) -> maif.Score:
    return maif.Score(gain=1.0, next_iters=10, network_s=1.0, score=v, exploring=False)


def test_hysteresis_keeps_incumbent_within_margin() -> None:
    prev = {1: maif.Previous(1, 6), 2: maif.Previous(2, 5)}
    held = maif.rank_jobs({1: _score(1.0), 2: _score(1.2)}, prev, P)  # 20 % better < 25 % margin
    assert (held[1].priority, held[2].priority) == (6, 5)
    assert any("held below job 1" in r for r in held[2].reasons)
    swapped = maif.rank_jobs({1: _score(1.0), 2: _score(1.3)}, prev, P)
    assert (swapped[1].priority, swapped[2].priority) == (5, 6)


def test_hysteresis_stops_flapping_on_noisy_scores() -> None:
    rng = np.random.default_rng(7)
    flips = {}
    for h in (0.0, P.hysteresis):
        params = maif.MaifParams(hysteresis=h)
        prev: dict[int, maif.Previous] = {}
        flips[h] = 0
        for _ in range(200):  # two jobs with the same true score and 5 % noise on each evaluation
            scores = {j: _score(1.0 + rng.normal(0, 0.05)) for j in (1, 2)}
            out = maif.rank_jobs(scores, prev, params)
            flips[h] += bool(prev) and prev[1].priority != out[1].priority
            prev = {j: maif.Previous(a.rank, a.priority, a.plateau) for j, a in out.items()}
    assert flips[0.0] > 60  # without hysteresis the classes follow the noise
    assert flips[P.hysteresis] <= 2


def test_exploration_prior_for_jobs_without_history() -> None:
    scores = {j: _score(v) for j, v in zip((1, 2, 3, 4), (4.0, 3.0, 2.0, 1.0), strict=True)}
    scores[9] = maif.score_job(maif.fit_curve([]), 0.2, 0.05, P)
    assert scores[9].exploring and math.isnan(scores[9].score)
    out = maif.rank_jobs(scores, {}, P)
    assert out[9].score == pytest.approx(np.quantile([4.0, 3.0, 2.0, 1.0], 0.75))
    assert out[9].rank == 2  # ahead of the median job, behind the best
    only_new = maif.rank_jobs({5: scores[9], 6: scores[9]}, {}, P)
    assert {a.priority for a in only_new.values()} == {6, 5}  # ties broken by job id


def test_more_jobs_than_classes_share_tiers() -> None:
    scores = {j: _score(100.0 - j) for j in range(1, 13)}
    out = maif.rank_jobs(scores, {}, P)
    classes = [out[j].priority for j in sorted(out, key=lambda j: out[j].rank)]
    assert classes == sorted(classes, reverse=True)
    assert classes[0] == P.top_class and classes[-1] == P.bottom_class
    assert set(classes) == set(range(P.bottom_class, P.top_class + 1))
    assert classes.count(P.top_class) == 1  # the top class holds one job: strict priority makes it fast


@pytest.mark.parametrize("active", [6, 7, 12, 40])
def test_top_class_alone_beyond_the_classes(active: int) -> None:
    classes = [maif.rank_class(i, active, P) for i in range(active)]
    assert classes[0] == P.top_class and P.top_class not in classes[1:]
    assert classes[1] == P.top_class - 1 and classes[-1] == P.bottom_class
    assert classes == sorted(classes, reverse=True)
    tiers = [classes.count(c) for c in range(P.bottom_class, P.top_class)]
    assert max(tiers) - min(tiers) <= 1  # the others share equal tiers


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.integers(1, 65535), st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=40), st.floats(0, 2)
)
def test_classes_always_valid_and_monotone(raw: dict[int, float], h: float) -> None:
    params = maif.MaifParams(hysteresis=h)
    scores = {j: maif.Score(v, 1, 1, v, False) for j, v in raw.items()}
    out = maif.rank_jobs(scores, {}, params)
    assert sorted(a.rank for a in out.values()) == list(range(1, len(raw) + 1))
    by_rank = sorted(out.values(), key=lambda a: a.rank)
    assert all(params.bottom_class <= a.priority <= params.top_class for a in by_rank)
    assert all(x.priority >= y.priority for x, y in itertools.pairwise(by_rank))


def test_straggler_window_boosts_lagging_iterations() -> None:
    w = maif.straggler_window({0: 20, 1: 20, 2: 17}, job_priority=4)
    assert w == maif.Window(18, 20, 5)
    assert maif.straggler_window({0: 20, 1: 19}, 4) is None  # lag 1 < straggler_lag
    assert maif.straggler_window({0: 20}, 4) is None
    assert maif.straggler_window({0: 20, 1: 10}, P.top_class) is None  # nothing above the top class
    # Sticky: while the straggler is inside its window the window does not move.
    assert maif.straggler_window({0: 22, 1: 18}, 4, previous=w) == maif.Window(18, 20, 5)
    # Caught up (or past the window): no window, or a new one.
    assert maif.straggler_window({0: 21, 1: 21}, 4, previous=w) is None
    assert maif.straggler_window({0: 30, 1: 25}, 4, previous=w) == maif.Window(26, 30, 5)


@pytest.mark.parametrize(
    "kw",
    [
        {"top_class": 7},
        {"bottom_class": -1},
        {"bottom_class": 6, "top_class": 3},
        {"horizon_s": 0},
        {"hysteresis": -0.1},
        {"min_points": 2},
        {"straggler_lag": 0},
        {"exploration_quantile": 2},
    ],
)
def test_params_are_validated(kw: dict[str, float]) -> None:
    with pytest.raises(PolicyError):
        maif.MaifParams(**kw)


# ---- objective "best": a hyper-parameter search, where only the best job's accuracy counts ---------

SEARCH = maif.MaifParams(objective="best")
T40 = np.arange(0, 41, dtype=float)
LEADER = 0.9 - 0.5 * (T40 + 1) ** -0.5  # the best configuration so far (0.82), gaining slowly
LAGGARD = 0.95 - 0.9 * (T40 + 1) ** -0.3  # far below (0.65), gaining faster: MAIF's sum objective serves it
CHALLENGER = 0.86 - 0.8 * np.exp(-0.05 * T40)  # below (0.75) but predicted to pass the leader within the horizon


def _search(curves: dict[int, np.ndarray], params: maif.MaifParams) -> dict[int, maif.Score]:
    fits = {j: maif.fit_arrays(T40, y) for j, y in curves.items()}
    scores = {j: maif.score_job(f, 0.15, 0.05, params) for j, f in fits.items()}
    return maif.search_scores(fits, scores, params) if params.objective == "best" else scores


def test_search_objective_serves_the_best_job_where_the_sum_serves_the_laggard() -> None:
    summed = maif.rank_jobs(_search({1: LEADER, 2: LAGGARD}, P), {}, P)
    assert summed[2].rank == 1  # its own gain is larger
    best = maif.rank_jobs(_search({1: LEADER, 2: LAGGARD}, SEARCH), {}, SEARCH)
    assert best[1].rank == 1 and best[1].priority == SEARCH.top_class


def test_search_objective_counts_a_challenger_by_what_it_adds_above_the_best() -> None:
    fits = {j: maif.fit_arrays(T40, y) for j, y in {1: LEADER, 3: CHALLENGER}.items()}
    own = {j: maif.score_job(f, 0.15, 0.05, SEARCH) for j, f in fits.items()}
    s = maif.search_scores(fits, own, SEARCH)
    best_now = maif.current_quality(fits[1])
    above = maif.current_quality(fits[3]) + own[3].gain - best_now
    assert 0 < above < own[3].gain  # it overtakes, but only the part above the leader counts
    assert s[3].gain == pytest.approx(above + SEARCH.own_gain_weight * own[3].gain)
    assert s[1].gain == pytest.approx((1 + SEARCH.own_gain_weight) * own[1].gain)  # the leader: all of its own
    assert maif.rank_jobs(s, {}, SEARCH)[3].rank == 1


def test_search_objective_keeps_exploring_jobs_exploring() -> None:
    fits = {0: maif.Fit("prior"), 1: maif.fit_arrays(T40, LEADER), 2: maif.fit_arrays(T40, LAGGARD)}
    own = {j: maif.score_job(f, 0.15, 0.05, SEARCH) for j, f in fits.items()}
    s = maif.search_scores(fits, own, SEARCH)
    assert s[0].exploring and math.isnan(s[0].score)
    out = maif.rank_jobs(s, {}, SEARCH)
    # the prior is a quantile of the others' search scores: between the leader and the laggard
    assert [j for j, _ in sorted(out.items(), key=lambda ja: ja[1].rank)] == [1, 0, 2]


@pytest.mark.parametrize("kw", [{"objective": "mean"}, {"own_gain_weight": 1.5}, {"own_gain_weight": math.nan}])
def test_search_params_are_validated(kw: dict[str, object]) -> None:
    with pytest.raises(PolicyError):
        maif.MaifParams(**kw)  # type: ignore[arg-type]
