"""Packet depths -> Tofino cells: the one conversion the controller applies to every depth key."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlfc import contract
from mlfc.policy import depth
from mlfc.policy.priority import PolicyError


def test_cells_per_packet_rounds_up_to_whole_cells() -> None:
    assert depth.cells_per_packet(1500) == 19  # 1500 / 80 = 18.75
    assert depth.cells_per_packet(80) == 1
    assert depth.cells_per_packet(81) == 2
    for bad in (0, 63, 20000, 1500.0, True):
        with pytest.raises(PolicyError, match="packet_bytes"):
            depth.cells_per_packet(bad)  # type: ignore[arg-type]


def test_one_cell_per_packet_changes_nothing() -> None:
    assert depth.packets_to_cells(4, 32, 1) == (4, 32)


def test_an_open_top_stays_open_and_unreachable_depths_vanish() -> None:
    assert depth.packets_to_cells(33, contract.MAX_QDEPTH, 19) == (33 * 19, contract.MAX_QDEPTH)
    assert depth.packets_to_cells(contract.MAX_QDEPTH // 19 + 1, contract.MAX_QDEPTH, 19) is None
    assert depth.packets_to_cells(contract.MAX_QDEPTH // 19, contract.MAX_QDEPTH // 19, 19)[1] <= contract.MAX_QDEPTH


@given(st.integers(0, 2000), st.integers(0, 2000), st.integers(1, 40), st.integers(0, contract.MAX_QDEPTH))
def test_a_cell_depth_falls_in_the_range_of_the_packet_count_it_holds(a: int, b: int, cells: int, d: int) -> None:
    lo, hi = min(a, b), max(a, b)
    converted = depth.packets_to_cells(lo, hi, cells)
    in_packets = lo <= d // cells <= hi
    in_cells = converted is not None and converted[0] <= d <= converted[1]
    assert in_packets == in_cells


@given(st.lists(st.integers(1, 3000), min_size=1, max_size=6, unique=True), st.integers(1, 40))
def test_adjacent_ranges_stay_adjacent(cuts: list[int], cells: int) -> None:
    """Ranges that tile 0..MAX_QDEPTH in packets tile it in cells: no depth is lost or doubled."""
    bounds = [0, *sorted(cuts), contract.MAX_QDEPTH + 1]
    converted = [depth.packets_to_cells(bounds[i], bounds[i + 1] - 1, cells) for i in range(len(bounds) - 1)]
    present = [c for c in converted if c is not None]
    assert present[0][0] == 0 and present[-1][1] == contract.MAX_QDEPTH
    for (_, hi), (lo, _) in itertools.pairwise(present):
        assert lo == hi + 1


# ---- bytes -> the switch's depth unit (the step ECN profile's K) ------------------------------------


def test_depth_units_of_the_two_targets() -> None:
    assert depth.PACKETS == depth.packet_unit(1500) == depth.DepthUnit(1500, 1)
    assert depth.packet_unit(9000) == depth.DepthUnit(9000, 1)
    assert depth.cell_unit(1500) == depth.DepthUnit(80, 19)
    assert depth.switch_unit(True, 800) == depth.DepthUnit(80, 10)
    assert depth.switch_unit(False, 800) == depth.DepthUnit(800, 1)
    for bad in (0, -80, 1.5, True):
        with pytest.raises(PolicyError, match="unit_bytes"):
            depth.DepthUnit(bad)  # type: ignore[arg-type]
    with pytest.raises(PolicyError, match="packet_bytes"):
        depth.packet_unit(20)


def test_bytes_round_down_to_whole_units() -> None:
    packets, cells = depth.packet_unit(1500), depth.cell_unit(1500)
    assert [depth.bytes_to_depth(k, packets) for k in (0, 1, 1499, 1500, 29_999, 30_000, 31_499, 31_500)] == [
        0, 0, 0, 1, 19, 20, 20, 21,
    ]  # fmt: skip
    assert [depth.bytes_to_depth(k, cells) for k in (0, 79, 80, 30_000, 30_079, 30_080)] == [0, 0, 1, 375, 375, 376]
    for bad in (-1, 1.5, True, "30000"):
        with pytest.raises(PolicyError, match="byte count"):
            depth.bytes_to_depth(bad, packets)  # type: ignore[arg-type]


@given(st.integers(0, 10**9), st.integers(1, 16384), st.integers(0, contract.MAX_QDEPTH))
def test_deeper_than_the_converted_threshold_is_more_than_k_bytes(k: int, unit_bytes: int, d: int) -> None:
    """A queue ``d`` units deep is taken to hold ``d * unit_bytes``: above the threshold exactly when
    that is more than K bytes."""
    unit = depth.DepthUnit(unit_bytes)
    assert (d > depth.bytes_to_depth(k, unit)) == (d * unit_bytes > k)
