"""The rate class a switch writes beside the queue depth in a DATA packet's shim (docs/wire-format.md).

A port's rate is written as an 8-bit class on a logarithmic scale, eight classes per octave above
``BASE_BPS``: class ``k >= 1`` holds the rates from ``BASE_BPS * 2 ** ((k - 1) / 8)`` up to the next
class, so a class names its rate within 9 % (1 Mb/s .. beyond 1 Tb/s fit); 0 means unknown (a port without a
configured rate). The controller writes a port's class (``rate_class``) into each route through that port
(``set_next_hop``'s ``rate_class``); a sender reads it back as the
class's lowest rate (``class_rate``), a lower bound of the port's rate: an estimate of its own share of
the link read from it can only come out larger (mlfc.policy.withhold: withholding less, never more).
"""

from __future__ import annotations

import math

from mlfc import contract
from mlfc.policy.priority import PolicyError

BASE_BPS = 100_000  # class 1: 100 kb/s and up
CLASSES_PER_OCTAVE = 8
UNKNOWN = 0


def rate_class(bits_per_second: float) -> int:
    """The class of a port of ``bits_per_second`` (rates below BASE_BPS take class 1, beyond the last the
    last)."""
    if not (isinstance(bits_per_second, (int, float)) and math.isfinite(bits_per_second) and bits_per_second > 0):
        raise PolicyError(f"bits_per_second={bits_per_second!r} must be a finite rate > 0")
    k = 1 + math.floor(CLASSES_PER_OCTAVE * math.log2(bits_per_second / BASE_BPS) + 1e-9)
    return max(1, min(contract.MAX_RATE_CLASS, k))


def class_rate(rate_class: int) -> float | None:
    """The lowest rate of ``rate_class`` in bits/s (None: unknown, class 0)."""
    if not 0 <= rate_class <= contract.MAX_RATE_CLASS:
        raise PolicyError(f"rate_class={rate_class!r} must be 0..{contract.MAX_RATE_CLASS}")
    if rate_class == UNKNOWN:
        return None
    return BASE_BPS * 2 ** ((rate_class - 1) / CLASSES_PER_OCTAVE)
