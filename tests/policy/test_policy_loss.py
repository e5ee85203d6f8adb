"""The bounded-loss policy: the protected floor and the tolerated-loss budget, as sender and receiver use it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlfc.policy import loss
from mlfc.policy.priority import PolicyError
from mlfc.wire import IMPORTANCE_PROTECTED


def test_basis_points() -> None:
    assert loss.to_basis_points(0.0) == 0 and loss.to_basis_points(1) == 10000
    assert loss.to_basis_points(0.025) == 250 and loss.to_basis_points(0.00019) == 1  # truncated, never above
    for bad in (-0.1, 1.5, "0.1", True, float("nan")):
        with pytest.raises(PolicyError):
            loss.to_basis_points(bad)
    assert loss.valid_basis_points(10000) and not loss.valid_basis_points(10001)


def test_protected_floor() -> None:
    assert loss.is_protected(IMPORTANCE_PROTECTED) and not loss.is_protected(IMPORTANCE_PROTECTED - 1)
    classes = bytearray([0, 9, 3])
    assert loss.apply_floor(classes) is classes and classes == bytearray([0, 9, IMPORTANCE_PROTECTED])
    assert loss.apply_floor(bytearray([15])) == bytearray([15])  # never lowered
    assert loss.count_protected(bytes([0, 7, 8, 15, 3])) == 2


def test_budget_tolerates_unprotected_chunks_up_to_the_bound() -> None:
    b = loss.LossBudget(tensor_bytes=100_000, bound_bp=250)  # 2.5 %: 2500 bytes
    assert b.limit == 2500
    assert b.try_tolerate(3, 1000) and b.try_tolerate(0, 1000)
    assert not b.try_tolerate(3, 1000)  # 3000 > 2500: retransmit
    assert b.try_tolerate(7, 500) and b.used == 2500 and b.fraction_used == 0.025
    assert not b.try_tolerate(IMPORTANCE_PROTECTED, 0)  # protected: never, whatever the budget
    b.release(1000)
    assert b.used == 1500 and b.try_tolerate(1, 1000)
    assert not loss.LossBudget(100_000, 0).try_tolerate(0, 1)
    with pytest.raises(PolicyError):
        loss.LossBudget(100, 10001)


def test_receiver_zero_fills_only_without_missing_protected_chunks() -> None:
    assert loss.may_zero_fill(2500, 0, 100_000, 250)
    assert not loss.may_zero_fill(2501, 0, 100_000, 250)
    assert not loss.may_zero_fill(0, 1, 100_000, 10000)


@given(st.integers(0, 1 << 31), st.integers(0, 10000), st.integers(0, 1 << 31))
def test_sender_and_receiver_agree_on_the_bound(total: int, bp: int, lost: int) -> None:
    # the sender's budget in bytes and the receiver's check are the same rule
    assert loss.within_bound(lost, total, bp) == (lost <= loss.budget_bytes(total, bp))
