"""The switch on a virtual clock: pipeline + traffic manager without sockets or wall time.

Tests use it to make queueing behaviour exact and fast (a 1 packet/s queue drains in no time), and it
is the same code the real switch runs, only driven by ``send(frame, port, at=t)`` instead of sockets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from mlfc.refswitch import pipeline as pl
from mlfc.refswitch.state import SwitchState
from mlfc.refswitch.tables import Tables
from mlfc.refswitch.tm import SHARED, TrafficManager


@dataclass(slots=True)
class Emitted:
    time: float
    decision: pl.Decision
    sent_at: float
    tag: object = None
    size: int = 0  # bytes the traffic manager counted
    enq_bytes: int = 0  # the queue's depth in bytes when the packet arrived / when it left (tm.Departure)
    deq_bytes: int = 0


@dataclass
class VirtualSwitch:
    tables: Tables = field(default_factory=Tables)
    state: SwitchState = field(default_factory=SwitchState)
    tm: TrafficManager = field(default_factory=lambda: TrafficManager(8, SHARED))
    rng: pl.RandomSource = field(default_factory=lambda: pl.default_rng(1))
    now: float = 0.0
    emitted: list[Emitted] = field(default_factory=list)
    dropped: list[tuple[float, pl.Decision, object]] = field(default_factory=list)

    def send(self, frame: bytes, port: int, at: float | None = None, tag: object = None) -> pl.Decision | None:
        """Packet ``frame`` arrives on ``port`` at time ``at`` (default: now). Returns the decision if
        it was dropped before queueing, else None (see ``emitted`` for what left and when)."""
        if at is not None:
            self.run_until(at)
        ing = pl.ingress(frame, port, self.tables, self.state)
        if ing.egress_port is None:
            dec = pl.dropped_decision(ing)
            self.dropped.append((self.now, dec, tag))
            return dec
        accepted, _ = self.tm.enqueue(ing.egress_port, ing.priority, (ing, self.now, tag), self.now, ing.length)
        if not accepted:
            reason = pl.DROP_QUEUE_FULL if ing.priority < self.tm.num_priorities else pl.DROP_PRIORITY_RANGE
            dec = pl.dropped_decision(ing, reason)
            self.dropped.append((self.now, dec, tag))
            return dec
        return None

    def run_until(self, t: float) -> None:
        while (d := self.tm.dequeue(t)) is not None:
            ing, sent_at, tag = d.item
            dec = pl.egress(ing, d.enq_depth, d.deq_depth, self.tables, self.state, self.rng)
            self.emitted.append(Emitted(d.time, dec, sent_at, tag, d.size, d.enq_bytes, d.deq_bytes))
        self.now = max(self.now, t)

    def run_all(self) -> None:
        """Let every queued packet leave."""
        while not math.isinf(t := self.tm.next_event()):
            self.run_until(t)
