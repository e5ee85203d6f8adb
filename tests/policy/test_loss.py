"""The bounded-loss policy's range: any bound in [0, 1] is usable (the protected floor, not a cap, limits
what may be lost), bad bounds are refused."""

from __future__ import annotations

import pytest

from mlfc.policy.loss import LossBudget, to_basis_points
from mlfc.policy.priority import PolicyError
from mlfc.wire import IMPORTANCE_PROTECTED


@pytest.mark.parametrize(("fraction", "bp"), [(0.0, 0), (0.3, 3000), (0.5, 5000), (0.75, 7500), (1.0, 10000)])
def test_bounds_up_to_the_whole_tensor_are_carried(fraction, bp):
    assert to_basis_points(fraction) == bp


@pytest.mark.parametrize("bad", [-0.01, 1.01, True, "0.5", None])
def test_out_of_range_bounds_are_refused(bad):
    with pytest.raises(PolicyError, match="loss_bound"):
        to_basis_points(bad)


def test_a_half_bound_tolerates_half_the_bytes_and_never_a_protected_chunk():
    budget = LossBudget(10_000, to_basis_points(0.5))
    assert [budget.try_tolerate(0, 1000) for _ in range(6)] == [True] * 5 + [False]
    assert budget.used == 5000 and budget.fraction_used == 0.5
    assert not LossBudget(10_000, 10000).try_tolerate(IMPORTANCE_PROTECTED, 1)
