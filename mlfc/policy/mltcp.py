"""MLTCP's augmentation: scale a congestion controller's additive increase by
F(bytes_ratio) = slope * bytes_ratio + intercept, bytes_ratio = bytes sent this iteration /
bytes per iteration, clamped to [0, 1] (arXiv 2402.09589). A flow further into its iteration
grows faster, so competing jobs drift apart into interleaved communication phases."""

from __future__ import annotations

import math
from dataclasses import dataclass

from mlfc.policy.priority import PolicyError


@dataclass(frozen=True, slots=True)
class MltcpParams:
    # F in [0.5, 2.5]: the best point of `make sweep` on two compatible jobs (docs/results.md);
    # the paper's own values are unverified.
    slope: float = 2.0
    intercept: float = 0.5

    def __post_init__(self) -> None:
        for name in ("slope", "intercept"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v)):
                raise PolicyError(f"{name}={v!r} must be a finite number")
        if self.slope < 0:
            raise PolicyError(f"slope={self.slope} must be >= 0 (F increases with bytes_ratio)")
        if self.intercept <= 0:
            raise PolicyError(f"intercept={self.intercept} must be > 0 (F(0) must still grow the window)")


def bytes_ratio(bytes_sent: float, bytes_per_iteration: float) -> float:
    if bytes_per_iteration <= 0 or not math.isfinite(bytes_sent):
        return 0.0
    return max(0.0, min(1.0, bytes_sent / bytes_per_iteration))


def mltcp_factor(ratio: float, params: MltcpParams = MltcpParams()) -> float:
    """F(bytes_ratio); ratio is clamped to [0, 1]."""
    r = 0.0 if ratio != ratio else max(0.0, min(1.0, ratio))
    return params.slope * r + params.intercept


def shift(delta: float, period: float, comm_fraction: float, params: MltcpParams = MltcpParams()) -> float:
    """How far two identical MLTCP jobs drift apart in one iteration (HotNets'24's shift equation):
    ``Shift(D) = S * D * (aT - D) / (aT * I + D * S)`` for an offset ``D`` between their communication
    starts, iteration time ``T``, communication fraction ``a``, slope ``S`` and intercept ``I``. Zero at
    D = 0 (unstable) and at D = aT (interleaved, stable); small offsets grow by about (1 + S/I) per
    iteration."""
    at = comm_fraction * period
    if not 0 < delta < at:
        return 0.0
    s, i = params.slope, params.intercept
    return s * delta * (at - delta) / (at * i + delta * s)
