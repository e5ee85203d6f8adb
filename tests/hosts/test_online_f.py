"""MLTCP's F tuned online by one flow (hosts/transport/tuning.py), fake clock: what it feeds the policy's
tuner and when the flow's controller gets a new point."""

from __future__ import annotations

import math

import pytest

from mlfc.hosts.transport import SenderConfig
from mlfc.hosts.transport.tuning import OnlineF
from mlfc.policy.mltcp import MltcpParams
from mlfc.policy.mltcp_tuning import TuningParams


def test_iteration_times_start_to_start_reach_the_tuner():
    f = OnlineF(MltcpParams(2.0, 0.5), TuningParams(window=2, settle=0))
    assert f.iteration_started(10.0, 0) is None  # the first boundary: nothing measured yet
    assert f.iteration_started(11.5, 1000) is None  # one sample of the window's two
    moved = f.iteration_started(13.0, 2000)
    assert f.tuner.history == [(MltcpParams(2.0, 0.5), pytest.approx(1.5))]
    assert moved == f.params != MltcpParams(2.0, 0.5)  # the search tries its first neighbour
    assert f.changes == [(13.0, moved)]


def test_boundaries_without_data_between_them_are_one():
    f = OnlineF(MltcpParams(2.0, 0.5), TuningParams(window=1, settle=0))
    f.iteration_started(0.0, 0)
    f.iteration_started(1.0, 500)
    assert f.iteration_started(1.001, 500) is None  # start_iteration, then the iteration number changed
    f.iteration_started(2.0, 900)
    assert [round(t, 3) for _, t in f.tuner.history] == [1.0, 1.0]


def test_follows_the_landscape_to_the_best_point():
    """An iteration time that is smallest at 4:0.25: the flow's point walks there and the moves are logged."""
    f = OnlineF(MltcpParams(2.0, 0.5))
    now = 0.0
    for sent in range(120):
        p = f.params
        now += 1.0 + 0.05 * (math.log2(p.slope / 4) ** 2 + math.log2(p.intercept / 0.25) ** 2)
        f.iteration_started(now, 1000 * sent)
    assert f.params == MltcpParams(4.0, 0.25) and f.tuner.converged
    assert f.changes and all(t > 0 for t, _ in f.changes)


def test_tuning_needs_mltcp():
    with pytest.raises(ValueError, match="mltcp_tune needs mltcp"):
        SenderConfig(mltcp_tune=TuningParams())
    assert SenderConfig(mltcp=MltcpParams(), mltcp_tune=TuningParams()).mltcp_tune == TuningParams()
