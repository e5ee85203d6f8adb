"""The precision is part of the decision (issue 46 item 3, mlfc.policy.precision): which precision a push takes
for the share the network asks it to shed, what is withheld beyond it, and how the PS tells the precision."""

from __future__ import annotations

import pytest

from mlfc.policy.precision import (
    FP32,
    PRECISIONS,
    Plan,
    encoded_bytes,
    plan,
    precision_of,
    shed_of,
    usable,
)
from mlfc.policy.priority import PolicyError

CHUNK = 1024
N = 100_000  # a tensor of many chunks: int8 sheds 1 - (N + 4 * 98) / 4N ~ 0.749


def test_no_congestion_sends_fp32_and_withholds_nothing():
    assert plan(0.0, N, CHUNK) == FP32 == Plan("fp32", 0.0)
    assert plan(0.0, 1, 16) == FP32


@pytest.mark.parametrize(
    ("share", "precision"),
    [(0.1, "fp32"), (0.24, "fp32"), (0.25, "fp32"), (0.26, "fp16"), (0.5, "fp16"), (0.6, "fp16"), (0.7, "int8"),
     (0.9, "int8"), (1.0, "int8")],
)  # fmt: skip
def test_growing_share_lowers_precision_first_then_withholds(share, precision):
    p = plan(share, N, CHUNK)
    assert p.precision == precision
    shed = shed_of(precision, N, CHUNK)
    # what is withheld is what the precision does not shed, as a share of the encoded bytes
    assert p.withhold == pytest.approx(max(0.0, share - shed) / (1 - shed))
    # bytes on the wire: what the share asks, or less when the nearest precision sheds more
    assert (1 - shed) * (1 - p.withhold) == pytest.approx(1 - max(share, shed))


def test_withholding_only_for_what_precision_cannot_shed():
    assert plan(0.1, N, CHUNK).withhold == pytest.approx(0.1)  # nearer fp32 than fp16: withheld as before
    assert plan(0.45, N, CHUNK).withhold == 0.0  # fp16 sheds it
    assert 0 < plan(0.6, N, CHUNK).withhold < plan(0.95, N, CHUNK).withhold


def test_only_withholding_is_capped_by_the_loss_bound():
    # three jobs on a saturated link each asked to shed ~2/3: int8 even under the default bound 0.5
    assert plan(0.67, N, CHUNK, bound=0.5) == Plan("int8", 0.0)
    assert plan(0.95, N, CHUNK, bound=0.5).withhold == 0.5  # what int8 cannot shed, withheld within the bound
    assert plan(0.95, N, CHUNK, bound=0.0) == Plan("int8", 0.0)  # no loss tolerated: rounding only
    assert plan(0.1, N, CHUNK, bound=0.05).withhold == 0.05
    with pytest.raises(PolicyError, match="bound"):
        plan(0.5, N, CHUNK, bound=1.5)


def test_sizes_and_the_ps_reading_the_precision_from_the_length():
    assert [encoded_bytes(p, 40, 16) for p in PRECISIONS] == [160, 80, 40 + 4 * 4]  # int8: 12 values a chunk
    for p in PRECISIONS:
        assert precision_of(encoded_bytes(p, N, CHUNK), N, CHUNK) == p
    with pytest.raises(PolicyError, match="no precision"):
        precision_of(123, N, CHUNK)


def test_a_precision_the_ps_could_not_tell_apart_is_never_used():
    assert encoded_bytes("fp16", 4, 16) == encoded_bytes("int8", 4, 16) == 8
    assert usable(4, 16) == ("fp32", "fp16")
    assert plan(1.0, 4, 16).precision == "fp16"
    assert usable(1, 16) == ("fp32", "fp16")  # int8 of one element (5 bytes) is no smaller than fp16's 2
    assert usable(40, 4) == ("fp32", "fp16")  # no room for an int8 chunk's scale


def test_bad_input_is_refused():
    with pytest.raises(PolicyError):
        plan(1.5, N, CHUNK)
    with pytest.raises(PolicyError):
        encoded_bytes("bf16", N, CHUNK)
