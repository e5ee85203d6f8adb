"""DCQCN reaction point (Zhu et al., SIGCOMM'15): a rate-based controller driven by CNPs.

On a CNP: ``R_T = R_C; R_C = R_C * (1 - alpha / 2); alpha = (1 - g) * alpha + g`` and the increase
timer and byte counter restart. Without a CNP for K, ``alpha = (1 - g) * alpha``. Rate-increase events
come from a timer (every T) and a byte counter (every B bytes sent); with T_count, BC the number of
events of each kind since the last cut:

* fast recovery while max(T_count, BC) <= F:  ``R_C = (R_T + R_C) / 2``
* hyper increase when min(T_count, BC) > F:    ``R_T += (min - F) * R_HAI``, then ``R_C = (R_T + R_C) / 2``
* otherwise additive increase:                 ``R_T += R_AI``,             then ``R_C = (R_T + R_C) / 2``

rates capped at the line rate.

At most one rate cut per ``N`` (the paper's CNP interval, 50 us, scaled like K and T below; NICs have
the same knob as a rate-reduction monitor period): CNPs and losses arriving within N of the last cut
are counted but change nothing. Without it, a 64-packet queue draining at 1,500 packets/s keeps
delivering CE-marked packets for ~40 ms after the sender has already cut, the receiver's 50 us CNP
spacing never binds (one packet per 0.7 ms), and each of those CNPs cuts again, down to the minimum
rate, from which only R_AI steps climb back: the flow spends most of its communication phase there.

MLTCP (mlfc's rule; the paper, arXiv 2402.09589, scales only ``F * R_AI`` and ``F * R_HAI``): a flow
further into its iteration reacts F times less to congestion (in log-rate terms) and grows F times
faster, so it wins the contention within one communication phase:

* cut:            ``R_C = R_C * (1 - alpha / 2) ** (1 / F)``
* increases:      ``F * R_AI``, ``F * R_HAI``; fast recovery keeps DCQCN's halving (scaling it by F
  too, ``1 - 2 ** -F`` of the gap, overflowed the lab's queue: docs/results.md)

F = 1 is exactly DCQCN. Why not the increases alone: here a communication phase lasts ~10 increase
periods and every CNP restarts fast recovery, which is F-free, so an F on R_AI changes a flow's rate by
under 1 % per phase (docs/transport.md).

Defaults: g = 1/256, K = T = 55 us, B = 10 MB, F = 5 (paper, at 40 Gb/s). Here the line rate is lower
(and a Python sender's control loop slower), so time scales with it: K and T are multiplied by
40 Gb/s / line_rate, which keeps a timer period at the same number of packet times as in the paper
(~180 MTU packets: 2.2 ms at 1 Gb/s); B stays 10 MB, also the same number of packets; R_AI = line / 1000
(the paper's 40 Mb/s at 40 Gb/s); N = 50 us x the same factor. R_HAI = 10 * R_AI is our choice
(unverified; sweep it). Without the
scaling, fast recovery would restore the rate within ~0.3 ms, before a Python sender even sees the next
CNP. A loss (this transport runs over lossy IP, unlike RoCE) is handled like a CNP; an RTO also drops
the rate to ``min_rate``. The transport calls ``on_timer`` whenever its loop runs; timer events that
elapsed in between are applied in order (at most ``max_catch_up`` per call, so a descheduled process
does not jump to line rate).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mlfc.hosts.cc.base import CongestionControl, Mltcp

PAPER_LINE_RATE = 40e9


@dataclass(frozen=True, slots=True)
class DcqcnParams:
    line_rate: float = 1e9  # bits/s
    g: float = 1 / 256
    alpha_timer: float | None = None  # K, s; None: 55 us * time_scale
    increase_timer: float | None = None  # T, s; None: 55 us * time_scale
    byte_counter: float = 10e6  # B, bytes
    fast_recovery_steps: int = 5  # F
    rate_ai: float | None = None  # bits/s; None: line_rate / 1000
    rate_hai: float | None = None  # bits/s; None: 10 * rate_ai
    min_rate: float | None = None  # bits/s; None: line_rate / 1000
    cut_interval: float | None = None  # N, s: at most one rate cut per N; None: 50 us * time_scale
    max_catch_up: int = 256
    window_segments: int = 4096  # in-flight cap so the transport's bookkeeping stays bounded

    @property
    def time_scale(self) -> float:
        return max(1.0, PAPER_LINE_RATE / self.line_rate)

    @property
    def k(self) -> float:
        return self.alpha_timer if self.alpha_timer is not None else 55e-6 * self.time_scale

    @property
    def t(self) -> float:
        return self.increase_timer if self.increase_timer is not None else 55e-6 * self.time_scale

    @property
    def n(self) -> float:
        return self.cut_interval if self.cut_interval is not None else 50e-6 * self.time_scale

    @property
    def b(self) -> float:
        return self.byte_counter

    @property
    def r_ai(self) -> float:
        return self.rate_ai if self.rate_ai is not None else self.line_rate / 1000

    @property
    def r_hai(self) -> float:
        return self.rate_hai if self.rate_hai is not None else 10 * self.r_ai

    @property
    def r_min(self) -> float:
        return self.min_rate if self.min_rate is not None else self.line_rate / 1000


class Dcqcn(CongestionControl):
    name = "dcqcn"

    def __init__(
        self, mss: int, mltcp: Mltcp | None = None, params: DcqcnParams | None = None, now: float = 0.0
    ) -> None:
        super().__init__(mss, mltcp)
        self.params = p = params or DcqcnParams()
        if not (p.line_rate > 0 and math.isfinite(p.line_rate)):
            raise ValueError(f"line_rate={p.line_rate!r} must be a positive number (bits/s)")
        self.rc = p.line_rate  # current rate, bits/s; flows start at line rate (paper)
        self.rt = p.line_rate  # target rate
        self.alpha = 1.0
        self.t_count = 0
        self.bc_count = 0
        self.bytes_since_event = 0.0
        self.last_alpha_update = now
        self.last_increase = now
        self.cnps = 0
        self.ignored_cuts = 0  # CNPs/losses within N of the last cut
        self.last_cut: float | None = None

    @property
    def cwnd(self) -> float:
        return float(self.params.window_segments * self.mss)

    @property
    def pacing_rate(self) -> float:
        return self.rc / 8

    def _cut(self, now: float) -> None:
        p = self.params
        self.last_cut = now
        self.rt = self.rc
        self.rc = max(p.r_min, self.rc * (1 - self.alpha / 2) ** (1 / self.factor()))
        self.alpha = (1 - p.g) * self.alpha + p.g
        self.t_count = 0
        self.bc_count = 0
        self.bytes_since_event = 0.0
        self.last_alpha_update = now
        self.last_increase = now

    def _may_cut(self, now: float) -> bool:
        if self.last_cut is not None and now - self.last_cut < self.params.n:
            self.ignored_cuts += 1
            return False
        return True

    def on_cnp(self, now: float) -> None:
        self.cnps += 1
        if self._may_cut(now):
            self._cut(now)

    def on_mark(self, fraction: float, now: float) -> None:
        self.on_cnp(now)  # a switch drop within the bound: DCQCN's own congestion notification

    def on_loss(self, now: float) -> None:
        if self._may_cut(now):
            self._cut(now)

    def on_timeout(self, now: float) -> None:
        self._cut(now)
        self.rc = self.params.r_min

    def on_ack(self, acked_bytes: int, rtt: float | None, ece: bool, now: float) -> None:
        pass  # rate-based: reacts to CNPs (ECE is for window-based controllers)

    def bytes_to_event(self) -> float:
        return self.params.b - self.bytes_since_event

    def on_sent(self, nbytes: int, now: float) -> None:
        self.bytes_since_event += nbytes
        b = self.params.b
        while self.bytes_since_event >= b:
            self.bytes_since_event -= b
            self.bc_count += 1
            self._increase()

    def on_timer(self, now: float) -> None:
        p = self.params
        n = int((now - self.last_alpha_update) / p.k)
        if n > 0:
            self.alpha *= (1 - p.g) ** n
            self.last_alpha_update += n * p.k
        n = int((now - self.last_increase) / p.t)
        if n > 0:
            self.last_increase += n * p.t
            for _ in range(min(n, p.max_catch_up)):
                self.t_count += 1
                self._increase()

    def _increase(self) -> None:
        p = self.params
        f_steps = p.fast_recovery_steps
        f = self.factor()  # MLTCP's F (not the fast-recovery count)
        if max(self.t_count, self.bc_count) > f_steps:
            low = min(self.t_count, self.bc_count)
            if low > f_steps:
                self.rt += f * (low - f_steps) * p.r_hai
            else:
                self.rt += f * p.r_ai
            self.rt = min(self.rt, p.line_rate)
        self.rc = min((self.rt + self.rc) / 2, p.line_rate)

    def describe(self) -> dict[str, float]:
        return {"cwnd": -1.0, "rate": self.rc / 8, "rt": self.rt / 8, "alpha": self.alpha}
