"""The online tuner of MLTCP's F (mlfc/policy/mltcp_tuning.py) on synthetic landscapes: it finds the
best grid point from any start without being told it, settles, and reopens when the landscape moves."""

from __future__ import annotations

import math
import random

import pytest

from mlfc.policy.mltcp import MltcpParams
from mlfc.policy.mltcp_tuning import FTuner, TuningParams
from mlfc.policy.priority import PolicyError


def bowl(best: tuple[float, float], noise: float = 0.0, seed: int = 1):
    """Iteration time that grows with the log-distance of F's parameters from ``best``."""
    rng = random.Random(seed)

    def iteration_time(p: MltcpParams) -> float:
        d = (math.log2(p.slope / best[0])) ** 2 + (math.log2(p.intercept / best[1])) ** 2
        return 1.0 + 0.05 * d + rng.gauss(0, noise)

    return iteration_time


def run(tuner: FTuner, landscape, iterations: int) -> MltcpParams:
    for _ in range(iterations):
        tuner.observe(landscape(tuner.params))
    return tuner.params


@pytest.mark.parametrize("start", [MltcpParams(1, 1), MltcpParams(16, 0.125), MltcpParams(2, 0.5)])
def test_finds_the_best_point_from_anywhere(start: MltcpParams) -> None:
    tuner = FTuner(start)
    assert run(tuner, bowl((4.0, 0.25)), 200) == MltcpParams(4.0, 0.25)
    assert tuner.converged


def test_noise_within_the_margin_does_not_lead_it_astray() -> None:
    tuner = FTuner(MltcpParams(1, 1), TuningParams(window=5, margin=0.03))
    p = run(tuner, bowl((8.0, 0.25), noise=0.01, seed=3), 400)
    assert abs(math.log2(p.slope / 8.0)) <= 1 and abs(math.log2(p.intercept / 0.25)) <= 1


def test_a_moved_landscape_reopens_the_search() -> None:
    tuner = FTuner(MltcpParams(2, 0.5))
    run(tuner, bowl((2.0, 0.5)), 150)
    assert tuner.converged and tuner.params == MltcpParams(2.0, 0.5)
    worse = bowl((16.0, 0.125))  # the mix changed: everything is slower and the best point moved
    assert run(tuner, lambda p: worse(p) + 0.3, 400) == MltcpParams(16.0, 0.125)


def test_bad_samples_are_ignored_and_settings_checked() -> None:
    tuner = FTuner()
    before = tuner.params
    for bad in (math.nan, -1.0, 0.0, math.inf):
        assert tuner.observe(bad) == before
    with pytest.raises(PolicyError):
        TuningParams(window=0)
