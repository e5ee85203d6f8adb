"""The traffic manager: per port, ``num_priorities`` strict-priority FIFO queues (highest served first).

Two rate models:

* ``shared`` (a real switch): ONE rate limiter per port shared by all its priority queues. Whenever
  the port may send, the highest non-empty queue goes, so a busy high class starves the lower ones.
  A per-queue rate (``set_rate(r, port, prio)``) additionally caps that one queue. Shaping happens
  at dequeue, so a rate change applies to packets already queued.
* ``per-queue`` (BMv2's ``QueueingLogicPriRL``): every priority queue has its own limiter and there
  is no port limit. As in BMv2, a packet's departure time is fixed when it is enqueued
  (``max(now, previous + 1/rate)``), so a later rate change does not move packets already queued.

Depths are per priority queue in packets (BMv2 default 64); a full queue tail-drops. A rate of 0
means unlimited. Time is passed in (``now``), so tests can drive the queues on a virtual clock and
the switch on ``time.monotonic()``; departures come out in the order of their (virtual) times, as
BMv2's egress would emit them with an infinitely fast egress pipeline.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

SHARED = "shared"
PER_QUEUE = "per-queue"
QUEUE_MODES = (SHARED, PER_QUEUE)
DEFAULT_DEPTH = 64  # BMv2's default queue depth (packets)


class QueueConfigError(ValueError):
    pass


@dataclass(slots=True)
class Queued:
    item: Any
    enq_time: float
    enq_depth: int
    send_time: float  # per-queue mode: fixed at enqueue; shared mode: equals enq_time


@dataclass(slots=True)
class PriorityQueue:
    capacity: int
    rate_pps: int = 0
    last_departure: float = -math.inf  # shared mode: for this queue's own cap
    last_sent: float = -math.inf  # per-queue mode: departure time given to the last enqueued packet
    packets: deque = field(default_factory=deque)

    @property
    def delay(self) -> float:
        return 1.0 / self.rate_pps if self.rate_pps > 0 else 0.0


@dataclass(slots=True)
class Departure:
    port: int
    priority: int
    item: Any
    time: float  # logical departure time
    enq_depth: int
    deq_depth: int


@dataclass(slots=True)
class PortQueues:
    queues: list[PriorityQueue]
    rate_pps: int = 0  # shared mode: the port's one rate
    last_departure: float = -math.inf

    @property
    def delay(self) -> float:
        return 1.0 / self.rate_pps if self.rate_pps > 0 else 0.0


class TrafficManager:
    def __init__(self, num_priorities: int = 8, mode: str = SHARED, default_depth: int = DEFAULT_DEPTH) -> None:
        if mode not in QUEUE_MODES:
            raise QueueConfigError(f"queue mode {mode!r} is not one of {QUEUE_MODES}")
        if not 1 <= num_priorities <= 32:
            raise QueueConfigError(f"priority queues {num_priorities} out of range 1..32")
        self.mode = mode
        self.num_priorities = num_priorities
        self.default_depth = default_depth
        self.default_rate = 0
        self._ports: dict[int, PortQueues] = {}
        self.lock = threading.RLock()

    # ---- configuration (simple_switch_CLI's set_queue_rate / set_queue_depth) -------------------

    def port(self, port: int) -> PortQueues:
        pq = self._ports.get(port)
        if pq is None:
            queue_rate = self.default_rate if self.mode == PER_QUEUE else 0
            port_rate = self.default_rate if self.mode == SHARED else 0
            pq = PortQueues(
                [PriorityQueue(self.default_depth, queue_rate) for _ in range(self.num_priorities)], port_rate
            )
            self._ports[port] = pq
        return pq

    def _check_priority(self, priority: int) -> None:
        if not 0 <= priority < self.num_priorities:
            raise QueueConfigError(f"priority {priority} out of range 0..{self.num_priorities - 1}")

    def _addressed(self, port: int | None) -> list:
        """The port queues a command addresses: one port, or (``port`` None) every port known so far."""
        return list(self._ports.values()) if port is None else [self.port(port)]

    def set_rate(self, rate_pps: int, port: int | None = None, priority: int | None = None) -> None:
        """Shared mode: without ``priority`` the port's one rate; with it a cap on that queue alone.
        Per-queue mode: every addressed priority queue gets its own limiter at ``rate_pps``."""
        if rate_pps < 0:
            raise QueueConfigError(f"rate {rate_pps} must be >= 0 (0: unlimited)")
        with self.lock:
            if port is None:
                self.default_rate = rate_pps
            for pq in self._addressed(port):
                if priority is not None:
                    self._check_priority(priority)
                    pq.queues[priority].rate_pps = rate_pps
                elif self.mode == SHARED:
                    pq.rate_pps = rate_pps
                else:
                    for q in pq.queues:
                        q.rate_pps = rate_pps

    def set_depth(self, depth: int, port: int | None = None, priority: int | None = None) -> None:
        if depth < 0:
            raise QueueConfigError(f"depth {depth} must be >= 0")
        with self.lock:
            if port is None:
                self.default_depth = depth
            for pq in self._addressed(port):
                if priority is not None:
                    self._check_priority(priority)
                    pq.queues[priority].capacity = depth
                else:
                    for q in pq.queues:
                        q.capacity = depth

    # ---- queueing --------------------------------------------------------------------------------

    def depth(self, port: int, priority: int) -> int:
        pq = self._ports.get(port)
        return len(pq.queues[priority].packets) if pq else 0

    def enqueue(self, port: int, priority: int, item: Any, now: float) -> tuple[bool, int]:
        """(accepted, depth of the queue before this packet). Full queue or bad priority: dropped."""
        with self.lock:
            if not 0 <= priority < self.num_priorities:
                return (False, 0)
            q = self.port(port).queues[priority]
            depth = len(q.packets)
            if depth >= q.capacity:
                return (False, depth)
            send = now
            if self.mode == PER_QUEUE:
                send = max(now, q.last_sent + q.delay)
                q.last_sent = send
            q.packets.append(Queued(item, now, depth, send))
            return (True, depth)

    def _port_candidate(self, pq: PortQueues) -> tuple[float, int] | None:
        """(departure time, priority) of the packet this port sends next, if any is queued."""
        earliest = math.inf
        ready: list[tuple[int, float]] = []
        for prio in range(self.num_priorities - 1, -1, -1):
            q = pq.queues[prio]
            if not q.packets:
                continue
            head = q.packets[0]
            t = head.send_time if self.mode == PER_QUEUE else max(head.enq_time, q.last_departure + q.delay)
            ready.append((prio, t))
            earliest = min(earliest, t)
        if not ready:
            return None
        # Shared mode: the next slot is computed from the current rate, so a rate change takes effect at once.
        when = earliest if self.mode == PER_QUEUE else max(earliest, pq.last_departure + pq.delay)
        for prio, t in ready:  # highest priority first among the queues eligible at that time
            if t <= when:
                return (when, prio)
        return None  # unreachable: the earliest queue is always eligible

    def next_event(self) -> float:
        """Earliest logical time at which a packet can leave (inf when nothing is queued)."""
        with self.lock:
            best = math.inf
            for pq in self._ports.values():
                cand = self._port_candidate(pq)
                if cand is not None:
                    best = min(best, cand[0])
            return best

    def dequeue(self, now: float) -> Departure | None:
        """The earliest departure due at or before ``now``, or None."""
        with self.lock:
            best: tuple[float, int, int] | None = None
            for port, pq in self._ports.items():
                cand = self._port_candidate(pq)
                if cand is not None and cand[0] <= now and (best is None or cand[0] < best[0]):
                    best = (cand[0], port, cand[1])
            if best is None:
                return None
            when, port, prio = best
            pq = self._ports[port]
            q = pq.queues[prio]
            head = q.packets.popleft()
            if self.mode == SHARED:
                pq.last_departure = when
                q.last_departure = when
            return Departure(port, prio, head.item, when, head.enq_depth, len(q.packets))

    def drain(self, now: float) -> list[Departure]:
        out = []
        while (d := self.dequeue(now)) is not None:
            out.append(d)
        return out

    def describe(self) -> list[str]:
        with self.lock:
            lines = [
                f"mode {self.mode}, {self.num_priorities} priority queues, default depth {self.default_depth}, "
                f"default rate {self.default_rate or 'unlimited'}"
            ]
            for port in sorted(self._ports):
                pq = self._ports[port]
                qs = " ".join(f"{p}:{len(q.packets)}/{q.capacity}@{q.rate_pps or '-'}" for p, q in enumerate(pq.queues))
                lines.append(f"port {port} rate {pq.rate_pps or '-'} queues {qs}")
            return lines
