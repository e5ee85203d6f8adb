"""The network decides how much of a push is withheld (approximate flow control, issue 25).

The sender keeps a congestion estimate per flow and before each push (or pull) withholds its least
important chunks up to ``withheld_share(policy, congestion, bound)`` of the bytes: nothing on a free link
(f(0) = 0), up to the tensor's loss bound on a congested one. Withheld chunks are not sent; their elements
go to the error-feedback residual (hosts/training/residual.py) and out with the next push. The switch's
selective drop (mlfc.policy.drop) stays the fast path for bursts shorter than a push.

Three congestion signals (``WithholdPolicy.signal``):

* ``telemetry`` (issue 46, opt-in until measured): *the flow's share of the excess, from the queue the
  network reports*. Each DATA packet carries the deepest egress queue on its path (bytes) and that port's
  rate class, and each ACK echoes them (docs/wire-format.md). A queue within ``room_bytes`` (RED's Kmin at
  the default packet size: below the marking threshold) or that drains within ``DRAIN_TARGET`` at the
  port's rate says the link has room: 0, whatever the delivery rate. Deeper, the link is oversubscribed,
  and a backlogged flow (one that alone would fill it) is served its delivery rate r of the link's rate R:
  the rest of its demand, 1 - r/R, is its share of the excess (three flows on a saturated link: 2/3 each,
  withheld up to the bound). R is the port's rate by its class (a lower bound within 9 %) or the flow's own
  highest delivery rate, whichever is larger, so r/R can only come out larger than the truth and the flow
  withholds less, never more. A transfer's sample is the mean over its ACKs (``echo_excess``), so a queue
  that stands all the push counts fully and a burst's queue a little. The network says what the host
  cannot infer: unlike ``share``, the busy test does not wait for an ECN mark (~6 % of ACKs on a
  saturated link under ECN-driven windows) and the link's rate is the switch's, not the flow's estimate.

* ``share`` (the third design, opt-in until measured): *the others' share of a standing queue*. An ECN
  mark says the bottleneck's queue stands above Kmin: the link is busy. While it is, the flow's delivery
  rate over its capacity (the highest delivery rate the flow has measured: its rate when it had the
  link) is the share of the link it gets, and one minus that is what other traffic takes. Alone, a flow
  that builds a queue is served at the link's rate (share 1: nothing withheld, however often it is
  marked); among three jobs it gets a third (the others' share 2/3: withhold up to the bound). Measured
  cause (docs/results.md): under window AIMD with ECN, mark rates sit near the threshold whether one flow
  or three fill the link (~1 % against ~6 % of ACKs), so a mark-rate signal withheld a quarter of what
  the bound allowed on a saturated link. A flow that never had the link to itself under-estimates its
  capacity, which reads as a larger share: it withholds less, never more.
* ``marks`` (the default, the second design, measured): the share of a push's chunks the network marked
  (ECN echo) or dropped.

One source of truth for f, the signals, the estimate and the choice of chunks: the transport, the worker
and the PS call these.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from mlfc.policy.depth import DEFAULT_PACKET_BYTES
from mlfc.policy.ecn import RedProfile
from mlfc.policy.loss import LOSS_BOUND_SCALE, is_protected
from mlfc.policy.priority import PolicyError
from mlfc.policy.telemetry import class_rate

SIGNALS = ("share", "marks", "telemetry")
# share and telemetry: c is the flow's share of the excess on the busy link, withheld as it is (capped by the
# bound); marks: a link that marks or drops 10 % of the chunks withholds 20 %, enough to take the push's own
# share of the overload off the queue
DEFAULT_GAIN = {"share": 1.0, "marks": 2.0, "telemetry": 1.0}

# The telemetry signal's room: a queue of at most RED's default Kmin (4 full-size packets: no ECN profile
# marks below it) leaves the link room, and so does one that drains within DRAIN_TARGET at the port's rate
# (20 us: about what a DCTCP marking threshold holds at 100 Gb/s).
ROOM_BYTES = RedProfile().kmin * DEFAULT_PACKET_BYTES
DRAIN_TARGET = 20e-6


@dataclass(frozen=True, slots=True)
class WithholdPolicy:
    """f(c) = min(1, gain * c) for a congestion estimate c in [0, 1] of ``signal`` (module doc); ``weight``
    is the EWMA's weight of the newest transfer; ``gain`` None: the signal's ``DEFAULT_GAIN``."""

    gain: float | None = None
    weight: float = 0.25
    signal: str = "marks"

    def __post_init__(self) -> None:
        if self.signal not in SIGNALS:
            raise PolicyError(f"signal={self.signal!r} must be one of {', '.join(SIGNALS)}")
        if self.gain is None:
            object.__setattr__(self, "gain", DEFAULT_GAIN[self.signal])
        if isinstance(self.gain, bool) or not (isinstance(self.gain, (int, float)) and 0 <= self.gain < math.inf):
            raise PolicyError(f"gain={self.gain!r} must be a finite number >= 0")
        if isinstance(self.weight, bool) or not (isinstance(self.weight, (int, float)) and 0 < self.weight <= 1):
            raise PolicyError(f"weight={self.weight!r} must be in (0, 1]")


def share_for(policy: WithholdPolicy, congestion: float) -> float:
    """f: the share of a push's bytes to withhold at ``congestion``, before the loss bound; f(0) = 0."""
    if not 0.0 <= congestion <= 1.0:
        raise PolicyError(f"congestion={congestion!r} must be in [0, 1]")
    return min(1.0, policy.gain * congestion)  # type: ignore[operator]  # gain is set in __post_init__


def withheld_share(policy: WithholdPolicy, congestion: float, bound: float) -> float:
    """min(bound, f(congestion)): the bound is the tensor's loss bound (the PS tolerates no more)."""
    if not 0.0 <= bound <= 1.0:
        raise PolicyError(f"bound={bound!r} must be in [0, 1]")
    return min(bound, share_for(policy, congestion))


def congestion_sample(
    policy: WithholdPolicy,
    chunks: int,
    marked: float,
    lost: int,
    own_share: float | None = None,
    excess: float | None = None,
) -> float:
    """One transfer's congestion signal (module doc). ``marked`` is the share of its ACKs that echoed ECN
    (one ACK covers several chunks, so a share, not a count); ``lost`` the chunks found lost (retransmitted
    or tolerated; withheld chunks are not losses); ``own_share`` the flow's mean delivery rate over its
    capacity at the marked ACKs (None: no marked ACK, no standing queue seen); ``excess`` the mean of
    ``echo_excess`` over its ACKs (None: none could be read). Drops count in all three."""
    if chunks <= 0:
        return 0.0
    dropped = lost / chunks
    if policy.signal == "marks":
        return min(1.0, max(0.0, marked, dropped))
    if policy.signal == "telemetry":
        return min(1.0, max(0.0, excess or 0.0, dropped))
    others = 0.0 if own_share is None else 1.0 - min(1.0, max(0.0, own_share))
    return min(1.0, max(0.0, others, dropped))


def link_rate(rate_class: int, capacity: float) -> float | None:
    """The bottleneck's rate in bytes/s: its rate class's lowest rate or the flow's ``capacity`` (its highest
    delivery rate, bytes/s), whichever is larger (both are lower bounds); None when neither is known."""
    by_class = class_rate(rate_class)
    rate = max(0.0 if by_class is None else by_class / 8, capacity)
    return rate if rate > 0 else None


def echo_excess(
    queue_bytes: int, rate_class: int, delivery_rate: float, capacity: float, room_bytes: int = ROOM_BYTES
) -> float | None:
    """One ACK's telemetry signal (module doc): 0 when the echoed queue leaves the link room (at most
    ``room_bytes``, or draining within DRAIN_TARGET at the link's rate), else the flow's share of the excess,
    1 - delivery_rate / link rate. None when it cannot be told: no rate known, or (a queue without room) no
    delivery rate measured yet."""
    rate = link_rate(rate_class, capacity)
    if rate is None:
        return None
    if queue_bytes <= max(room_bytes, DRAIN_TARGET * rate):
        return 0.0
    if delivery_rate <= 0:
        return None
    return 1.0 - min(1.0, delivery_rate / rate)


def own_share(delivery_rate: float, capacity: float) -> float | None:
    """The flow's share of a busy link: its delivery rate over its capacity (None before both are known)."""
    if delivery_rate <= 0 or capacity <= 0:
        return None
    return min(1.0, delivery_rate / capacity)


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


def repair_bound(withheld_bytes: int, nbytes: int) -> float:
    """The loss bound that covers exactly the chunks a sender chose to withhold (issue 46's third design,
    "shed by plan, repair the rest"): what the network drops beyond them is retransmitted instead of tolerated.
    In the wire's basis points, rounded up so the withheld bytes always fit (less than one basis point of the
    tensor more, under a chunk for tensors below 10,000 chunks); half a point more so that the float survives
    ``loss.to_basis_points``'s truncation."""
    if nbytes <= 0 or not 0 <= withheld_bytes <= nbytes:
        raise PolicyError(f"withheld_bytes={withheld_bytes!r} must be in [0, nbytes={nbytes!r}]")
    if withheld_bytes == 0:
        return 0.0
    points = -(-withheld_bytes * LOSS_BOUND_SCALE // nbytes)
    return min(1.0, (points + 0.5) / LOSS_BOUND_SCALE)
