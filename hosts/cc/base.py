"""The congestion-controller interface and MLTCP's per-flow progress tracker.

Every controller sees the same events from the transport, with the time passed in (so unit tests
drive them with a fake clock):

* ``on_sent(nbytes, now)``: new data left the host (DCQCN's byte counter);
* ``on_ack(acked_bytes, rtt, ece, now)``: data newly acknowledged; ``ece`` is True only for a *new*
  ECN congestion event (the transport allows one window reduction per round trip, as RFC 3168 does);
* ``on_loss(now)``: a new loss event (again at most one per round trip), ``on_timeout(now)``: an RTO;
* ``on_cnp(now)``: a DCQCN congestion notification packet arrived;
* ``on_timer(now)``: called whenever the transport's loop runs, for time-driven algorithms;
* ``on_idle_restart(now)``: sending resumes after more than an RTO without data in flight.

A controller exposes ``cwnd`` (bytes the transport may have in flight) and ``pacing_rate``
(bytes/s, or None when the flow is only window-limited).

MLTCP (arXiv 2402.09589) multiplies the *additive increase* by F(bytes_ratio). ``MltcpTracker``
keeps bytes_ratio for one flow; a controller built without a tracker uses F = 1, i.e. the plain
algorithm.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

from mlfc.policy.mltcp import EWMA_WEIGHT, MltcpParams, bytes_ratio, mltcp_factor


class MltcpTracker:
    """bytes_ratio = bytes sent in the current iteration / bytes per iteration, and F of it.

    Bytes per iteration: the ``expected_bytes`` the training loop declared for this iteration, if any
    (it knows its model size), else an EWMA of the bytes of earlier iterations. In the first iteration
    without a declaration there is no estimate yet and bytes_ratio is 0 (F = intercept).

    An iteration starts with ``start_iteration()`` (the training loop's explicit call), when the
    iteration number given to ``note_iteration`` changes, or after an idle gap: no new data for
    ``idle_gap`` seconds (choose it much longer than the RTT and than gaps between tensors of one
    iteration; None disables detection).
    """

    def __init__(
        self,
        params: MltcpParams | None = None,
        *,
        idle_gap: float | None = 0.1,
        ewma_weight: float = EWMA_WEIGHT,
    ) -> None:
        if idle_gap is not None and not idle_gap > 0:
            raise ValueError(f"idle_gap={idle_gap!r} must be > 0 or None")
        if not 0 < ewma_weight <= 1:
            raise ValueError(f"ewma_weight={ewma_weight!r} must be in (0, 1]")
        self.params = params or MltcpParams()
        self.idle_gap = idle_gap
        self.ewma_weight = ewma_weight
        self.bytes_this_iteration = 0
        self.bytes_per_iteration_ewma: float | None = None
        self.expected_bytes: int | None = None
        self.iterations_started = 0
        self.iteration: int | None = None
        self._last_sent: float | None = None

    def start_iteration(self, expected_bytes: int | None = None) -> None:
        """Close the current iteration (feeding the EWMA) and start a new one."""
        if expected_bytes is not None and expected_bytes <= 0:
            raise ValueError(f"expected_bytes={expected_bytes!r} must be > 0")
        done = self.bytes_this_iteration
        if done > 0:
            if self.bytes_per_iteration_ewma is None:
                self.bytes_per_iteration_ewma = float(done)
            else:
                w = self.ewma_weight
                self.bytes_per_iteration_ewma = (1 - w) * self.bytes_per_iteration_ewma + w * done
        self.bytes_this_iteration = 0
        self.expected_bytes = expected_bytes
        self.iterations_started += 1

    def note_iteration(self, iteration: int) -> None:
        """The training loop's iteration number for the data about to be sent; a change starts an iteration."""
        if self.iteration is not None and iteration != self.iteration:
            self.start_iteration()
        self.iteration = iteration

    def on_sent(self, nbytes: int, now: float) -> None:
        """New (not retransmitted) application bytes sent."""
        last = self._last_sent
        if last is not None and self.idle_gap is not None and now - last > self.idle_gap:
            self.start_iteration()
        self._last_sent = now
        self.bytes_this_iteration += nbytes

    @property
    def bytes_per_iteration(self) -> float:
        if self.expected_bytes is not None:
            return float(self.expected_bytes)
        return self.bytes_per_iteration_ewma or 0.0

    @property
    def ratio(self) -> float:
        return bytes_ratio(self.bytes_this_iteration, self.bytes_per_iteration)

    @property
    def factor(self) -> float:
        return mltcp_factor(self.ratio, self.params)


class CongestionControl(ABC):
    """Base class: ``mss`` is the transport's chunk size on the wire (bytes)."""

    name = "base"

    def __init__(self, mss: int, mltcp: MltcpTracker | None = None) -> None:
        if mss <= 0:
            raise ValueError(f"mss={mss!r} must be > 0")
        self.mss = mss
        self.mltcp = mltcp

    def factor(self) -> float:
        """MLTCP's F for the additive increase; 1 when the augmentation is off."""
        return 1.0 if self.mltcp is None else self.mltcp.factor

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

    @abstractmethod
    def on_ack(self, acked_bytes: int, rtt: float | None, ece: bool, now: float) -> None: ...

    @abstractmethod
    def on_loss(self, now: float) -> None: ...

    @abstractmethod
    def on_timeout(self, now: float) -> None: ...

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
