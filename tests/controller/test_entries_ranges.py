"""Ranges written as ternary prefixes (controller/entries.py), for keys a target matches ternary
(the TNA program's iteration key): exactly the range's values match, with the fewest prefixes."""

from __future__ import annotations

import itertools

import pytest

from mlfc.controller.entries import Exact, Range, Ternary, entry, range_to_ternaries, ranges_as_ternaries


def _matches(ts: list[Ternary], v: int) -> int:
    return sum((v & t.mask) == t.value for t in ts)


@pytest.mark.parametrize("bits", [1, 3, 6])
def test_every_range_of_a_small_field_is_covered_exactly_once(bits: int) -> None:
    n = 1 << bits
    for lo, hi in itertools.combinations_with_replacement(range(n), 2):
        ts = range_to_ternaries(Range(lo, hi), bits)
        assert [_matches(ts, v) for v in range(n)] == [int(lo <= v <= hi) for v in range(n)], (lo, hi)
        assert len(ts) <= max(1, 2 * bits - 2)


def test_aligned_windows_take_one_prefix_and_the_worst_case_takes_2w_minus_2() -> None:
    assert range_to_ternaries(Range(1024, 2047), 32) == [Ternary(1024, 0xFFFFFC00)]
    assert range_to_ternaries(Range(7, 7), 32) == [Ternary(7, 0xFFFFFFFF)]
    assert len(range_to_ternaries(Range(1, (1 << 32) - 2), 32)) == 62


def test_a_range_outside_the_field_is_refused() -> None:
    with pytest.raises(ValueError, match="outside a 4-bit field"):
        range_to_ternaries(Range(3, 16), 4)


def test_entries_split_per_prefix_keep_action_priority_and_other_fields() -> None:
    e = entry("t", {"it": Range(3, 9), "job": Exact(7)}, "set", {"p": 6}, priority=40, origin="job 7 windows[0]")
    other = entry("u", {"it": Range(3, 9)}, "set")
    out = ranges_as_ternaries([e, other], {"t": {"it": 32}})
    assert out[-1] == other  # another table's range stays a range
    split = out[:-1]
    assert [dict(x.match)["it"] for x in split] == range_to_ternaries(Range(3, 9), 32)
    assert all(dict(x.match)["job"] == Exact(7) and x.action_value == e.action_value for x in split)
    assert {x.priority for x in split} == {40}
    assert [x.origin for x in split] == [f"job 7 windows[0] prefix {k}" for k in range(len(split))]


def test_a_full_range_becomes_a_dont_care() -> None:
    out = ranges_as_ternaries([entry("t", {"it": Range(0, 255), "job": Exact(1)}, "set")], {"t": {"it": 8}})
    assert [x.match_dict() for x in out] == [{"job": Exact(1)}]
