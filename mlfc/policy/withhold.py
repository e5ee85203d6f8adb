"""The network decides how much of a push is withheld (approximate flow control, issue 25).

The worker's sender keeps a congestion estimate per job, an EWMA of the share of a push's chunks the
network marked (ECN echo) or dropped, and before each push withholds its least important chunks up to
``withheld_share(policy, congestion, bound)`` of the push's bytes: nothing on a free link (f(0) = 0), up
to the tensor's loss bound on a congested one. Withheld chunks are not sent; their elements go to the
error-feedback residual (hosts/training/residual.py) and out with the next push. The switch's selective
drop (mlfc.policy.drop) stays the fast path for bursts shorter than a push.

One source of truth for f, the estimate and the choice of chunks: the transport and the worker call these.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from mlfc.policy.loss import is_protected
from mlfc.policy.priority import PolicyError


@dataclass(frozen=True, slots=True)
class WithholdPolicy:
    """f(c) = min(1, gain * c) for a congestion estimate c in [0, 1]; ``weight`` is the EWMA's weight of
    the newest push. gain 2: a link that marks or drops 10 % of the chunks withholds 20 % (then capped by
    the loss bound), enough to take the push's own share of the overload off the queue."""

    gain: float = 2.0
    weight: float = 0.25

    def __post_init__(self) -> None:
        if isinstance(self.gain, bool) or not (isinstance(self.gain, (int, float)) and 0 <= self.gain < math.inf):
            raise PolicyError(f"gain={self.gain!r} must be a finite number >= 0")
        if isinstance(self.weight, bool) or not (isinstance(self.weight, (int, float)) and 0 < self.weight <= 1):
            raise PolicyError(f"weight={self.weight!r} must be in (0, 1]")


def share_for(policy: WithholdPolicy, congestion: float) -> float:
    """f: the share of a push's bytes to withhold at ``congestion``, before the loss bound; f(0) = 0."""
    if not 0.0 <= congestion <= 1.0:
        raise PolicyError(f"congestion={congestion!r} must be in [0, 1]")
    return min(1.0, policy.gain * congestion)


def withheld_share(policy: WithholdPolicy, congestion: float, bound: float) -> float:
    """min(bound, f(congestion)): the bound is the tensor's loss bound (the PS tolerates no more)."""
    if not 0.0 <= bound <= 1.0:
        raise PolicyError(f"bound={bound!r} must be in [0, 1]")
    return min(bound, share_for(policy, congestion))


def congestion_sample(chunks: int, marked: float, lost: int) -> float:
    """One push's congestion signal: the share of its chunks the network marked or dropped. ``marked`` is
    the share of the push's ACKs that echoed ECN (one ACK covers several chunks, so a share, not a count);
    ``lost`` the chunks found lost (retransmitted or tolerated; withheld chunks are not losses)."""
    if chunks <= 0:
        return 0.0
    return min(1.0, max(0.0, marked, lost / chunks))


@dataclass
class CongestionEstimate:
    """Per job: the EWMA of ``congestion_sample`` over the job's pushes (0 before the first)."""

    policy: WithholdPolicy
    value: float = 0.0

    def update(self, sample: float) -> float:
        if not 0.0 <= sample <= 1.0:
            raise PolicyError(f"congestion sample {sample!r} must be in [0, 1]")
        w = self.policy.weight
        self.value = (1 - w) * self.value + w * sample
        return self.value


def choose_withheld(
    classes: Sequence[int], sizes: Sequence[int], share: float, magnitudes: Sequence[float] | None = None
) -> list[int]:
    """The chunks to withhold, ascending: least important first (lowest class, then smallest magnitude,
    then the earlier chunk), while their bytes stay within ``share`` of the push's bytes. Protected
    chunks and the last chunk (it carries the end-of-tensor marker) are never withheld."""
    n = len(classes)
    if len(sizes) != n or (magnitudes is not None and len(magnitudes) != n):
        raise PolicyError(f"{n} classes, {len(sizes)} sizes, {n if magnitudes is None else len(magnitudes)} magnitudes")
    if not 0.0 <= share <= 1.0:
        raise PolicyError(f"share={share!r} must be in [0, 1]")
    total = sum(sizes)
    budget = math.floor(share * total)
    if budget <= 0:
        return []
    mags = magnitudes if magnitudes is not None else [0.0] * n
    order = sorted((i for i in range(n - 1) if not is_protected(classes[i])), key=lambda i: (classes[i], mags[i], i))
    out, used = [], 0
    for i in order:
        if used + sizes[i] > budget:
            break  # the next least important does not fit: stop (never skip to a more important one)
        used += sizes[i]
        out.append(i)
    return sorted(out)
