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
