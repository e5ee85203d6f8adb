"""Bounded loss: which chunks of a tensor may be left missing, and how many bytes of them.

A tensor travels with a loss bound, the fraction of its bytes the receiver may zero-fill, carried on the
wire in basis points. Two rules decide, and the transport's sender and receiver both call them here:

* **the protected floor**: a chunk of importance >= IMPORTANCE_PROTECTED is never tolerated (the sender
  retransmits it until it is acknowledged, the receiver never delivers without it), and the last chunk
  of every tensor is raised to the floor: it carries the end-of-tensor marker that starts the
  receiver's deadline;
* **the budget**: unprotected chunks may be left missing while their bytes stay within
  ``bound_bp * tensor_bytes / LOSS_BOUND_SCALE`` (``within_bound``).

The sender keeps a ``LossBudget`` per tensor: ``try_tolerate`` when a lost chunk could be retransmitted
(True: stop retransmitting it, the receiver will zero-fill it), ``release`` when a tolerated chunk is
acknowledged after all. The receiver asks ``may_zero_fill`` once its deadline has passed. The switch's
selective drop (mlfc.policy.drop) spares the same protected classes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mlfc.policy.priority import PolicyError
from mlfc.wire import IMPORTANCE_LEVELS, IMPORTANCE_PROTECTED

LOSS_BOUND_SCALE = 10000  # the wire carries the bound in basis points, 0..10000


def to_basis_points(fraction: float) -> int:
    """A loss bound in [0, 1] as the wire's basis points (truncated: the bound is never exceeded)."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0.0 <= fraction <= 1.0:
        raise PolicyError(f"loss_bound={fraction!r} must be in [0, 1]")
    return int(fraction * LOSS_BOUND_SCALE)


def valid_basis_points(bound_bp: int) -> bool:
    return 0 <= bound_bp <= LOSS_BOUND_SCALE


def is_protected(importance: int) -> bool:
    return importance >= IMPORTANCE_PROTECTED


def apply_floor(classes: bytearray) -> bytearray:
    """Raise the last chunk to the protected floor, in place (it carries the end-of-tensor marker)."""
    if classes:
        classes[-1] = max(classes[-1], IMPORTANCE_PROTECTED)
    return classes


def count_protected(classes: bytes | bytearray) -> int:
    """Protected chunks of a tensor (the receiver learns this number from the DATA descriptor)."""
    return sum(classes.count(c) for c in range(IMPORTANCE_PROTECTED, IMPORTANCE_LEVELS))


def budget_bytes(tensor_bytes: int, bound_bp: int) -> int:
    """The most bytes a tensor may lose: ``within_bound(b, ...)`` holds exactly for b <= this."""
    return bound_bp * tensor_bytes // LOSS_BOUND_SCALE


def within_bound(lost_bytes: int, tensor_bytes: int, bound_bp: int) -> bool:
    return lost_bytes * LOSS_BOUND_SCALE <= bound_bp * tensor_bytes


def may_zero_fill(missing_bytes: int, missing_protected: int, tensor_bytes: int, bound_bp: int) -> bool:
    """Receiver: deliver with the missing chunks zero-filled? Only when no protected chunk is missing and
    the missing bytes are within the bound."""
    return missing_protected <= 0 and within_bound(missing_bytes, tensor_bytes, bound_bp)


@dataclass
class LossBudget:
    """Sender side: the bytes of one tensor left to the receiver to zero-fill (``used``)."""

    tensor_bytes: int
    bound_bp: int
    used: int = 0

    def __post_init__(self) -> None:
        if self.tensor_bytes < 0 or not valid_basis_points(self.bound_bp):
            raise PolicyError(f"tensor_bytes={self.tensor_bytes}, bound_bp={self.bound_bp}: out of range")

    @property
    def limit(self) -> int:
        return budget_bytes(self.tensor_bytes, self.bound_bp)

    def try_tolerate(self, importance: int, size: int) -> bool:
        """A chunk of ``size`` bytes is lost: True if it may stay lost (and is now counted), False if it must
        be retransmitted (protected, or beyond the budget)."""
        if is_protected(importance) or not within_bound(self.used + size, self.tensor_bytes, self.bound_bp):
            return False
        self.used += size
        return True

    def release(self, size: int) -> None:
        """A tolerated chunk was acknowledged after all: its bytes return to the budget."""
        self.used -= size

    @property
    def fraction_used(self) -> float:
        return self.used / self.tensor_bytes if self.tensor_bytes else math.nan
