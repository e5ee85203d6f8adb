"""ECN marking profiles on the egress queue's enqueue depth: the two regimes a switch can run.

* ``RedProfile`` (``EcnProfile``, its first name): DCQCN's RED-like (Kmin, Kmax, Pmax), in packets.
* ``StepProfile``: DCTCP's step, K in bytes: every ECT packet that finds more than K bytes queued is
  marked, none below.

The switch cannot multiply, so the controller compiles a profile into a table of queue-depth ranges,
each carrying a 16-bit threshold: a packet is marked when a 16-bit random number is below it
(probability threshold / 65536), or always. ``compile_marking`` gives those ranges in the switch's own
depth unit (``mlfc.policy.depth.DepthUnit``: packets on BMv2, 80-byte cells on Tofino), the one place
a profile meets the unit.

A byte threshold on a packet-counting queue (BMv2, the reference switch): the switch sees packets, not
bytes, so each queued packet is taken as the deployment's ``packet_bytes`` (1500 unless configured) and
K rounds *down* to whole packets: marked above ``floor(K / packet_bytes)`` packets, the first depth at
which full-size packets exceed K. Rounding up would leave up to one full packet over K unmarked;
smaller packets are marked at fewer bytes than K (the switch cannot tell them apart).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mlfc import contract
from mlfc.policy import depth
from mlfc.policy.priority import PolicyError

RANDOM_RANGE = 1 << contract.THRESHOLD_BITS


@dataclass(frozen=True, slots=True)
class RedProfile:
    """DCQCN's RED-like profile in packets: no marks at or below kmin; probability rising linearly to
    pmax at kmax; always above kmax.

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


EcnProfile = RedProfile  # the RED profile's first name, kept for existing callers and configs


@dataclass(frozen=True, slots=True)
class StepProfile:
    """DCTCP's marking: every ECT packet that finds more than ``k_bytes`` queued is marked, none at or
    below. The switch's depth unit decides how K is seen (``threshold``)."""

    k_bytes: int

    def __post_init__(self) -> None:
        if isinstance(self.k_bytes, bool) or not isinstance(self.k_bytes, int) or self.k_bytes < 0:
            raise PolicyError(f"k_bytes={self.k_bytes!r} must be an integer byte count >= 0")

    def threshold(self, unit: depth.DepthUnit = depth.PACKETS) -> int:
        """K in ``unit`` (rounded down): packets deeper than this are marked. Raises when no depth the
        switch can report lies above it (the profile would never mark)."""
        k = depth.bytes_to_depth(self.k_bytes, unit)
        if k >= contract.MAX_QDEPTH:
            raise PolicyError(
                f"k_bytes={self.k_bytes} is {k} depth units of {unit.unit_bytes} bytes, beyond the deepest queue "
                f"the switch reports ({contract.MAX_QDEPTH}): it would never mark"
            )
        return k


MarkingProfile = RedProfile | StepProfile

# A shallow-buffer data-centre step: K = 30,000 bytes (20 packets of 1500 bytes). Above DCTCP's lower
# bound C x RTT / 7 (about 18 KB at 10 Gb/s and a 100 us RTT) and at most 24 us of queueing at 10 Gb/s.
# Offered, not the default: a deployment chooses it (defaults.ecn: {step: {k_bytes: 30000}}).
DATACENTER_SHALLOW = StepProfile(k_bytes=30_000)


def mark_probability(profile: RedProfile, qdepth: int) -> float:
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


def compile_profile(profile: RedProfile) -> list[MarkRange]:
    """The RED profile as ranges of depths in packets; depths not covered are never marked."""
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


def compile_step(profile: StepProfile, unit: depth.DepthUnit = depth.PACKETS) -> list[MarkRange]:
    """The step profile as the one range it marks, in ``unit``: every depth above K."""
    return [MarkRange(profile.threshold(unit) + 1, contract.MAX_QDEPTH, RANDOM_RANGE)]


def compile_marking(profile: MarkingProfile, unit: depth.DepthUnit = depth.PACKETS) -> list[MarkRange]:
    """The ranges a switch whose depth counts ``unit`` holds for ``profile`` (sorted, disjoint; depths
    not covered are never marked). RED's ranges in packets are converted with ``depth.packets_to_depth``,
    the step's K with ``depth.bytes_to_depth``."""
    if isinstance(profile, StepProfile):
        return compile_step(profile, unit)
    if not isinstance(profile, RedProfile):
        raise PolicyError(f"{profile!r} is not an ECN marking profile")
    out = []
    for r in compile_profile(profile):
        converted = depth.packets_to_depth(r.lo, r.hi, unit)
        if converted is not None:
            out.append(MarkRange(*converted, r.threshold))
    return out


def marking_probability(profile: MarkingProfile, qdepth: int, unit: depth.DepthUnit = depth.PACKETS) -> float:
    """The probability that an ECT packet finding ``qdepth`` (in ``unit``) queued is marked CE: the
    definition ``compile_marking`` reproduces (the oracle for switch tests)."""
    if isinstance(profile, StepProfile):
        return 1.0 if qdepth > profile.threshold(unit) else 0.0
    return mark_probability(profile, qdepth // unit.per_packet)
