"""The two ECN regimes in the switch's depth unit: DCTCP's step (K in bytes) beside DCQCN's RED-like
profile (packets), compiled by ``mlfc.policy.ecn.compile_marking`` and reproduced by its oracle."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlfc import contract
from mlfc.policy import depth, ecn
from mlfc.policy.priority import PolicyError

ALWAYS = ecn.RANDOM_RANGE

units = st.sampled_from(
    [
        depth.packet_unit(1500),
        depth.packet_unit(9000),
        depth.packet_unit(64),
        depth.cell_unit(1500),
        depth.cell_unit(80),
    ]
)
red = st.builds(
    lambda a, b, p: ecn.RedProfile(min(a, b), max(a, b), p), st.integers(0, 300), st.integers(0, 300), st.floats(0, 1)
)
step = st.builds(ecn.StepProfile, st.integers(0, 2_000_000))


def test_the_red_profile_keeps_its_first_name() -> None:
    assert ecn.EcnProfile is ecn.RedProfile
    assert ecn.EcnProfile() == ecn.RedProfile(4, 32, 0.2)


@pytest.mark.parametrize("bad", [-1, -30_000, 1.5, True, "30000", None])
def test_a_bad_k_is_refused_naming_it(bad: object) -> None:
    with pytest.raises(PolicyError, match="k_bytes"):
        ecn.StepProfile(bad)  # type: ignore[arg-type]


def test_a_step_marks_every_depth_above_k_in_the_switchs_unit() -> None:
    k = ecn.StepProfile(k_bytes=30_000)
    assert ecn.compile_marking(k, depth.packet_unit(1500)) == [ecn.MarkRange(21, contract.MAX_QDEPTH, ALWAYS)]
    assert ecn.compile_marking(k, depth.cell_unit(1500)) == [ecn.MarkRange(376, contract.MAX_QDEPTH, ALWAYS)]
    assert ecn.compile_marking(k, depth.packet_unit(9000)) == [ecn.MarkRange(4, contract.MAX_QDEPTH, ALWAYS)]
    # K rounds down to whole packets: 31,499 bytes is 20 full packets, so a packet finding 21 queued is marked
    assert ecn.compile_step(ecn.StepProfile(31_499)) == [ecn.MarkRange(21, contract.MAX_QDEPTH, ALWAYS)]
    # below one unit: any queued packet is more than K
    for small in (0, 1, 1499):
        assert ecn.compile_step(ecn.StepProfile(small)) == [ecn.MarkRange(1, contract.MAX_QDEPTH, ALWAYS)]


def test_k_beyond_the_deepest_reportable_queue_is_refused() -> None:
    cells = depth.cell_unit(1500)
    deepest = ecn.StepProfile((contract.MAX_QDEPTH - 1) * 80 + 79)  # K = MAX_QDEPTH - 1 cells: marks at MAX only
    assert ecn.compile_marking(deepest, cells) == [ecn.MarkRange(contract.MAX_QDEPTH, contract.MAX_QDEPTH, ALWAYS)]
    too_deep = ecn.StepProfile(contract.MAX_QDEPTH * 80)
    with pytest.raises(PolicyError, match=r"k_bytes=.*would never mark"):
        ecn.compile_marking(too_deep, cells)
    assert ecn.compile_marking(too_deep, depth.PACKETS)  # the same K is shallow in 1500-byte packets


def test_the_datacenter_shallow_step_is_offered_not_imposed() -> None:
    assert ecn.DATACENTER_SHALLOW.k_bytes == 30_000
    assert ecn.DATACENTER_SHALLOW.threshold(depth.PACKETS) == 20
    assert ecn.DATACENTER_SHALLOW.threshold(depth.cell_unit()) == 375
    assert ecn.RedProfile() != ecn.DATACENTER_SHALLOW  # the default stays DCQCN's RED


@given(red, units)
def test_red_in_a_unit_is_its_packet_ranges_converted(profile: ecn.RedProfile, unit: depth.DepthUnit) -> None:
    want = [depth.packets_to_depth(r.lo, r.hi, unit) for r in ecn.compile_profile(profile)]
    got = ecn.compile_marking(profile, unit)
    assert [(r.lo, r.hi) for r in got] == [w for w in want if w is not None]
    if unit.per_packet == 1:
        assert got == ecn.compile_profile(profile)


@given(st.one_of(red, step), units, st.integers(0, contract.MAX_QDEPTH))
def test_compiled_ranges_reproduce_either_profile(profile, unit: depth.DepthUnit, q: int) -> None:  # type: ignore[no-untyped-def]
    ranges = ecn.compile_marking(profile, unit)
    for a, b in itertools.pairwise(ranges):
        assert a.hi < b.lo
    want = ecn.marking_probability(profile, q, unit)
    got = ecn.compiled_probability(ranges, q)
    assert abs(got - want) <= 0.5 / ecn.RANDOM_RANGE or (want == 1.0 and got == 1.0)


def test_compile_marking_refuses_what_is_not_a_profile() -> None:
    with pytest.raises(PolicyError, match="not an ECN marking profile"):
        ecn.compile_marking("step")  # type: ignore[arg-type]
