"""Moving real packets: AF_PACKET raw sockets on the switch's interfaces, one event-loop thread.

The loop receives bursts from every port, runs ingress, enqueues into the traffic manager, and sends
whatever the traffic manager releases after running egress. One thread owns the pipeline state, so
counters and the congestion register need no locks (the P4Runtime server only reads them or swaps
whole objects). Frames are the switch's own: the kernel's copies of frames we send are ignored.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import math
import os
import select
import socket
import threading
import time
from collections import Counter

from mlfc.refswitch import pipeline as pl
from mlfc.refswitch.device import Device

log = logging.getLogger("mlfc.refswitch.dataplane")

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23  # Linux >= 4.20
PACKET_OUTGOING = 4
RX_BURST = 64
MAX_FRAME = 65536
POLL_CAP_S = 0.2  # re-check for stop at least this often


def open_port(iface: str) -> socket.socket:
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    try:
        with contextlib.suppress(OSError):
            sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        sock.bind((iface, 0))
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class Dataplane:
    def __init__(self, device: Device, ports: dict[int, str]) -> None:
        self.device = device
        self.ports = dict(ports)
        self.sockets: dict[int, socket.socket] = {}
        self.stats: Counter[str] = Counter()
        self._stop = threading.Event()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._thread = threading.Thread(target=self._run, name="dataplane", daemon=True)

    def start(self) -> Dataplane:
        try:
            for port, iface in self.ports.items():
                self.sockets[port] = open_port(iface)
        except BaseException:
            self.close_sockets()
            raise
        self._thread.start()
        return self

    def wake(self) -> None:
        """Re-evaluate queue timing now (a rate changed)."""
        with contextlib.suppress(BlockingIOError):
            os.write(self._wake_w, b"x")

    def stop(self) -> None:
        self._stop.set()
        self.wake()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self.close_sockets()
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    def close_sockets(self) -> None:
        for s in self.sockets.values():
            s.close()
        self.sockets.clear()

    def describe_stats(self) -> str:
        return " ".join(f"{k}={v}" for k, v in sorted(self.stats.items())) or "no packets"

    # ---- the loop ---------------------------------------------------------------------------------

    def _run(self) -> None:
        poller = select.poll()
        fd_to_port = {}
        for port, sock in self.sockets.items():
            poller.register(sock.fileno(), select.POLLIN)
            fd_to_port[sock.fileno()] = port
        poller.register(self._wake_r, select.POLLIN)
        tm = self.device.tm
        while not self._stop.is_set():
            now = time.monotonic()
            due = tm.next_event()
            wait = POLL_CAP_S if math.isinf(due) else min(POLL_CAP_S, max(0.0, due - now))
            try:
                events = poller.poll(math.ceil(wait * 1000))
            except InterruptedError:
                continue
            for fd, ev in events:
                if fd == self._wake_r:
                    with contextlib.suppress(BlockingIOError):
                        os.read(self._wake_r, 4096)
                    continue
                port = fd_to_port[fd]
                if ev & select.POLLERR and not ev & (select.POLLHUP | select.POLLNVAL) and self._link_down(port):
                    continue
                if ev & (select.POLLERR | select.POLLHUP | select.POLLNVAL):
                    log.error("port %d (%s) failed; closing it", port, self.ports[port])
                    poller.unregister(fd)
                    self.sockets.pop(port).close()
                    continue
                self._receive(port)
            self._transmit(time.monotonic())

    def _link_down(self, port: int) -> bool:
        """Whether the error pending on ``port``'s socket is its link going down (reading it clears it).
        `ip link set down` makes the kernel report ENETDOWN and detach the socket; it re-attaches it when
        the link comes back up, so the port stays ours: closing it would lose the port for good."""
        err = self.sockets[port].getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err != errno.ENETDOWN:
            return False
        self.stats["link_down"] += 1
        log.warning("port %d (%s): link down; the port resumes when it is back up", port, self.ports[port])
        return True

    def _receive(self, port: int) -> None:
        sock = self.sockets[port]
        for _ in range(RX_BURST):
            try:
                frame, addr = sock.recvfrom(MAX_FRAME)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as err:
                self.stats["rx_error"] += 1
                log.warning("port %d: receive failed: %s", port, err)
                return
            if addr[2] == PACKET_OUTGOING:
                continue
            self.stats["rx"] += 1
            self._ingress(port, frame)

    def _ingress(self, port: int, frame: bytes) -> None:
        dev = self.device
        if not dev.configured:
            self.stats["drop_no_pipeline"] += 1  # as BMv2 --no-p4 before the controller loads mlfc.p4
            return
        ing = pl.ingress(frame, port, dev.tables, dev.state)
        if ing.egress_port is None:
            self.stats[f"drop_{ing.drop_reason}"] += 1
            log.debug("port %d: dropped (%s)", port, ing.drop_reason)
            return
        item = (ing, dev.tables, dev.state)
        accepted, _depth = dev.tm.enqueue(ing.egress_port, ing.priority, item, time.monotonic(), ing.length)
        if not accepted:
            reason = pl.DROP_QUEUE_FULL if ing.priority < dev.tm.num_priorities else pl.DROP_PRIORITY_RANGE
            self.stats[f"drop_{reason}"] += 1

    def _transmit(self, now: float) -> None:
        dev = self.device
        while (d := dev.tm.dequeue(now)) is not None:
            ing, tables, state = d.item
            if tables is not dev.tables:
                self.stats["drop_pipeline_changed"] += 1  # queued under a pipeline that was replaced
                continue
            dec = pl.egress(ing, d.enq_depth, d.deq_depth, tables, state, dev.rng)
            sock = self.sockets.get(d.port)
            if sock is None or dec.out is None:
                self.stats["drop_no_interface"] += 1
                continue
            try:
                sock.send(dec.out)
                self.stats["tx"] += 1
            except OSError as err:
                self.stats["tx_error"] += 1
                log.warning("port %d: send failed: %s", d.port, err)
