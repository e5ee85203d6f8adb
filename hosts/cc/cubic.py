"""CUBIC (RFC 9438, formerly RFC 8312), window in segments internally.

W_cubic(t) = C * (t - K)^3 + W_max with K = cbrt((W_max - cwnd_epoch) / C), t the time since the last
congestion event. Per acknowledged segment in congestion avoidance the window moves toward
target = clamp(W_cubic(t + RTT), cwnd, 1.5 * cwnd) by ``(target - cwnd) / cwnd``; the Reno-friendly
estimate W_est grows by ``alpha_cubic * acked / cwnd`` with alpha_cubic = 3 (1 - beta) / (1 + beta),
and cwnd follows W_est when W_cubic is below it. Defaults: C = 0.4, beta = 0.7 (RFC 9438 section 4.x),
fast convergence on (section 4.7), initial window 10 segments (RFC 6928).

MLTCP scales the growth by F: both the step toward W_cubic and W_est's additive increase are
multiplied by F (the paper's ``cnt = cnt / F``; arXiv 2402.09589); under MLTCP's bounded rule by
F / F(1), and the cut (1 - beta) by F(0) / F (mlfc.policy.mltcp.mltcp_scales). 1 without MLTCP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mlfc.hosts.cc.base import CongestionControl, Mltcp


@dataclass(frozen=True, slots=True)
class CubicParams:
    c: float = 0.4  # RFC 9438
    beta: float = 0.7  # RFC 9438
    fast_convergence: bool = True  # RFC 9438 section 4.7
    initial_window: int = 10  # segments, RFC 6928
    min_window: int = 2  # segments
    max_window: int = 4096  # segments


def w_cubic(t: float, w_max: float, k: float, c: float = 0.4) -> float:
    """RFC 9438 eq. 1, in segments."""
    return c * (t - k) ** 3 + w_max


def cubic_k(w_max: float, cwnd_epoch: float, c: float = 0.4) -> float:
    """RFC 9438 eq. 2: the time W_cubic takes to climb back to W_max."""
    return math.copysign(abs(w_max - cwnd_epoch) ** (1 / 3), w_max - cwnd_epoch) / c ** (1 / 3)


class Cubic(CongestionControl):
    name = "cubic"

    def __init__(self, mss: int, mltcp: Mltcp | None = None, params: CubicParams | None = None) -> None:
        super().__init__(mss, mltcp)
        self.params = p = params or CubicParams()
        self.alpha_cubic = 3 * (1 - p.beta) / (1 + p.beta)
        self.w = float(p.initial_window)  # cwnd in segments
        self.ssthresh = math.inf
        self.w_max = 0.0
        self.w_last_max = 0.0
        self.k = 0.0
        self.w_est = 0.0
        self.epoch_start: float | None = None
        self.last_rtt = 0.0

    @property
    def cwnd(self) -> float:
        return self.w * self.mss

    def _clamp(self) -> None:
        self.w = max(1.0, min(self.w, float(self.params.max_window)))

    def _start_epoch(self, now: float) -> None:
        self.epoch_start = now
        self.k = cubic_k(self.w_max, self.w, self.params.c) if self.w_max > self.w else 0.0
        if self.w_max < self.w:
            self.w_max = self.w  # leaving slow start without a loss: the curve starts flat here
        self.w_est = self.w

    def on_ack(self, acked_bytes: int, rtt: float | None, ece: bool, now: float) -> None:
        if rtt is not None:
            self.last_rtt = rtt
        if ece:
            self._congestion_event(now)
            return
        segs = acked_bytes / self.mss
        if segs <= 0:
            return
        if self.w < self.ssthresh:
            scale = self.slow_start_scale()  # MLTCP's bounded-start rule (mlfc.policy.mltcp)
            spent = min(segs, (self.ssthresh - self.w) / scale)
            self.w += spent * scale
            segs -= spent
            if segs <= 0:
                self._clamp()
                return
        if self.epoch_start is None:
            self._start_epoch(now)
        self.w = self.w + self._ca_increase(segs, now)
        self._clamp()

    def _ca_increase(self, segs: float, now: float) -> float:
        """Window increase (segments) for ``segs`` acknowledged segments in congestion avoidance."""
        p = self.params
        f = self.increase_scale()
        t = now - self.epoch_start
        self.w_est += f * self.alpha_cubic * segs / self.w
        if w_cubic(t, self.w_max, self.k, p.c) < self.w_est:
            return max(0.0, self.w_est - self.w)  # Reno-friendly region
        target = min(max(w_cubic(t + self.last_rtt, self.w_max, self.k, p.c), self.w), 1.5 * self.w)
        return f * (target - self.w) * segs / self.w

    def _congestion_event(self, now: float) -> None:
        p = self.params
        if p.fast_convergence and self.w < self.w_last_max:
            self.w_last_max = self.w
            self.w_max = self.w * (1 + p.beta) / 2
        else:
            self.w_last_max = self.w
            self.w_max = self.w
        beta = 1 - (1 - p.beta) * self.decrease_scale()  # MLTCP's bounded rule cuts a flow ahead less
        self.w = max(self.w * beta, float(p.min_window))
        self.ssthresh = self.w
        self.epoch_start = now
        self.k = cubic_k(self.w_max, self.w, p.c)
        self.w_est = self.w

    def on_loss(self, now: float) -> None:
        self._congestion_event(now)

    def on_timeout(self, now: float) -> None:
        self._congestion_event(now)
        self.w = 1.0
        self.epoch_start = None  # RFC 9438 4.8: a new epoch starts when congestion avoidance resumes

    def on_idle_restart(self, now: float) -> None:
        # As Reno (RFC 5681 4.1); the cubic curve is not charged for the idle time: a new epoch
        # starts when congestion avoidance resumes (what Linux does on CA_EVENT_TX_START).
        self.ssthresh = max(self.ssthresh, 0.75 * self.w)
        self.w = min(self.w, float(self.params.initial_window))
        self.epoch_start = None
