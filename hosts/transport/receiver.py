"""The receiver (DCQCN's notification point): a background thread that places chunks (reassembly.py),
acknowledges them (cumulative + SACK), echoes CE as the ECE flag and sends rate-limited CNPs, and delivers
``DeliveredTensor`` objects (buffer + ``LossReport``) through ``recv()``. Once the last chunk has arrived
it waits ``deadline`` seconds; then, if every protected chunk is in and the missing bytes are within the
tensor's loss bound (mlfc.policy.loss), it zero-fills the rest and delivers; otherwise it keeps waiting for
the retransmissions.
"""

from __future__ import annotations

import math
import queue
import select
import socket
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from mlfc.hosts import fastpath
from mlfc.hosts.importance import num_chunks
from mlfc.hosts.transport.config import ReceiverConfig
from mlfc.hosts.transport.errors import TransportError
from mlfc.hosts.transport.gso import (
    GRO_BUFFER,
    Run,
    RunParser,
    enable_gro,
    gro_ancillary_size,
    parse_ancillary,
    segment_spans,
)
from mlfc.hosts.transport.packet import (
    DATA_B0,
    DATA_HEADER,
    HEADER_LEN,
    MAX_CHUNK_PAYLOAD,
    DataHeader,
    build_ack,
    build_cnp,
)
from mlfc.hosts.transport.reassembly import LossReport, Reassembly
from mlfc.hosts.transport.sockets import ECN_CE, ECN_MASK, bind_shim_socket
from mlfc.hosts.transport.stats import ReceiverStats
from mlfc.policy import loss
from mlfc.wire import MAX_SACK_BLOCKS, Flags, MsgType, ShimError, unpack_shim

Key = tuple[tuple[str, int], int, int, int]  # (sender address, job, iteration, tensor id)


@dataclass
class DeliveredTensor:
    peer: tuple[str, int]
    job_id: int
    iteration: int
    tensor_id: int
    data: bytearray
    loss: LossReport
    ce_chunks: int
    duplicates: int
    first_packet: float
    finished: float


class Receiver:
    """Receives tensors on a shim-range port in a background thread; ``recv()`` returns them in completion order."""

    def __init__(
        self,
        bind: tuple[str, int],
        config: ReceiverConfig | None = None,
        *,
        sock: socket.socket | None = None,
        clock=time.monotonic,
    ) -> None:
        self.config = cfg = config or ReceiverConfig()
        self._sock = sock if sock is not None else bind_shim_socket(*bind, rcvbuf=cfg.rcvbuf)
        self._sock.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
        self._sock.setblocking(False)
        self.gro = cfg.gro and enable_gro(self._sock)  # the kernel may hand over coalesced datagrams
        self._runs: RunParser | None = None  # made with the receive buffer, in the receive thread
        self._fast = fastpath.load() if cfg.compiled else None  # runs checked and placed in C
        self._read_address = 0  # of the receive buffer, for the C calls
        self._clock = clock
        self.stats = ReceiverStats()
        self._active: dict[Key, Reassembly] = {}
        self._waiting: set[Key] = set()  # tensors whose LAST chunk arrived but which are incomplete
        self._pending_acks: dict[Key, float] = {}  # flow -> when its oldest unacknowledged chunk arrived
        self._completed: OrderedDict[Key, int] = OrderedDict()  # key -> cumulative ack at FIN
        self._last_cnp: dict[tuple, float] = {}
        self._pending_bytes = 0
        self._queue: queue.Queue[DeliveredTensor] = queue.Queue()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="mlfc-receiver", daemon=True)
        self._thread.start()

    @property
    def address(self) -> tuple[str, int]:
        return self._sock.getsockname()

    def recv(self, timeout: float | None = None) -> DeliveredTensor:
        """The next delivered tensor; raises TimeoutError after ``timeout`` s."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._error is not None:
                raise TransportError("receiver thread failed") from self._error
            left = 0.1 if deadline is None else min(0.1, deadline - time.monotonic())
            if left <= 0:
                raise TimeoutError(f"no tensor delivered within {timeout} s")
            try:
                return self._queue.get(timeout=left)
            except queue.Empty:
                continue

    def __iter__(self):
        """Delivered tensors, forever (until close(); then the next recv raises)."""
        while not self._stop.is_set():
            try:
                yield self.recv(timeout=0.5)
            except TimeoutError:
                continue

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._sock.close()

    def __enter__(self) -> Receiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the loop --------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:
            if not self._stop.is_set():
                self._error = exc
                raise

    def _loop(self) -> None:
        sock = self._sock
        buf = bytearray(GRO_BUFFER if self.gro else MAX_CHUNK_PAYLOAD + HEADER_LEN + 64)
        mv = memoryview(buf)
        bufs = [mv]
        self._runs = RunParser(buf)
        self._read_address = fastpath.address(buf)
        anc = gro_ancillary_size()
        next_sweep = self._clock() + 1.0
        while not self._stop.is_set():
            wait = 0.05
            if self._waiting or self._pending_acks:
                now = self._clock()
                soonest = min(self._active[k].last_seen for k in self._waiting) + self.config.deadline if \
                    self._waiting else math.inf  # fmt: skip
                if self._pending_acks:
                    soonest = min(soonest, min(self._pending_acks.values()) + self.config.ack_delay)
                wait = max(0.0, min(wait, soonest - now))
            ready, _, _ = select.select([sock], [], [], wait)
            if ready:
                for _ in range(4096):
                    try:
                        n, ancdata, _flags, addr = sock.recvmsg_into(bufs, anc)
                    except (BlockingIOError, InterruptedError):
                        break
                    except OSError:
                        self.stats.send_errors += 1  # ICMP errors surface here
                        break
                    tos, segment = parse_ancillary(ancdata)
                    self._on_datagram(buf, mv, n, segment, addr, tos)
            now = self._clock()
            # The socket is drained: ACK what waits, unless ack_delay lets an ACK wait for more chunks.
            due = [k for k, since in self._pending_acks.items() if since + self.config.ack_delay <= now]
            for key in due:
                del self._pending_acks[key]
                tr = self._active.get(key)
                if tr is not None:
                    self._send_ack(key, tr, 0)
            if self._waiting:
                for key in [k for k in self._waiting if self._active[k].last_seen + self.config.deadline <= now]:
                    if self._active[key].may_deliver_partial():
                        self._finish(key, self._active[key], now)
            if now >= next_sweep:
                next_sweep = now + 1.0
                self._sweep(now)

    def _classify_bad(self, mv: memoryview) -> None:
        try:
            shim = unpack_shim(mv)
        except ShimError:
            self.stats.malformed += 1
            return
        if shim.msg_type == MsgType.DATA:  # DATA too short for its descriptor
            self.stats.malformed += 1
        else:
            self.stats.foreign += 1

    def _tensor_for(self, key: Key, h: DataHeader, now: float) -> Reassembly | None:
        """The reassembly of the tensor ``h`` belongs to, started by its first packet; None (counted) when the
        packet cannot start or join one."""
        st, cfg = self.stats, self.config
        tr = self._active.get(key)
        if tr is not None:
            if tr.same_descriptor(h.total_len, h.chunk_size, h.loss_bound_bp, h.n_protected):
                return tr
            st.malformed += 1
            return None
        cum = self._completed.get(key)
        if cum is not None:  # a retransmission or probe after we finished: repeat the FIN
            st.duplicates += 1
            self._send(build_ack(h.job_id, h.iteration, h.tensor_id, cum, (), Flags.FIN), key[0], "acks_sent")
            return None
        if h.total_len == 0 or h.chunk_size == 0 or not loss.valid_basis_points(h.loss_bound_bp):
            st.malformed += 1
        elif h.total_len > cfg.max_tensor_bytes:
            st.oversized += 1
        elif h.n_protected > num_chunks(h.total_len, h.chunk_size):
            st.malformed += 1
        elif self._pending_bytes + h.total_len > cfg.max_pending_bytes:
            st.over_memory += 1
        else:
            tr = Reassembly(h.total_len, h.chunk_size, h.loss_bound_bp, h.n_protected, now)
            self._active[key] = tr
            self._pending_bytes += h.total_len
        return tr

    def _on_datagram(self, buf: bytearray, mv: memoryview, n: int, segment: int, addr: tuple[str, int],
                     tos: int) -> None:  # fmt: skip
        """One read from the socket: a datagram, or with GRO several of one flow (``segment`` bytes each, the
        last shorter). A run of new consecutive chunks of an active tensor is placed at once; anything else
        segment by segment. ACKs the segments call for go out once the whole read is handled."""
        self.stats.datagrams += 1
        if segment and n > segment:
            if self._fast is not None:
                if self._on_run_compiled(buf, n, segment, addr, tos):
                    return
            else:
                run = self._runs.parse(n, segment)
                if run is not None and self._on_run(run, addr, tos):
                    return
        acks: set[Key] = set()
        for off, ln in segment_spans(n, segment):
            self._on_packet(mv[off : off + ln], ln, addr, tos, acks)
        for key in acks:
            tr = self._active.get(key)
            if tr is not None:
                self._send_ack(key, tr, 0)
                self._pending_acks.pop(key, None)

    def _on_run(self, run: Run, addr: tuple[str, int], tos: int) -> bool:
        """Place a run of new chunks of an active tensor in bulk; False (nothing done) when it is not one."""
        h = run.header
        key, tr = self._run_tensor(addr, h)
        end = run.first + run.count
        if tr is None or end > tr.n or run.last_len != tr.span(end - 1)[1] or tr.received.find(1, run.first, end) >= 0:
            return False
        now = self._clock()
        self._ce_change(key, tr, tos)
        ack_now = tr.place_run(run.first, run.payload, run.last_len, run.protected, self.config.ack_every, now)
        self._after_run(key, tr, h, addr, tos, run.count, (run.count - 1) * tr.chunk + run.last_len, ack_now, now)
        return True

    def _on_run_compiled(self, buf: bytearray, n: int, segment: int, addr: tuple[str, int], tos: int) -> bool:
        """``_on_run`` for a read checked and placed by one C call (mlfc.hosts.fastpath, RunParser's rule):
        False (nothing done) when the read is not a run of new chunks of an active tensor."""
        if n < HEADER_LEN or buf[0] != DATA_B0:
            return False
        h = DataHeader._make(DATA_HEADER.unpack_from(buf))
        if segment != HEADER_LEN + h.chunk_size:
            return False
        key, tr = self._run_tensor(addr, h)
        if tr is None:
            return False
        now = self._clock()
        self._ce_change(key, tr, tos)  # before the C call: when the read is no run, the segments find it done
        placed = tr.take_run(self._fast, self._read_address, n, segment, h.chunk_seq, self.config.ack_every, now)
        if placed is None:
            return False
        count, ack_now = placed
        self._after_run(key, tr, h, addr, tos, count, n - count * HEADER_LEN, ack_now, now)
        return True

    def _run_tensor(self, addr: tuple[str, int], h: DataHeader) -> tuple[Key, Reassembly | None]:
        """The key of the tensor a run's first header names, and its reassembly if it is active with that
        descriptor (a run never starts a tensor: its first packet goes the single-packet way)."""
        key = (addr, h.job_id, h.iteration, h.tensor_id)
        tr = self._active.get(key)
        if tr is not None and not tr.same_descriptor(h.total_len, h.chunk_size, h.loss_bound_bp, h.n_protected):
            tr = None
        return key, tr

    def _after_run(self, key: Key, tr: Reassembly, h: DataHeader, addr: tuple[str, int], tos: int, count: int,
                   nbytes: int, ack_now: bool, now: float) -> None:  # fmt: skip
        """Counters, CE and what follows placing a run of ``count`` chunks (``nbytes`` of payload)."""
        st = self.stats
        st.runs += 1
        st.packets += count
        st.data_bytes += nbytes
        if tr.waiting:
            self._waiting.add(key)
        tr.telemetry = (h.rate_class, h.queue_bytes)
        if tos & ECN_MASK == ECN_CE:
            self._on_ce(tr, h, addr, now, count)
        self._after_placing(key, tr, ack_now, now, None)

    def _on_packet(self, pkt: memoryview, n: int, addr: tuple[str, int], tos: int, acks: set[Key]) -> None:
        st = self.stats
        st.packets += 1
        if n < HEADER_LEN or pkt[0] != DATA_B0:
            self._classify_bad(pkt[:n])
            return
        h = DataHeader._make(DATA_HEADER.unpack_from(pkt))
        cfg = self.config
        if cfg.jobs is not None and h.job_id not in cfg.jobs:
            st.unknown_job += 1
            return
        key = (addr, h.job_id, h.iteration, h.tensor_id)
        now = self._clock()
        tr = self._tensor_for(key, h, now)
        if tr is None:
            return
        span = tr.span(h.chunk_seq)
        if span is None or n - HEADER_LEN != span[1]:
            st.malformed += 1
            return
        self._ce_change(key, tr, tos)
        tr.telemetry = (h.rate_class, h.queue_bytes)
        new, ack_now = tr.place(h.chunk_seq, pkt[HEADER_LEN:n], loss.is_protected(h.importance), cfg.ack_every, now)
        if new:
            st.data_bytes += span[1]
            if tr.waiting:
                self._waiting.add(key)
        else:
            st.duplicates += 1
        if tos & ECN_MASK == ECN_CE:
            self._on_ce(tr, h, addr, now)
        self._after_placing(key, tr, ack_now, now, acks)

    def _after_placing(self, key: Key, tr: Reassembly, ack_now: bool, now: float, acks: set[Key] | None) -> None:
        """Deliver a complete tensor (with its FIN), else acknowledge now (``acks``: at the end of the read)
        or later, when the socket is drained."""
        if tr.complete:
            self._finish(key, tr, now)
        elif ack_now:
            if acks is None:
                self._send_ack(key, tr, 0)
            else:
                acks.add(key)
            self._pending_acks.pop(key, None)
        else:
            self._pending_acks.setdefault(key, now)

    def _ce_change(self, key: Key, tr: Reassembly, tos: int) -> None:
        """DCTCP's receiver (RFC 8257 3.2, ReceiverConfig.ack_on_ce_change): before a chunk (or a GRO read: one
        TOS for all its segments, the kernel coalesces only equal ones) whose CE state differs from that of
        the chunks waiting for an ACK, acknowledge those, so every ACK's ECE flag holds for each chunk it
        newly acknowledges."""
        if tr.unacked and tr.ce_pending != (tos & ECN_MASK == ECN_CE) and self.config.ack_on_ce_change:
            self._send_ack(key, tr, 0)
            self._pending_acks.pop(key, None)

    def _on_ce(self, tr: Reassembly, h: DataHeader, addr: tuple[str, int], now: float, chunks: int = 1) -> None:
        """CE-marked chunks: ECE on the next ACK, and a CNP unless one went to this flow within cnp_interval."""
        self.stats.ce_marked += chunks
        tr.ce += chunks
        tr.ce_pending = True
        flow = (addr, h.job_id)
        if now - self._last_cnp.get(flow, -math.inf) >= self.config.cnp_interval:
            self._last_cnp[flow] = now
            self._send(build_cnp(h.job_id, h.iteration, h.tensor_id, h.chunk_seq), addr, "cnps_sent")

    def _send(self, pkt: bytes, addr: tuple[str, int], counter: str) -> None:
        try:
            self._sock.sendto(pkt, addr)
        except OSError:
            self.stats.send_errors += 1
            return
        setattr(self.stats, counter, getattr(self.stats, counter) + 1)

    def _send_ack(self, key: Key, tr: Reassembly, flags: int) -> None:
        addr, job, it, tid = key
        if tr.ce_pending:
            flags |= Flags.ECE
            tr.ce_pending = False
        ack = build_ack(job, it, tid, tr.cum, tr.sack(MAX_SACK_BLOCKS), flags, *tr.telemetry)
        self._send(ack, addr, "acks_sent")
        tr.on_ack_sent()

    def _finish(self, key: Key, tr: Reassembly, now: float) -> None:
        report = tr.loss_report()
        self._send_ack(key, tr, Flags.FIN)
        del self._active[key]
        self._waiting.discard(key)
        self._pending_acks.pop(key, None)
        self._pending_bytes -= tr.total
        self._completed[key] = tr.cum
        if len(self._completed) > self.config.completed_memory:
            self._completed.popitem(last=False)
        st = self.stats
        st.tensors_delivered += 1
        if report.missing_chunks:
            st.tensors_zero_filled += 1
        addr, job, it, tid = key
        self._queue.put(DeliveredTensor(addr, job, it, tid, tr.buf, report, tr.ce, tr.dups, tr.first, now))

    def _sweep(self, now: float) -> None:
        for key in [k for k, tr in self._active.items() if now - tr.last_packet > self.config.stale_timeout]:
            tr = self._active.pop(key)
            self._waiting.discard(key)
            self._pending_acks.pop(key, None)
            self._pending_bytes -= tr.total
            self.stats.abandoned += 1
        cutoff = now - 10 * self.config.cnp_interval - 1.0
        for flow in [f for f, t in self._last_cnp.items() if t < cutoff]:
            del self._last_cnp[flow]
