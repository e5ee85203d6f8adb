"""The sender's pacer: a token bucket filled at the congestion controller's pacing rate (DCQCN).

A chunk may leave while the bucket holds any tokens; its wire bytes are then taken out, so the bucket can
go negative by one packet and the long-run rate is the pacing rate. The bucket holds at most ``burst``
bytes: what the flow may send back to back after a pause. Time is passed in (tests use a fake clock).
"""

from __future__ import annotations


class TokenBucket:
    def __init__(self, now: float) -> None:
        self.tokens = 0.0  # bytes
        self.last_refill = now

    def refill(self, rate: float, burst: float, now: float) -> None:
        """Add ``rate`` (bytes/s) for the time since the last refill, capped at ``burst`` bytes."""
        self.tokens = min(burst, self.tokens + (now - self.last_refill) * rate)
        self.last_refill = now

    @property
    def may_send(self) -> bool:
        return self.tokens > 0

    def spend(self, nbytes: int) -> None:
        self.tokens -= nbytes

    def wait(self, rate: float) -> float:
        """Seconds until the bucket holds a token again."""
        return (-self.tokens + 1) / rate


class DeliveryRate:
    """Bytes acknowledged per second, measured over windows of at least an SRTT (and ``min_window``): what
    the path delivers, unlike cwnd / SRTT, which overshoots in slow start. 0 until the first window closes."""

    def __init__(self, min_window: float = 0.001) -> None:
        self.min_window = min_window
        self.rate = 0.0  # bytes/s
        self._start: float | None = None
        self._bytes = 0

    def restart(self, now: float) -> None:
        """A new window from ``now`` (a transfer starts: the idle time before it says nothing of the path)."""
        self._start, self._bytes = now, 0

    def on_ack(self, nbytes: int, now: float, srtt: float | None) -> None:
        if self._start is None:
            self.restart(now)
            return
        self._bytes += nbytes
        span = now - self._start
        if span >= max(srtt or 0.0, self.min_window):
            self.rate = self._bytes / span
            self.restart(now)
