"""Diff/reconcile logic: minimal updates, idempotence, model of the switch after a diff."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlfc import contract
from mlfc.controller.entries import Range, Ternary, entry
from mlfc.controller.reconcile import Diff, apply_diff, batches, count_by_table, diff, index


def jp(job: int, prio: int, lo: int = 0, hi: int = 0, entry_prio: int = 30):
    match = {contract.JOB_ID: Ternary(job, 0xFFFF)}
    if hi:
        match[contract.ITERATION] = Range(lo, hi)
    return entry(contract.JOB_PRIORITY, match, contract.SET_PRIORITY, {"priority": prio}, entry_prio)


def test_insert_modify_delete() -> None:
    actual = [jp(1, 3), jp(2, 4), jp(3, 5)]
    desired = [jp(1, 3), jp(2, 6), jp(4, 1)]
    d = diff(desired, actual)
    assert d.inserts == (jp(4, 1),)
    assert d.modifies == (jp(2, 6),)
    assert d.deletes == (jp(3, 5),)
    assert d.summary() == "+1 ~1 -1"


def test_identity_is_table_match_and_priority_not_the_action() -> None:
    a = jp(1, 3, entry_prio=30)
    b = jp(1, 3, entry_prio=40)  # same match, other priority: a different P4Runtime entry
    assert a.key != b.key
    assert diff([b], [a]) == Diff(inserts=(b,), deletes=(a,))
    assert jp(1, 3).key == jp(1, 5).key
    # entry() masks ternary values, so a switch's canonical read-back compares equal.
    stray = entry(contract.JOB_PRIORITY, {contract.JOB_ID: Ternary(0x1234, 0xFF00)}, contract.SET_PRIORITY, {}, 30)
    canonical = entry(contract.JOB_PRIORITY, {contract.JOB_ID: Ternary(0x1200, 0xFF00)}, contract.SET_PRIORITY, {}, 30)
    assert stray == canonical and stray.match_dict()[contract.JOB_ID] == Ternary(0x1200, 0xFF00)


def test_origin_is_not_switch_state() -> None:
    a = entry(
        contract.JOB_PRIORITY, {contract.JOB_ID: Ternary(1, 0xFFFF)}, contract.SET_PRIORITY, {"priority": 2}, 30, "x"
    )
    b = entry(
        contract.JOB_PRIORITY, {contract.JOB_ID: Ternary(1, 0xFFFF)}, contract.SET_PRIORITY, {"priority": 2}, 30, "y"
    )
    assert diff([a], [b]).empty


def test_duplicate_desired_keys_are_a_bug() -> None:
    with pytest.raises(ValueError, match="same key"):
        index([jp(1, 3), jp(1, 4)])


entries_st = st.lists(
    st.builds(
        jp, st.integers(1, 6), st.integers(0, 6), st.just(0), st.sampled_from([0, 10]), st.sampled_from([30, 40])
    ),
    max_size=12,
).map(lambda es: list(index_last(es).values()))


def index_last(es):
    return {e.key: e for e in es}


@given(entries_st, entries_st)
def test_applying_the_diff_converges_and_is_idempotent(desired, actual) -> None:
    d = diff(desired, actual)
    after = apply_diff(actual, d)
    assert after == index(desired)
    assert diff(desired, after.values()).empty
    # Minimal: nothing already right is touched.
    right = {e.key for e in actual if e in desired}
    touched = {e.key for e in (*d.inserts, *d.modifies, *d.deletes)}
    assert not right & touched
    assert len(d) == len({e.key for e in desired} ^ {e.key for e in actual}) + len(d.modifies)


def test_batches_and_counts() -> None:
    assert [len(b) for b in batches(list(range(12)), 5)] == [5, 5, 2]
    assert list(batches([], 5)) == []
    assert count_by_table([jp(1, 1), jp(2, 2)]) == {contract.JOB_PRIORITY: 2}
