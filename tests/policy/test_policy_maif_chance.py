"""The ``chance`` search objective (mlfc/policy/chance.py; issue 47 item 2): the top class time-shared in proportion
to each job's probability of being the best configuration at the search's next doubling."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mlfc.coordinator import convert
from mlfc.coordinator.decision import JobView, decide
from mlfc.policy import chance, maif

PARAMS = maif.MaifParams(objective="chance")


def curve(n: int, a: float, b: float, c: float, noise: float = 0.005) -> maif.Fit:
    t = np.arange(float(n))
    rng = np.random.default_rng(n)  # seeded per curve: independent of the tests' order
    return maif.fit_arrays(t, a - b * (t + 1.0) ** -c + noise * rng.standard_normal(n))


def run(fits: dict[int, maif.Fit], rounds: int, params: maif.MaifParams = PARAMS) -> list[int]:
    """The holder of the top class over ``rounds`` decisions, the memory fed back each time."""
    scores = {j: maif.score_job(f, 1.0, 0.5, params) for j, f in fits.items()}
    previous: dict[int, maif.Previous] = {}
    holders = []
    for _ in range(rounds):
        ranked = chance.chance_rank(fits, scores, previous, params)
        top = [j for j, a in ranked.items() if a.priority == params.top_class]
        assert len(top) == 1  # the holder alone in the top class
        holders.append(top[0])
        previous = {j: maif.Previous(a.rank, a.priority, a.plateau, a.credit, a.held_from) for j, a in ranked.items()}
    return holders


def test_chances_sum_to_one_and_favour_the_better_band() -> None:
    fits = {1: curve(60, 0.80, 0.7, 0.6), 2: curve(60, 0.70, 0.6, 0.6), 3: maif.Fit("prior")}
    p = chance.best_chances(fits, PARAMS)
    assert set(p) == {1, 2}  # no curve yet: no chance computed, the exploration prior instead
    assert sum(p.values()) == pytest.approx(1.0)
    assert p[1] > 0.9 > 0.1 > p[2] >= 0.0


def test_equal_normals_split_evenly_and_a_flat_job_keeps_some_uncertainty() -> None:
    flat = maif.Fit("flat", a=0.7, last_iteration=50, last_quality=0.7)
    p = chance.best_chances({1: flat, 2: flat, 3: flat}, PARAMS)
    assert all(v == pytest.approx(1 / 3, abs=1e-3) for v in p.values())
    mu, sigma = chance.lookahead_normal(flat, 101.0, PARAMS)
    assert (mu, sigma) == (0.7, PARAMS.chance_sigma_floor)
    # two normals analytically: P(X1 > X2) = Phi((mu1 - mu2) / sqrt(s1^2 + s2^2))
    near = maif.Fit("flat", a=0.705, last_iteration=50, last_quality=0.705)
    p = chance.best_chances({1: flat, 2: near}, PARAMS)
    expected = 0.5 * math.erfc(-(0.005 / math.sqrt(2 * 0.005**2)) / math.sqrt(2))
    assert p[2] == pytest.approx(expected, abs=1e-3)


def test_rotation_shares_the_top_class_in_proportion() -> None:
    credits: dict[int, float] = {}
    held = {1: 0, 2: 0}
    for _ in range(100):
        holder, credits = chance.rotate({1: 0.7, 2: 0.3}, credits, PARAMS)
        assert holder is not None
        held[holder] += 1
    assert abs(held[1] - 70) <= 10 and abs(held[2] - 30) <= 10
    assert abs(held[1] - 70) <= 1  # smooth weighted round robin: within one turn


def test_overlapping_contenders_share_the_top_class_in_proportion_to_their_chance() -> None:
    fits = {1: maif.Fit("flat", a=0.70, last_iteration=50, last_quality=0.70),
            2: maif.Fit("flat", a=0.697, last_iteration=50, last_quality=0.697)}  # fmt: skip
    p = chance.best_chances(fits, PARAMS)
    assert 0.55 < p[1] < 0.8
    holders = run(fits, 100)
    for j in fits:
        assert abs(holders.count(j) - 100 * p[j]) <= 10


def test_a_dominated_job_is_never_in_the_top_class_and_a_reachable_one_never_starved() -> None:
    fits = {1: curve(80, 0.80, 0.7, 0.7), 2: curve(80, 0.50, 0.4, 0.7), 3: curve(14, 0.80, 0.7, 0.4, 0.01)}
    at = maif.search_lookahead(fits.values(), PARAMS)
    assert fits[3].bounds(at)[1] >= fits[1].predict(at)  # the young job's band still reaches the leader
    p = chance.best_chances(fits, PARAMS)
    assert p[2] < PARAMS.chance_threshold <= p[3] < 0.2  # unlikely, but its band reaches the leader
    holders = run(fits, 200)
    assert 2 not in holders
    share = p[3] / (p[1] + p[3])
    turns = [i for i, h in enumerate(holders) if h == 3]
    gaps = [b - a for a, b in zip([-1, *turns], [*turns, 200], strict=True)]
    assert max(gaps) <= math.ceil(1 / share) + 1
    ranked = chance.chance_rank(fits, {j: maif.score_job(f, 1.0, 0.5, PARAMS) for j, f in fits.items()}, {}, PARAMS)
    assert ranked[2].rank == 3 and any("below the threshold" in r for r in ranked[2].reasons)


def test_deterministic() -> None:
    fits = {1: curve(60, 0.80, 0.7, 0.6), 2: curve(30, 0.78, 0.7, 0.5), 3: curve(45, 0.79, 0.7, 0.55)}
    assert chance.best_chances(fits, PARAMS) == chance.best_chances(dict(reversed(fits.items())), PARAMS)
    assert run(fits, 40) == run(fits, 40)


def test_the_holder_keeps_its_turn_for_the_quantum_of_its_iterations() -> None:
    fits = {1: maif.Fit("flat", a=0.7, last_iteration=50, last_quality=0.7),
            2: maif.Fit("flat", a=0.7, last_iteration=50, last_quality=0.7)}  # fmt: skip
    scores = {j: maif.score_job(f, 1.0, 0.5, PARAMS) for j, f in fits.items()}
    first = chance.chance_rank(fits, scores, {}, PARAMS, {1: 10, 2: 10})
    holder = next(j for j, a in first.items() if a.rank == 1)
    prev = {j: maif.Previous(a.rank, a.priority, a.plateau, a.credit, a.held_from) for j, a in first.items()}
    assert prev[holder].held_from == 10
    same = chance.chance_rank(fits, scores, prev, PARAMS, {1: 11, 2: 11})  # one iteration later: same turn
    assert next(j for j, a in same.items() if a.rank == 1) == holder
    nxt = chance.chance_rank(fits, scores, prev, PARAMS, {1: 12, 2: 12})  # quantum (2) done: the other's turn
    assert next(j for j, a in nxt.items() if a.rank == 1) != holder


def test_decision_with_the_chance_objective_and_its_stored_memory() -> None:
    fits = {
        1: curve(60, 0.80, 0.7, 0.6),
        2: curve(60, 0.80, 0.7, 0.6),
        3: curve(60, 0.4, 0.3, 0.6),
        4: maif.Fit("prior"),
    }
    views = [JobView(j, f"job{j}", f, 0.15, 0.05, {0: f.last_iteration}) for j, f in fits.items()]
    d = decide(views, {}, PARAMS)
    top = [j for j, x in d.jobs.items() if x.priority == PARAMS.top_class]
    assert len(top) == 1 and top[0] in (1, 2)
    assert d.jobs[3].priority < d.jobs[4].priority  # the exploration prior ranks above an unlikely job
    assert any("chance of being the best" in r for r in d.jobs[top[0]].reasons)
    memory = convert.memory_from_json(convert.memory_json(d.memory()))
    assert memory == d.memory()
    assert memory[top[0]].previous.held_from == fits[top[0]].last_iteration


def test_chance_is_an_objective_and_its_parameters_are_validated() -> None:
    assert "chance" in maif.OBJECTIVES and "chance" in maif.BAND_OBJECTIVES
    for bad in (dict(chance_threshold=0.0), dict(chance_threshold=0.6), dict(chance_sigma_floor=0.0),
                dict(chance_quantum=0)):  # fmt: skip
        with pytest.raises(maif.PolicyError):
            maif.MaifParams(objective="chance", **bad)  # type: ignore[arg-type]
