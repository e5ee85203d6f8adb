"""Reno: AIMD on a byte-counted window (RFC 5681, with appropriate byte counting, RFC 3465).

Defaults and sources: initial window 10 segments (RFC 6928); slow start adds the acknowledged bytes;
congestion avoidance adds ``F * mss * acked / cwnd`` per ACK, i.e. ``cwnd += F / cwnd`` segments per
acknowledged segment, F = 1 without MLTCP; a loss or an ECN echo halves the window (RFC 5681,
RFC 3168); an RTO collapses it to one segment (RFC 5681 loss window); after more than an RTO idle
the window restarts from the initial window (RFC 5681 section 4.1). MLTCP scales the
congestion-avoidance increase (arXiv 2402.09589) and, under its bounded rule, the size of the cut
(mlfc.policy.mltcp.mltcp_scales) and, under bounded-start, slow start's growth; the RTO's collapse is
unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mlfc.hosts.cc.base import CongestionControl, Mltcp


@dataclass(frozen=True, slots=True)
class RenoParams:
    initial_window: int = 10  # segments, RFC 6928
    beta: float = 0.5  # multiplicative decrease, RFC 5681
    min_window: int = 2  # segments, RFC 5681's floor for ssthresh
    max_window: int = 1024  # segments; bounds memory and the receiver's socket buffer


class Reno(CongestionControl):
    name = "reno"

    def __init__(self, mss: int, mltcp: Mltcp | None = None, params: RenoParams | None = None) -> None:
        super().__init__(mss, mltcp)
        self.params = p = params or RenoParams()
        self._cwnd = float(p.initial_window * mss)
        self.ssthresh = math.inf

    @property
    def cwnd(self) -> float:
        return self._cwnd

    @property
    def in_slow_start(self) -> bool:
        return self._cwnd < self.ssthresh

    def _clamp(self) -> None:
        self._cwnd = max(float(self.mss), min(self._cwnd, float(self.params.max_window * self.mss)))

    def on_ack(self, acked_bytes: int, rtt: float | None, ece: bool, now: float) -> None:
        if ece:
            self._decrease()
            return
        if acked_bytes <= 0:
            return
        if self.in_slow_start:
            scale = self.slow_start_scale()
            spent = min(float(acked_bytes), (self.ssthresh - self._cwnd) / scale)  # acked bytes slow start uses
            self._cwnd += spent * scale
            acked_bytes -= int(spent)
            if acked_bytes <= 0:
                self._clamp()
                return
        self._cwnd += self.increase_scale() * self.mss * acked_bytes / self._cwnd
        self._clamp()

    def _decrease(self) -> None:
        beta = 1 - (1 - self.params.beta) * self.decrease_scale()
        self.ssthresh = max(self._cwnd * beta, float(self.params.min_window * self.mss))
        self._cwnd = self.ssthresh
        self._clamp()

    def on_loss(self, now: float) -> None:
        self._decrease()

    def on_mark(self, fraction: float, now: float) -> None:
        # DCTCP's cut with the dropped share as alpha: cwnd * (1 - fraction / 2), at most the loss halving
        cut = 1 - (1 - self.params.beta) * min(1.0, max(0.0, fraction)) * self.decrease_scale()
        self.ssthresh = max(self._cwnd * cut, float(self.params.min_window * self.mss))
        self._cwnd = self.ssthresh
        self._clamp()

    def on_timeout(self, now: float) -> None:
        self.ssthresh = max(self._cwnd * self.params.beta, float(self.params.min_window * self.mss))
        self._cwnd = float(self.mss)

    def on_idle_restart(self, now: float) -> None:
        # RFC 5681 4.1: restart from min(IW, cwnd). ssthresh keeps 3/4 of the old window (as Linux's
        # tcp_cwnd_restart does), so slow start climbs back quickly to where the path was.
        self.ssthresh = max(self.ssthresh, 0.75 * self._cwnd)
        self._cwnd = min(self._cwnd, float(self.params.initial_window * self.mss))
