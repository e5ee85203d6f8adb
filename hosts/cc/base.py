"""The congestion-controller interface and how a controller gets MLTCP's F.

Every controller sees the same events from the transport, with the time passed in (so unit tests
drive them with a fake clock):

* ``on_sent(nbytes, now)``: new data left the host (DCQCN's byte counter);
* ``on_ack(acked_bytes, rtt, ece, now)``: data newly acknowledged; ``ece`` is True only for a *new*
  ECN congestion event (the transport allows one window reduction per round trip, as RFC 3168 does);
* ``on_ecn_feedback(acked_bytes, marked_bytes, now)``: every ACK that newly acknowledges data, before
  ``on_ack``: ``marked_bytes`` of them echoed as CE-marked (all or none: the ACK's ECE flag, exact per
  chunk with the receiver's ack_on_ce_change); DCTCP's marked fraction, ignored by the others;
* ``on_loss(now)``: a new loss event (again at most one per round trip), ``on_timeout(now)``: an RTO;
* ``on_cnp(now)``: a DCQCN congestion notification packet arrived;
* ``on_timer(now)``: called whenever the transport's loop runs, for time-driven algorithms;
* ``on_idle_restart(now)``: sending resumes after more than an RTO without data in flight.

A controller exposes ``cwnd`` (bytes the transport may have in flight) and ``pacing_rate``
(bytes/s, or None when the flow is only window-limited).

MLTCP (arXiv 2402.09589) multiplies the *additive increase* by F(bytes_ratio). The controller does
not track progress itself: ``Mltcp`` pairs the policy's parameters with a source of bytes_ratio (the
transport's mlfc.hosts.progress.IterationProgress); a controller built without one uses F = 1, i.e. the
plain algorithm.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Protocol

from mlfc.policy.mltcp import MltcpParams, mltcp_factor, mltcp_scales, mltcp_slow_start_scale


class RatioSource(Protocol):
    """Where MLTCP reads bytes_ratio from (mlfc.hosts.progress.IterationProgress for a transport flow)."""

    @property
    def ratio(self) -> float: ...


@dataclass(frozen=True, slots=True)
class Mltcp:
    """MLTCP for one controller: F = mltcp_factor(progress.ratio, params), read whenever F is needed."""

    params: MltcpParams
    progress: RatioSource

    def factor(self) -> float:
        return mltcp_factor(self.progress.ratio, self.params)

    def scales(self) -> tuple[float, float]:
        """(increase multiplier, decrease multiplier) under the params' rule (mlfc.policy.mltcp)."""
        return mltcp_scales(self.progress.ratio, self.params)

    def slow_start_scale(self) -> float:
        return mltcp_slow_start_scale(self.progress.ratio, self.params)


class CongestionControl(ABC):
    """Base class: ``mss`` is the transport's chunk size on the wire (bytes)."""

    name = "base"

    def __init__(self, mss: int, mltcp: Mltcp | None = None) -> None:
        if mss <= 0:
            raise ValueError(f"mss={mss!r} must be > 0")
        self.mss = mss
        self.mltcp = mltcp

    def factor(self) -> float:
        """MLTCP's F; 1 when the augmentation is off."""
        return 1.0 if self.mltcp is None else self.mltcp.factor()

    def increase_scale(self) -> float:
        """What MLTCP multiplies the window's growth by (F under the paper's rule); 1 when off."""
        return 1.0 if self.mltcp is None else self.mltcp.scales()[0]

    def decrease_scale(self) -> float:
        """What MLTCP multiplies the size of a multiplicative cut by (1 under the paper's rule)."""
        return 1.0 if self.mltcp is None else self.mltcp.scales()[1]

    def slow_start_scale(self) -> float:
        """What MLTCP multiplies slow start's growth by (1 but under the bounded-start rule)."""
        return 1.0 if self.mltcp is None else self.mltcp.slow_start_scale()

    @property
    @abstractmethod
    def cwnd(self) -> float:
        """Bytes allowed in flight (math.inf when the controller does not limit it)."""

    @property
    def pacing_rate(self) -> float | None:
        """Bytes per second, or None when not paced."""
        return None

    def on_sent(self, nbytes: int, now: float) -> None:  # noqa: B027 - optional hook
        pass

    def bytes_to_event(self) -> float:
        """Sent bytes until on_sent next acts (reads F, changes the rate); inf for a controller that
        never does. Lets the sender count a batch in steps between such events (count_sent)."""
        return math.inf

    @abstractmethod
    def on_ack(self, acked_bytes: int, rtt: float | None, ece: bool, now: float) -> None: ...

    @abstractmethod
    def on_loss(self, now: float) -> None: ...

    @abstractmethod
    def on_timeout(self, now: float) -> None: ...

    def on_ecn_feedback(self, acked_bytes: int, marked_bytes: int, now: float) -> None:  # noqa: B027 - DCTCP's
        """An ACK newly acknowledged ``acked_bytes``, ``marked_bytes`` of them CE-marked on the way (the ACK's
        ECE flag: 0 or all of them). Every such ACK, echo or not, before ``on_ack``; the once-per-round-trip
        congestion event is ``on_ack``'s ``ece``."""

    def on_mark(self, fraction: float, now: float) -> None:
        """A ``fraction`` (0..1] of the window was dropped by the switch within the loss bound (a congestion
        mark, not an overflow: SenderConfig.tolerated_loss "proportional"). Controllers without a cut of
        their own react as to one ECN echo."""
        self.on_ack(0, None, True, now)

    def on_cnp(self, now: float) -> None:  # noqa: B027 - window-based controllers react to ECE instead
        pass

    def on_timer(self, now: float) -> None:  # noqa: B027 - optional hook
        pass

    def on_idle_restart(self, now: float) -> None:  # noqa: B027 - rate-based controllers keep their rate
        """The flow sent nothing for longer than an RTO and is about to send again: its window no
        longer reflects the path (RFC 5681 section 4.1; Linux's tcp_slow_start_after_idle)."""

    def describe(self) -> dict[str, float]:
        """State for stats timelines."""
        rate = self.pacing_rate
        return {"cwnd": self.cwnd if math.isfinite(self.cwnd) else -1.0, "rate": -1.0 if rate is None else rate}
