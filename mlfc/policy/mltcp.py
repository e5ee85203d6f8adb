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


# Weight of the iteration that just ended in the bytes-per-iteration EWMA: the default of the
# user-space MltcpTracker / SenderConfig and of kernel MLTCP's IterationDetection.
EWMA_WEIGHT = 0.5


@dataclass(frozen=True, slots=True)
class IterationDetection:
    """How kernel MLTCP (mlfc.hosts.kernel) cuts a TCP connection's traffic into iterations when the
    application says nothing: new data after the pipe was empty for longer than
    max(idle_rtts x smoothed RTT, idle_min seconds) starts an iteration; bytes per iteration is an
    EWMA of the bytes acknowledged in earlier iterations, weight ``ewma_weight`` for the last one.

    idle_min sits above the gaps between one iteration's messages (buckets, collective steps: well
    under a millisecond on a datacentre path) and below a compute phase (tens of milliseconds and up)."""

    idle_rtts: float = 4.0
    idle_min: float = 0.005
    ewma_weight: float = EWMA_WEIGHT

    def __post_init__(self) -> None:
        for name in ("idle_rtts", "idle_min", "ewma_weight"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v)):
                raise PolicyError(f"{name}={v!r} must be a finite number")
        if self.idle_rtts < 0:
            raise PolicyError(f"idle_rtts={self.idle_rtts} must be >= 0")
        if not 0 < self.idle_min <= 60:
            raise PolicyError(f"idle_min={self.idle_min} must be in (0, 60] seconds")
        if not 0 < self.ewma_weight <= 1:
            raise PolicyError(f"ewma_weight={self.ewma_weight} must be in (0, 1]")


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
