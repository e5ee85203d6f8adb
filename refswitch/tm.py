"""The traffic manager: per port, ``num_priorities`` strict-priority FIFO queues (highest served first).

Two rate models:

* ``shared`` (a real switch): ONE rate limiter per port shared by all its priority queues. Whenever
  the port may send, the highest non-empty queue goes, so a busy high class starves the lower ones.
  A per-queue rate (``set_rate(r, port, prio)``) additionally caps that one queue. Shaping happens
  at dequeue, so a rate change applies to packets already queued.
* ``per-queue`` (BMv2's ``QueueingLogicPriRL``): every priority queue has its own limiter and there
  is no port limit. As in BMv2, a packet's departure time is fixed when it is enqueued
  (``max(now, previous + gap)``), so a later rate change does not move packets already queued.

Every limiter has one rate in one of two units, the last command's:

* packets per second (``set_rate``, simple_switch_CLI's ``set_queue_rate``, BMv2's only unit): every
  packet costs ``1/rate`` whatever its length;
* bits per second (``set_rate_bps``): a link. A packet of L bytes (the frame as the switch sends it,
  Ethernet header to the end of the payload) keeps the limiter busy for ``L * 8 / rate`` seconds, so an
  86-byte ACK costs 688/rate where a 1500-byte packet costs 12,000/rate.

A packet's departure time is when it starts to leave; the limiter is then busy for the packet's gap
(``1/rate``, or ``L * 8 / rate``) before the next one may start. A rate of 0 means unlimited.

Depths are per priority queue in packets (BMv2 default 64); a full queue tail-drops. A queue may also
have a byte capacity (``set_depth_bytes``; 0, the default, is none): a packet is tail-dropped when the
queue's bytes plus its length would exceed it, as in a real switch's buffer. Both depths are reported:
``enq_depth``/``deq_depth`` in packets (what the pipeline reads, BMv2's unit) and ``enq_bytes``/
``deq_bytes`` in bytes.

Time is passed in (``now``), so tests can drive the queues on a virtual clock and the switch on
``time.monotonic()``; departures come out in the order of their (virtual) times, as BMv2's egress would
emit them with an infinitely fast egress pipeline.
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


def _gap(rate_pps: int, rate_bps: int, size: int) -> float:
    """Seconds a limiter at this rate is busy with a packet of ``size`` bytes (0: unlimited)."""
    if rate_bps > 0:
        return size * 8 / rate_bps
    if rate_pps > 0:
        return 1.0 / rate_pps
    return 0.0


def rate_text(rate_pps: int, rate_bps: int) -> str:
    """A limiter's rate as ``show_queues`` prints it: packets/s bare (simple_switch_CLI's unit), bits/s
    with their unit, ``-`` for unlimited."""
    if rate_bps > 0:
        return f"{rate_bps}bit/s"
    return str(rate_pps) if rate_pps > 0 else "-"


def _default_rate_text(rate_pps: int, rate_bps: int) -> str:
    return "unlimited" if rate_pps <= 0 and rate_bps <= 0 else rate_text(rate_pps, rate_bps)


@dataclass(slots=True)
class Queued:
    item: Any
    enq_time: float
    enq_depth: int
    send_time: float  # per-queue mode: fixed at enqueue; shared mode: equals enq_time
    size: int = 0  # bytes
    enq_bytes: int = 0  # bytes already queued when it arrived


@dataclass(slots=True)
class PriorityQueue:
    capacity: int  # packets
    rate_pps: int = 0  # at most one of rate_pps / rate_bps is non-zero
    rate_bps: int = 0
    capacity_bytes: int = 0  # 0: no byte limit
    bytes: int = 0  # bytes queued
    last_departure: float = -math.inf  # shared mode: for this queue's own cap
    last_departure_size: int = 0
    last_sent: float = -math.inf  # per-queue mode: departure time given to the last enqueued packet
    last_sent_size: int = 0
    packets: deque = field(default_factory=deque)

    def gap(self, size: int) -> float:
        return _gap(self.rate_pps, self.rate_bps, size)


@dataclass(slots=True)
class Departure:
    port: int
    priority: int
    item: Any
    time: float  # logical departure time (the packet starts to leave)
    enq_depth: int  # packets
    deq_depth: int  # packets
    size: int = 0  # bytes
    enq_bytes: int = 0
    deq_bytes: int = 0


@dataclass(slots=True)
class PortQueues:
    queues: list[PriorityQueue]
    rate_pps: int = 0  # shared mode: the port's one rate (at most one of rate_pps / rate_bps non-zero)
    rate_bps: int = 0
    last_departure: float = -math.inf
    last_size: int = 0  # bytes of the packet that left at last_departure

    def gap(self, size: int) -> float:
        return _gap(self.rate_pps, self.rate_bps, size)


class TrafficManager:
    def __init__(self, num_priorities: int = 8, mode: str = SHARED, default_depth: int = DEFAULT_DEPTH) -> None:
        if mode not in QUEUE_MODES:
            raise QueueConfigError(f"queue mode {mode!r} is not one of {QUEUE_MODES}")
        if not 1 <= num_priorities <= 32:
            raise QueueConfigError(f"priority queues {num_priorities} out of range 1..32")
        self.mode = mode
        self.num_priorities = num_priorities
        self.default_depth = default_depth
        self.default_depth_bytes = 0
        self.default_rate = 0  # packets/s
        self.default_rate_bps = 0
        self._ports: dict[int, PortQueues] = {}
        self.lock = threading.RLock()

    # ---- configuration (simple_switch_CLI's set_queue_rate / set_queue_depth, and their byte forms) ---

    def port(self, port: int) -> PortQueues:
        pq = self._ports.get(port)
        if pq is None:
            per_queue = self.mode == PER_QUEUE
            queue_rate = (self.default_rate, self.default_rate_bps) if per_queue else (0, 0)
            port_rate = (0, 0) if per_queue else (self.default_rate, self.default_rate_bps)
            pq = PortQueues(
                [
                    PriorityQueue(self.default_depth, *queue_rate, capacity_bytes=self.default_depth_bytes)
                    for _ in range(self.num_priorities)
                ],
                *port_rate,
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
        """A rate in packets per second (BMv2's unit). Shared mode: without ``priority`` the port's one
        rate; with it a cap on that queue alone. Per-queue mode: every addressed priority queue gets its
        own limiter at ``rate_pps``. Replaces a bits-per-second rate on the same limiters."""
        self._set_rate(rate_pps, 0, rate_pps, port, priority)

    def set_rate_bps(self, rate_bps: int, port: int | None = None, priority: int | None = None) -> None:
        """``set_rate`` for a link of ``rate_bps`` bits per second: a packet of L bytes takes
        ``L * 8 / rate_bps`` seconds. Replaces a packets-per-second rate on the same limiters."""
        self._set_rate(0, rate_bps, rate_bps, port, priority)

    def _set_rate(self, pps: int, bps: int, given: int, port: int | None, priority: int | None) -> None:
        if given < 0:
            raise QueueConfigError(f"rate {given} must be >= 0 (0: unlimited)")
        with self.lock:
            if priority is not None:
                self._check_priority(priority)
            if port is None:
                self.default_rate, self.default_rate_bps = pps, bps
            for pq in self._addressed(port):
                if priority is not None:
                    pq.queues[priority].rate_pps, pq.queues[priority].rate_bps = pps, bps
                elif self.mode == SHARED:
                    pq.rate_pps, pq.rate_bps = pps, bps
                else:
                    for q in pq.queues:
                        q.rate_pps, q.rate_bps = pps, bps

    def set_depth(self, depth: int, port: int | None = None, priority: int | None = None) -> None:
        """Queue capacity in packets (tail drop), the same in both modes."""
        self._set_depth("capacity", depth, port, priority)

    def set_depth_bytes(self, nbytes: int, port: int | None = None, priority: int | None = None) -> None:
        """Queue capacity in bytes besides the packet capacity (0: no byte limit): a packet is dropped
        when the queue's bytes plus its length would exceed it."""
        self._set_depth("capacity_bytes", nbytes, port, priority)

    def _set_depth(self, attr: str, value: int, port: int | None, priority: int | None) -> None:
        if value < 0:
            raise QueueConfigError(f"depth {value} must be >= 0")
        with self.lock:
            if priority is not None:
                self._check_priority(priority)
            if port is None:
                setattr(self, "default_depth" if attr == "capacity" else "default_depth_bytes", value)
            for pq in self._addressed(port):
                for q in pq.queues if priority is None else [pq.queues[priority]]:
                    setattr(q, attr, value)

    # ---- queueing --------------------------------------------------------------------------------

    def depth(self, port: int, priority: int) -> int:
        pq = self._ports.get(port)
        return len(pq.queues[priority].packets) if pq else 0

    def depth_bytes(self, port: int, priority: int) -> int:
        pq = self._ports.get(port)
        return pq.queues[priority].bytes if pq else 0

    def enqueue(self, port: int, priority: int, item: Any, now: float, size: int = 0) -> tuple[bool, int]:
        """(accepted, depth in packets of the queue before this packet). ``size`` is the packet's length
        in bytes (what a byte rate or a byte capacity counts). Full queue or bad priority: dropped."""
        with self.lock:
            if not 0 <= priority < self.num_priorities:
                return (False, 0)
            q = self.port(port).queues[priority]
            depth = len(q.packets)
            if depth >= q.capacity or (q.capacity_bytes and q.bytes + size > q.capacity_bytes):
                return (False, depth)
            send = now
            if self.mode == PER_QUEUE:
                send = max(now, q.last_sent + q.gap(q.last_sent_size))
                q.last_sent, q.last_sent_size = send, size
            q.packets.append(Queued(item, now, depth, send, size, q.bytes))
            q.bytes += size
            return (True, depth)

    def _port_candidate(self, pq: PortQueues) -> tuple[float, int] | None:
        """(departure time, priority) of the packet this port sends next, if any is queued."""
        earliest = math.inf
        ready: list[tuple[int, float]] = []
        per_queue = self.mode == PER_QUEUE
        for prio in range(self.num_priorities - 1, -1, -1):
            q = pq.queues[prio]
            if not q.packets:
                continue
            head = q.packets[0]
            t = head.send_time if per_queue else max(head.enq_time, q.last_departure + q.gap(q.last_departure_size))
            ready.append((prio, t))
            earliest = min(earliest, t)
        if not ready:
            return None
        # Shared mode: the next slot is computed from the current rate, so a rate change takes effect at once.
        when = earliest if per_queue else max(earliest, pq.last_departure + pq.gap(pq.last_size))
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
            q.bytes -= head.size
            if self.mode == SHARED:
                pq.last_departure, pq.last_size = when, head.size
                q.last_departure, q.last_departure_size = when, head.size
            return Departure(
                port, prio, head.item, when, head.enq_depth, len(q.packets), head.size, head.enq_bytes, q.bytes
            )

    def drain(self, now: float) -> list[Departure]:
        out = []
        while (d := self.dequeue(now)) is not None:
            out.append(d)
        return out

    def describe(self) -> list[str]:
        """``show_queues``: per queue ``prio:queued/capacity[+bytes/byte capacity B]@rate``."""
        with self.lock:
            header = (
                f"mode {self.mode}, {self.num_priorities} priority queues, default depth {self.default_depth}, "
                f"default rate {_default_rate_text(self.default_rate, self.default_rate_bps)}"
            )
            if self.default_depth_bytes:
                header += f", default byte depth {self.default_depth_bytes}"
            lines = [header]
            for port in sorted(self._ports):
                pq = self._ports[port]
                qs = " ".join(
                    f"{p}:{len(q.packets)}/{q.capacity}"
                    + (f"+{q.bytes}/{q.capacity_bytes}B" if q.capacity_bytes else "")
                    + f"@{rate_text(q.rate_pps, q.rate_bps)}"
                    for p, q in enumerate(pq.queues)
                )
                lines.append(f"port {port} rate {rate_text(pq.rate_pps, pq.rate_bps)} queues {qs}")
            return lines
