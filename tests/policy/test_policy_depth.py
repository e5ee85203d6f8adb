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
