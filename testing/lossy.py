"""Socket wrappers that inject loss or CE marks on a sender's DATA packets, for tests and experiments.

A ``Sender`` takes any object with the socket methods it uses, so ``Sender(peer, sock=LossySocket(s, drop))``
drops the DATA chunks ``drop(header, attempt)`` chooses (attempt = 0 for the first transmission of that
chunk, 1 for the first retransmission, ...). Dropped packets are recorded, as are all sent headers. A GSO
send (``sendmsg`` with UDP_SEGMENT) is judged segment by segment and what survives is sent on as one GSO
send again. ``force_tos`` rewrites the IP TOS byte, e.g. 0x03 to mark every packet CE as a congested switch
would; ``mark(header, attempt)`` marks the DATA chunks it chooses CE one by one (an IP_TOS control message
on their send; a GSO send goes out as runs of equally marked segments, as a kernel would receive them:
GRO coalesces only packets with one TOS); ``refuse_gso`` makes every GSO send fail with EIO, as a kernel
does for a device without checksum offload; ``telemetry`` writes (rate_class, queue_bytes) into every DATA
shim, as a hop with that queue would (docs/wire-format.md).
"""

from __future__ import annotations

import errno
import itertools
import socket
import sys
from collections import Counter
from collections.abc import Callable

from mlfc.hosts.transport.gso import SOL_UDP, UDP_SEGMENT, segment_spans
from mlfc.hosts.transport.packet import DataHeader, parse_data
from mlfc.wire import SHIM

CE_TOS = 0x03  # ECN CE in the TOS byte (DSCP 0)
CE_CMSG = [(socket.IPPROTO_IP, socket.IP_TOS, CE_TOS.to_bytes(4, sys.byteorder))]  # an int, as ip_cmsg_send takes it


class LossySocket:
    def __init__(
        self,
        sock: socket.socket,
        drop: Callable[[DataHeader, int], bool] | None = None,
        *,
        force_tos: int | None = None,
        mark: Callable[[DataHeader, int], bool] | None = None,
        refuse_gso: bool = False,
        telemetry: tuple[int, int] | None = None,
    ) -> None:
        self._sock = sock
        self._telemetry = telemetry  # (rate_class, queue_bytes) a congested hop writes into every DATA shim
        self._drop = drop
        self._force_tos = force_tos
        self._mark = mark
        self._refuse_gso = refuse_gso
        self.attempts: Counter[tuple[int, int, int, int]] = Counter()
        self.sent: list[DataHeader] = []
        self.dropped: list[DataHeader] = []
        self.marked: list[DataHeader] = []  # sent CE (``mark``), not dropped
        self.gso_sends = 0  # GSO sends that reached this wrapper (refused ones included)

    def setsockopt(self, level: int, opt: int, value: int) -> None:
        if self._force_tos is not None and level == socket.IPPROTO_IP and opt == socket.IP_TOS:
            value = self._force_tos
        self._sock.setsockopt(level, opt, value)

    def _fate(self, data: bytes | memoryview) -> bool | None:
        """None: drop the chunk; else whether to mark it CE."""
        header = parse_data(data)
        key = (header.job_id, header.iteration, header.tensor_id, header.chunk_seq)
        attempt = self.attempts[key]
        self.attempts[key] += 1
        self.sent.append(header)
        if self._drop is not None and self._drop(header, attempt):
            self.dropped.append(header)
            return None
        if self._mark is not None and self._mark(header, attempt):
            self.marked.append(header)
            return True
        return False

    def _hop(self, data: bytes | memoryview) -> bytes | memoryview:
        """The DATA packet as a switch writing ``telemetry`` forwards it (mlfc.wire: rate_class, queue_bytes)."""
        if self._telemetry is None:
            return data
        out = bytearray(data)
        rate_class, queue_bytes = self._telemetry
        out[SHIM.byte_offset("rate_class")] = rate_class
        at = SHIM.byte_offset("queue_bytes")
        out[at : at + 4] = queue_bytes.to_bytes(4, "big")
        return out

    def send(self, data: bytes | memoryview) -> int:
        data = self._hop(data)
        ce = self._fate(data)
        if ce:
            return self._sock.sendmsg([data], CE_CMSG)
        if ce is not None:
            return self._sock.send(data)
        return len(data)

    def sendmsg(self, buffers, ancdata=(), flags: int = 0, address=None) -> int:
        data = b"".join(bytes(b) for b in buffers)
        segment = next((int.from_bytes(d, "little") for lvl, kind, d in ancdata
                        if lvl == SOL_UDP and kind == UDP_SEGMENT), 0)  # fmt: skip
        if segment:
            self.gso_sends += 1
            if self._refuse_gso:
                raise OSError(errno.EIO, "GSO refused (test)")
        segments = [self._hop(data[o : o + n]) for o, n in segment_spans(len(data), segment)]
        fates = [(seg, self._fate(seg)) for seg in segments]
        kept = [(seg, ce) for seg, ce in fates if ce is not None]
        # the survivors are still equal-size segments, a short one only last; one send per run of one mark
        for ce, run in itertools.groupby(kept, key=lambda k: k[1]):
            segs = [seg for seg, _ in run]
            extra = CE_CMSG if ce else []
            if len(segs) == 1:
                self._sock.sendmsg([bytes(segs[0])], extra, flags)
            else:
                self._sock.sendmsg([b"".join(segs)], list(ancdata) + extra, flags)
        return len(data)

    def __getattr__(self, name: str):
        return getattr(self._sock, name)
