"""Policy functions: the ECN profile and its compiled ranges, the drop policy, MLTCP's F()."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlfc import contract
from mlfc.policy import drop, ecn, mltcp, priority
from mlfc.policy.priority import PolicyError
from mlfc.wire import IMPORTANCE_PROTECTED, MsgType

profiles = st.builds(
    lambda a, b, p: ecn.EcnProfile(min(a, b), max(a, b), p),
    st.integers(0, 200),
    st.integers(0, 200),
    st.floats(0, 1),
)


@given(profiles, st.integers(0, contract.MAX_QDEPTH))
def test_compiled_ranges_reproduce_the_profile(profile: ecn.EcnProfile, q: int) -> None:
    ranges = ecn.compile_profile(profile)
    want = ecn.mark_probability(profile, q)
    got = ecn.compiled_probability(ranges, q)
    assert abs(got - want) <= 0.5 / ecn.RANDOM_RANGE or (want == 1.0 and got == 1.0)


@given(profiles)
def test_compiled_ranges_are_disjoint_and_ordered(profile: ecn.EcnProfile) -> None:
    ranges = ecn.compile_profile(profile)
    for a, b in itertools.pairwise(ranges):
        assert a.hi < b.lo
    assert all(r.lo > profile.kmin for r in ranges)
    assert ranges[-1].always and ranges[-1].hi == contract.MAX_QDEPTH


def test_profile_shape() -> None:
    p = ecn.EcnProfile(kmin=10, kmax=20, pmax=0.5)
    assert ecn.mark_probability(p, 10) == 0.0
    assert ecn.mark_probability(p, 15) == pytest.approx(0.25)
    assert ecn.mark_probability(p, 20) == pytest.approx(0.5)
    assert ecn.mark_probability(p, 21) == 1.0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"kmin": 5, "kmax": 4}, "kmin"),
        ({"pmax": 1.5}, "pmax"),
        ({"pmax": math.nan}, "pmax"),
        ({"kmin": -1}, "kmin"),
        ({"kmax": "7"}, "kmax"),
    ],
)
def test_bad_profiles_name_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(PolicyError, match=field):
        ecn.EcnProfile(**kwargs)


def test_drop_policy_levels_and_decisions() -> None:
    p = drop.DropPolicy(level_depths=(10, 20, 30), min_importance=(0, 2, 4, 8))
    assert [drop.congestion_level(p, q) for q in (0, 9, 10, 19, 20, 30, 500)] == [0, 0, 1, 1, 2, 3, 3]
    assert drop.level_ranges(p) == [(10, 19, 1), (20, 29, 2), (30, contract.MAX_QDEPTH, 3)]
    assert drop.should_drop(p, 1, 1, MsgType.DATA)
    assert not drop.should_drop(p, 1, 2, MsgType.DATA)
    assert not drop.should_drop(p, 0, 0, MsgType.DATA), "nothing is dropped while uncongested"
    assert not drop.should_drop(p, 3, IMPORTANCE_PROTECTED, MsgType.DATA), "protected classes survive"
    for t in (MsgType.ACK, MsgType.CNP, None):
        assert not drop.should_drop(p, 3, 0, t), "only tagged data is ever dropped"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"min_importance": (1, 2, 4, 8)}, "min_importance"),
        ({"min_importance": (0, 4, 2, 8)}, "min_importance"),
        ({"min_importance": (0, 2, 4, 9)}, "min_importance"),
        ({"level_depths": (10, 10, 30)}, "level_depths"),
        ({"level_depths": (10, 20)}, "level_depths"),
    ],
)
def test_bad_drop_policies_name_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(PolicyError, match=field):
        drop.DropPolicy(**kwargs)


def test_mltcp_factor() -> None:
    params = mltcp.MltcpParams(slope=1.0, intercept=0.5)
    assert mltcp.mltcp_factor(0.0, params) == 0.5
    assert mltcp.mltcp_factor(1.0, params) == 1.5
    assert mltcp.mltcp_factor(2.0, params) == 1.5
    assert mltcp.mltcp_factor(math.nan, params) == 0.5
    assert mltcp.bytes_ratio(50, 100) == 0.5 and mltcp.bytes_ratio(5, 0) == 0.0
    with pytest.raises(PolicyError, match="intercept"):
        mltcp.MltcpParams(intercept=0)


def test_interleaving_bands_cover_all_buckets() -> None:
    bands = priority.interleaving_bands(levels=4, base=2)
    assert [(b.lo, b.hi, b.priority) for b in bands] == [(0, 3, 2), (4, 7, 3), (8, 11, 4), (12, 15, 5)]
    with pytest.raises(PolicyError):
        priority.interleaving_bands(levels=6, base=2)
    with pytest.raises(PolicyError, match="reserved"):
        priority.check_job_priority(7)
