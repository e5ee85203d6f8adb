"""The transport's UDP sockets: shim-range ports, buffer sizes, ECN codepoints."""

from __future__ import annotations

import errno
import random
import socket

from mlfc.wire import SHIM_PORT_BASE, SHIM_PORT_MASK, is_shim_port

ECT0 = 0x02  # DATA is sent ECN-capable (RFC 3168 ECT(0))
ECN_MASK = 0x03
ECN_CE = 0x03
UDP_IP_OVERHEAD = 28  # IPv4 (20) + UDP (8) header bytes on the wire per datagram
SO_SNDBUFFORCE, SO_RCVBUFFORCE = 32, 33  # Linux: ignore wmem_max/rmem_max (root only)


def parse_endpoint(text: str, default_port: int | None = None) -> tuple[str, int]:
    """'IP:PORT' or 'IP' (with ``default_port``)."""
    host, sep, port = text.rpartition(":")
    if not sep:
        if default_port is None:
            raise ValueError(f"{text!r}: expected IP:PORT")
        return text, default_port
    return host, int(port)


def bind_shim_socket(host: str, port: int = 0, *, rcvbuf: int = 4 << 20, sndbuf: int = 4 << 20) -> socket.socket:
    """A UDP socket bound to ``host`` on a port in the shim range (so packets *to* it are tagged).

    ``port`` 0 picks a free port in the range. Socket buffers are enlarged (forced when root)."""
    if port and not is_shim_port(port):
        raise ValueError(f"port {port} is outside the shim range {SHIM_PORT_BASE}..{SHIM_PORT_BASE + 255}")
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for opt, force, size in (
            (socket.SO_RCVBUF, SO_RCVBUFFORCE, rcvbuf),
            (socket.SO_SNDBUF, SO_SNDBUFFORCE, sndbuf),
        ):
            try:
                sock.setsockopt(socket.SOL_SOCKET, force, size)
            except OSError:
                sock.setsockopt(socket.SOL_SOCKET, opt, size)
        if port:
            sock.bind((host, port))
            return sock
        span = (~SHIM_PORT_MASK & 0xFFFF) + 1
        start = random.randrange(1, span)
        for i in range(span - 1):
            candidate = SHIM_PORT_BASE + 1 + (start + i) % (span - 1)
            try:
                sock.bind((host, candidate))
                return sock
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE:
                    raise
        raise OSError(errno.EADDRINUSE, f"no free port in the shim range on {host}")
    except BaseException:
        sock.close()
        raise
