"""Socket wrappers that inject loss or CE marks on a sender's DATA packets, for tests and experiments.

A ``Sender`` takes any object with the socket methods it uses, so ``Sender(peer, sock=LossySocket(s, drop))``
drops the DATA chunks ``drop(header, attempt)`` chooses (attempt = 0 for the first transmission of that
chunk, 1 for the first retransmission, ...). Dropped packets are recorded, as are all sent headers.
``force_tos`` rewrites the IP TOS byte, e.g. 0x03 to mark every packet CE as a congested switch would.
"""

from __future__ import annotations

import socket
from collections import Counter
from collections.abc import Callable

from mlfc.hosts.transport.packet import DataHeader, parse_data


class LossySocket:
    def __init__(
        self,
        sock: socket.socket,
        drop: Callable[[DataHeader, int], bool] | None = None,
        *,
        force_tos: int | None = None,
    ) -> None:
        self._sock = sock
        self._drop = drop
        self._force_tos = force_tos
        self.attempts: Counter[tuple[int, int, int, int]] = Counter()
        self.sent: list[DataHeader] = []
        self.dropped: list[DataHeader] = []

    def setsockopt(self, level: int, opt: int, value: int) -> None:
        if self._force_tos is not None and level == socket.IPPROTO_IP and opt == socket.IP_TOS:
            value = self._force_tos
        self._sock.setsockopt(level, opt, value)

    def send(self, data: bytes | memoryview) -> int:
        header = parse_data(data)
        key = (header.job_id, header.iteration, header.tensor_id, header.chunk_seq)
        attempt = self.attempts[key]
        self.attempts[key] += 1
        self.sent.append(header)
        if self._drop is not None and self._drop(header, attempt):
            self.dropped.append(header)
            return len(data)
        return self._sock.send(data)

    def __getattr__(self, name: str):
        return getattr(self._sock, name)
