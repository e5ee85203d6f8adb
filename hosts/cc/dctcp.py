"""DCTCP (RFC 8257): Reno's window, cut in proportion to the fraction of bytes that met congestion.

The sender (RFC 8257 section 3.3): every ACK tells the bytes it newly acknowledges and whether they were
CE-marked (``on_ecn_feedback``; the receiver's ECE flag, exact per chunk with ReceiverConfig.ack_on_ce_change,
RFC 8257 section 3.2). Per observation window, about one RTT of data (it ends once the bytes acknowledged
in it reach the window's cwnd at its start, or one smoothed RTT after it began, whichever is first),

    alpha <- (1 - g) * alpha + g * F,   F = bytes marked / bytes acknowledged in the window, g = 1/16;

on a congestion event from the echo (``on_ack(ece=True)``: the transport's recovery point passes at most one
per round trip, for data sent after the last response, as Linux's CWR state does)

    cwnd <- cwnd * (1 - alpha / 2)   (ssthresh too; at least 2 segments).

Alpha starts at 1 (Linux's dctcp_alpha_on_init: the first echoes halve, as Reno's would). Everything else is
Reno (mlfc.hosts.cc.reno): slow start and congestion avoidance with byte counting, a loss halves (RFC 8257
section 3.5: loss is handled as by standard TCP), an RTO collapses to one segment, the idle restart, a
tolerated drop's proportional cut (``on_mark``).

MLTCP (arXiv 2402.09589) as for Reno: F multiplies the congestion-avoidance increase (the paper's
``increase`` rule); under the bounded rules ``increase_scale`` / ``decrease_scale`` (mlfc.policy.mltcp)
scale the increase and the size of every cut, DCTCP's ``alpha / 2`` included, and slow start under
bounded-start. Alpha itself is the path's and is not scaled.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlfc.hosts.cc.base import Mltcp
from mlfc.hosts.cc.reno import Reno, RenoParams


@dataclass(frozen=True, slots=True)
class DctcpParams(RenoParams):
    g: float = 1 / 16  # RFC 8257 (and Linux, dctcp_shift_g = 4)
    initial_alpha: float = 1.0  # Linux's dctcp_alpha_on_init (1024 / 1024)

    def __post_init__(self) -> None:
        if not 0 < self.g <= 1:
            raise ValueError(f"g={self.g!r} must be in (0, 1]")
        if not 0 <= self.initial_alpha <= 1:
            raise ValueError(f"initial_alpha={self.initial_alpha!r} must be in [0, 1]")


class Dctcp(Reno):
    name = "dctcp"

    def __init__(self, mss: int, mltcp: Mltcp | None = None, params: DctcpParams | None = None) -> None:
        self.params: DctcpParams
        super().__init__(mss, mltcp, params or DctcpParams())
        self.alpha = self.params.initial_alpha
        self.srtt: float | None = None  # smoothed from the ACKs' RTT samples (the window's time limit)
        self.window_bytes = self._cwnd  # the observation window: it ends once this much is acknowledged in it,
        self.window_start: float | None = None  # or one srtt after it began (its first ACK)
        self.window_acked = 0
        self.window_marked = 0
        self.windows = 0  # observation windows ended (alpha updates)
        self.acked_bytes = 0  # totals of on_ecn_feedback: what alpha has been computed from
        self.marked_bytes = 0
        self.ecn_cuts = 0

    def on_ecn_feedback(self, acked_bytes: int, marked_bytes: int, now: float) -> None:
        if acked_bytes <= 0:
            return
        marked = min(max(marked_bytes, 0), acked_bytes)
        self.acked_bytes += acked_bytes
        self.marked_bytes += marked
        if self.window_start is None:
            self.window_start = now
        self.window_acked += acked_bytes
        self.window_marked += marked
        elapsed = self.srtt is not None and now - self.window_start >= self.srtt
        if self.window_acked >= self.window_bytes or elapsed:
            g = self.params.g
            self.alpha = (1 - g) * self.alpha + g * self.window_marked / self.window_acked
            self.windows += 1
            self.window_acked = self.window_marked = 0
            self.window_bytes = self._cwnd
            self.window_start = now

    def on_ack(self, acked_bytes: int, rtt: float | None, ece: bool, now: float) -> None:
        if rtt is not None:
            self.srtt = rtt if self.srtt is None else 0.875 * self.srtt + 0.125 * rtt
        if ece:
            self._ecn_cut()
            return
        super().on_ack(acked_bytes, rtt, False, now)

    def _ecn_cut(self) -> None:
        """RFC 8257 section 3.3: cwnd * (1 - alpha / 2); MLTCP's bounded rules scale the cut's size."""
        cut = self.alpha / 2 * self.decrease_scale()
        self.ssthresh = max(self._cwnd * (1 - cut), float(self.params.min_window * self.mss))
        self._cwnd = self.ssthresh
        self._clamp()
        self.ecn_cuts += 1

    def describe(self) -> dict[str, float]:
        return {**super().describe(), "alpha": self.alpha}
