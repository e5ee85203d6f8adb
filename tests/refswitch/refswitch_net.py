"""Test-side packet I/O on veth pairs (AF_PACKET), shared by the dataplane and differential tests."""

from __future__ import annotations

import contextlib
import select
import socket
import time
from collections.abc import Iterator

from mlfc.testing.veth import VethPair, unique_prefix, veth_pairs

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


class Wire:
    """The test's ends of the veths: send a frame into switch port N, collect what came out."""

    def __init__(self, pairs: dict[int, VethPair]) -> None:
        self.socks: dict[int, socket.socket] = {}
        for port, pair in pairs.items():
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            s.bind((pair.test_side, 0))
            s.setblocking(False)
            self.socks[port] = s

    def send(self, port: int, frame: bytes) -> None:
        self.socks[port].send(frame)

    def flush(self) -> None:
        self.collect(0.05)

    def collect(self, quiet: float = 0.3, limit: float = 10.0, expect: int | None = None) -> list[tuple[int, bytes]]:
        """Frames (port, bytes) arriving until ``quiet`` seconds pass without one (or ``expect`` arrived)."""
        got: list[tuple[int, bytes]] = []
        poller = select.poll()
        fd_port = {}
        for port, s in self.socks.items():
            poller.register(s.fileno(), select.POLLIN)
            fd_port[s.fileno()] = port
        end = time.monotonic() + limit
        while time.monotonic() < end and (expect is None or len(got) < expect):
            events = poller.poll(int(quiet * 1000))
            if not events:
                break
            for fd, _ in events:
                while True:
                    try:
                        frame, addr = self.socks[fd_port[fd]].recvfrom(65536)
                    except BlockingIOError:
                        break
                    if addr[2] != PACKET_OUTGOING:
                        got.append((fd_port[fd], frame))
        return got

    def expect(self, count: int, quiet: float = 0.15, within: float = 10.0) -> list[tuple[int, bytes]]:
        """What comes out when ``count`` frames are due: waits up to ``within`` s for them, then briefly for
        any extra one. With ``count`` 0 (a drop) the only wait is ``quiet`` s of nothing arriving."""
        if not count:
            return self.collect(quiet=quiet)
        got = self.collect(quiet=within, limit=within, expect=count)
        return got + self.collect(quiet=0.02)

    def close(self) -> None:
        for s in self.socks.values():
            s.close()


@contextlib.contextmanager
def wired(count: int, tag: str) -> Iterator[tuple[dict[int, str], Wire]]:
    """``count`` veth pairs: yields ({switch port: switch-side iface}, Wire on the test sides)."""
    with veth_pairs(count, prefix=unique_prefix(tag)) as pairs:
        wire = Wire(dict(enumerate(pairs)))
        try:
            yield {i: p.switch_side for i, p in enumerate(pairs)}, wire
        finally:
            wire.close()
