"""DCQCN's RED-like marking profile (Kmin, Kmax, Pmax) on the egress queue depth, in packets.

The switch cannot multiply, so the controller compiles the profile into a table of queue-depth
ranges, each carrying a 16-bit threshold: a packet is marked when a 16-bit random number is below
it (probability threshold / 65536), or always above Kmax.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mlfc import contract
from mlfc.policy.priority import PolicyError

RANDOM_RANGE = 1 << contract.THRESHOLD_BITS


@dataclass(frozen=True, slots=True)
class EcnProfile:
    """No marks at or below kmin; probability rising linearly to pmax at kmax; always above kmax.

    Defaults are DCQCN's shape scaled to BMv2's 64-packet queues (the paper's 40G values are
    5 KB / 200 KB / 1 %, far beyond a BMv2 queue).
    """

    kmin: int = 4
    kmax: int = 32
    pmax: float = 0.2

    def __post_init__(self) -> None:
        for name in ("kmin", "kmax"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= contract.MAX_QDEPTH:
                raise PolicyError(f"{name}={v!r} must be an integer queue depth 0..{contract.MAX_QDEPTH} (packets)")
        if self.kmin > self.kmax:
            raise PolicyError(f"kmin={self.kmin} > kmax={self.kmax}")
        if not (isinstance(self.pmax, (int, float)) and math.isfinite(self.pmax) and 0.0 <= self.pmax <= 1.0):
            raise PolicyError(f"pmax={self.pmax!r} must be a probability in [0, 1]")


def mark_probability(profile: EcnProfile, qdepth: int) -> float:
    """The probability that an ECT packet seeing ``qdepth`` packets queued is marked CE."""
    if qdepth <= profile.kmin:
        return 0.0
    if qdepth > profile.kmax:
        return 1.0
    return profile.pmax * (qdepth - profile.kmin) / (profile.kmax - profile.kmin)


def probability_threshold(p: float) -> int:
    """16-bit threshold for ``random < threshold``; 65536 means always (handled as its own action)."""
    return min(RANDOM_RANGE, round(p * RANDOM_RANGE))


@dataclass(frozen=True, slots=True)
class MarkRange:
    """Queue depths [lo, hi] are marked with threshold/65536 (threshold 65536: always)."""

    lo: int
    hi: int
    threshold: int

    @property
    def always(self) -> bool:
        return self.threshold >= RANDOM_RANGE


def compile_profile(profile: EcnProfile) -> list[MarkRange]:
    """The profile as the ranges the switch holds; depths not covered are never marked."""
    ranges: list[MarkRange] = []
    for q in range(profile.kmin + 1, profile.kmax + 1):
        t = probability_threshold(mark_probability(profile, q))
        if t == 0:
            continue
        if ranges and ranges[-1].threshold == t and ranges[-1].hi == q - 1:
            ranges[-1] = MarkRange(ranges[-1].lo, q, t)
        else:
            ranges.append(MarkRange(q, q, t))
    if profile.kmax < contract.MAX_QDEPTH:
        lo = profile.kmax + 1
        if ranges and ranges[-1].always and ranges[-1].hi == profile.kmax:
            lo = ranges.pop().lo
        ranges.append(MarkRange(lo, contract.MAX_QDEPTH, RANDOM_RANGE))
    return ranges


def compiled_probability(ranges: list[MarkRange], qdepth: int) -> float:
    """What the switch does with the compiled ranges (the oracle for switch tests)."""
    for r in ranges:
        if r.lo <= qdepth <= r.hi:
            return min(1.0, r.threshold / RANDOM_RANGE)
    return 0.0
