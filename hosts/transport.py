"""Tagged gradient transfer over UDP: a paced, window- or rate-controlled sender with SACK, RACK-style
loss detection and RTO, and a receiver with cumulative + selective ACKs, ECN feedback and bounded-loss
delivery. Real sockets and IP addresses only, so it runs over loopback, veth pairs and a P4 switch.

Sender (one flow: one socket, one peer, one congestion controller that persists across tensors, like a
TCP connection): ``Sender.send_tensor`` splits a buffer into chunks, tags each with the shim and sends
them ECT(0); it returns when the receiver has the whole tensor or has accepted it within its loss
bound (ACK with FIN). Lost chunks are retransmitted unless the chunk is unprotected (importance < 8)
and the bytes so tolerated stay within ``loss_bound * len(buffer)``.

Receiver (a background thread): places chunks, acknowledges, echoes CE as the ECE flag and sends
rate-limited CNPs, and delivers ``DeliveredTensor`` objects (buffer + ``LossReport``) through
``recv()``. Once the last chunk has arrived it waits ``deadline`` seconds; then, if every protected
chunk is in and the missing bytes are within the tensor's loss bound, it zero-fills the rest and
delivers; otherwise it keeps waiting for the retransmissions.

See docs/transport.md.
"""

from __future__ import annotations

import contextlib
import errno
import math
import queue
import random
import select
import socket
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from mlfc.hosts.cc import ALGORITHMS, CongestionControl, Mltcp, make_cc
from mlfc.hosts.importance import assign_importance, expand_importance, num_chunks
from mlfc.hosts.packet import (
    DATA_B0,
    DATA_HEADER,
    MAX_CHUNK_PAYLOAD,
    MAX_TENSOR_BYTES,
    PacketError,
    build_ack,
    build_cnp,
    parse_feedback,
    sack_blocks,
)
from mlfc.hosts.progress import IterationProgress
from mlfc.policy import loss
from mlfc.policy.mltcp import EWMA_WEIGHT, MltcpParams
from mlfc.policy.priority import PolicyError
from mlfc.wire import (
    MAX_SACK_BLOCKS,
    SHIM_PORT_BASE,
    SHIM_PORT_MASK,
    Flags,
    MsgType,
    ShimError,
    is_shim_port,
    unpack_shim,
)

ECT0 = 0x02
ECN_MASK = 0x03
ECN_CE = 0x03
HEADER_LEN = DATA_HEADER.size
DEFAULT_CHUNK = 1400  # payload bytes; + 28 header + 28 UDP/IP = 1456 < 1500 MTU
UDP_IP_OVERHEAD = 28

# per-chunk sender states
_UNSENT, _INFLIGHT, _LOST, _ACKED, _TOLERATED = 0, 1, 2, 3, 4


class TransportError(Exception):
    """Base class for transport failures."""


class TransferRejected(TransportError, ValueError):
    """Bad input: the transfer was not started."""


class PeerTimeout(TransportError, TimeoutError):
    """The peer stopped answering, or the transfer missed its overall timeout."""


# ---- sockets ---------------------------------------------------------------------------------


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
        for opt, force, size in ((socket.SO_RCVBUF, 33, rcvbuf), (socket.SO_SNDBUF, 32, sndbuf)):
            try:  # SO_RCVBUFFORCE (33) / SO_SNDBUFFORCE (32) ignore rmem_max/wmem_max; root only
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


# ---- sender ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SenderConfig:
    chunk_size: int = DEFAULT_CHUNK  # payload bytes per chunk
    cc: str = "reno"
    mltcp: MltcpParams | None = None  # None: plain congestion control
    idle_gap: float | None = 0.1  # s without new data that starts a new iteration (MLTCP)
    ewma_weight: float = EWMA_WEIGHT  # bytes-per-iteration EWMA
    line_rate: float = 1e9  # bits/s; DCQCN's line rate and start rate
    initial_rto: float = 0.2
    min_rto: float = 0.05  # above scheduling gaps of a Python process (~10 ms seen on 2 cores); RFC 6298: 1 s
    max_rto: float = 1.0
    # Restart the window after more than an RTO without sending (RFC 5681 4.1), as Linux does by
    # default (net.ipv4.tcp_slow_start_after_idle=1). Window-based controllers only.
    restart_after_idle: bool = True
    peer_timeout: float = 3.0  # no feedback at all for this long ends the transfer with PeerTimeout
    reorder_window: int = 3  # RACK: a chunk is lost once one sent this many transmissions later is acked
    max_tensor_bytes: int = 1 << 30
    jobs: frozenset[int] | None = None  # jobs this sender may send for (None: any)
    pacing_burst: float = 0.0005  # s of line rate the pacer may send back to back (min 16 chunks)
    sample_interval: float = 0.001  # s between timeline samples
    max_samples: int = 200_000

    def __post_init__(self) -> None:
        if not 1 <= self.chunk_size <= MAX_CHUNK_PAYLOAD:
            raise ValueError(f"chunk_size={self.chunk_size} must be in 1..{MAX_CHUNK_PAYLOAD}")
        if self.cc not in ALGORITHMS:
            raise ValueError(f"cc={self.cc!r}: choose one of {', '.join(ALGORITHMS)}")
        if not 0 < self.min_rto <= self.initial_rto <= self.max_rto:
            raise ValueError("need 0 < min_rto <= initial_rto <= max_rto")
        if not self.peer_timeout > 0:
            raise ValueError("peer_timeout must be > 0")
        if not 0 < self.max_tensor_bytes <= MAX_TENSOR_BYTES:
            raise ValueError(f"max_tensor_bytes must be in 1..{MAX_TENSOR_BYTES}")


@dataclass
class FlowStats:
    """Per-flow counters; ``samples`` rows are (t, cwnd_bytes or -1, rate_Bps or -1, bytes_acked, F, bytes_ratio)."""

    bytes_sent: int = 0  # on the wire incl. headers and retransmissions
    payload_bytes_sent: int = 0  # first transmissions only
    bytes_acked: int = 0
    chunks_sent: int = 0
    retransmits: int = 0
    probes: int = 0
    tolerated_chunks: int = 0  # lost unprotected chunks left for the receiver to zero-fill
    acks: int = 0
    ece_acks: int = 0
    ece_events: int = 0
    cnps: int = 0
    loss_events: int = 0
    timeouts: int = 0
    idle_restarts: int = 0  # window restarts after an idle period (restart_after_idle)
    tensors: int = 0
    malformed: int = 0  # undecodable packets on the socket
    foreign: int = 0  # decodable but not feedback (e.g. DATA), or for another job
    stale: int = 0  # feedback for a tensor no longer being sent
    socket_errors: int = 0  # ICMP errors (e.g. port unreachable) reported on the socket
    wait_seconds: float = 0.0  # time blocked waiting for feedback, the window or the pacer
    srtt: float = 0.0
    samples: list[tuple[float, float, float, int, float, float]] = field(default_factory=list)


@dataclass(frozen=True)
class SendResult:
    job_id: int
    iteration: int
    tensor_id: int
    nbytes: int
    chunks: int
    duration: float
    retransmits: int
    tolerated_chunks: int  # lost chunks the sender did not retransmit (the receiver may have zero-filled them)
    fin: bool  # the receiver ended the transfer (FIN), as opposed to every chunk being acknowledged

    @property
    def goodput_bps(self) -> float:
        return 8 * self.nbytes / self.duration if self.duration > 0 else math.inf


class _Transfer:
    """Sender-side state of one tensor."""

    def __init__(self, job: int, iteration: int, tensor_id: int, mv: memoryview, chunk: int, classes: bytearray,
                 loss_bound_bp: int, now: float) -> None:  # fmt: skip
        self.job, self.iteration, self.tensor_id = job, iteration, tensor_id
        self.mv = mv
        self.nbytes = mv.nbytes
        self.chunk = chunk
        self.n = num_chunks(self.nbytes, chunk)
        self.classes = classes
        self.n_protected = loss.count_protected(classes)
        self.loss_bound_bp = loss_bound_bp
        self.budget = loss.LossBudget(self.nbytes, loss_bound_bp)
        self.state = bytearray(self.n)
        self.acked = bytearray(self.n)
        self.xmit_tx = [0] * self.n
        self.sent_at = [0.0] * self.n
        self.retransmitted = bytearray(self.n)
        self.outstanding: deque[tuple[int, int]] = deque()
        self.retx: deque[int] = deque()
        self.next_new = 0
        self.inflight = 0
        self.acked_count = 0
        self.cum = 0
        self.max_acked_tx = 0
        self.done = False
        self.fin = False
        self.retransmits = 0
        self.tolerated = 0
        self.started = now

    def size(self, seq: int) -> int:
        return self.chunk if seq < self.n - 1 else self.nbytes - self.chunk * (self.n - 1)


class Sender:
    """One flow from a local shim-range port to a receiver's shim-range port.

    Not thread-safe: call ``send_tensor`` from one thread (it blocks until the tensor is delivered)."""

    def __init__(
        self,
        peer: tuple[str, int],
        bind: tuple[str, int] = ("0.0.0.0", 0),
        config: SenderConfig | None = None,
        *,
        sock: socket.socket | None = None,
        clock=time.monotonic,
    ) -> None:
        self.config = cfg = config or SenderConfig()
        if not is_shim_port(peer[1]):
            raise ValueError(f"peer port {peer[1]} is outside the shim range; its ACKs/data would not be tagged")
        self.peer = peer
        self._clock = clock
        self._sock = sock if sock is not None else bind_shim_socket(*bind)
        self._owns_sock = sock is None
        self._sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, ECT0)
        self._sock.connect(peer)
        self._sock.setblocking(False)
        self.progress = IterationProgress(idle_gap=cfg.idle_gap, ewma_weight=cfg.ewma_weight)
        now = clock()
        mltcp = None if cfg.mltcp is None else Mltcp(cfg.mltcp, self.progress)
        self.cc: CongestionControl = make_cc(cfg.cc, cfg.chunk_size, mltcp, line_rate=cfg.line_rate, now=now)
        self.stats = FlowStats()
        self._t0 = now
        self._next_sample = now
        self._tx = 0  # transmission counter (RACK ordering)
        self._recovery_tx = 0  # congestion events for data sent at or before this were already handled
        self._srtt: float | None = None
        self._rttvar = 0.0
        self._rto_base = cfg.initial_rto
        self._backoff = 1
        self._tokens = 0.0
        self._last_refill = now
        self._last_active: float | None = None  # when the previous transfer ended
        self._pkt = bytearray(HEADER_LEN + cfg.chunk_size)
        self._pktmv = memoryview(self._pkt)
        self._fbuf = bytearray(4096)
        self._fbmv = memoryview(self._fbuf)

    @property
    def local_address(self) -> tuple[str, int]:
        return self._sock.getsockname()

    def close(self) -> None:
        if self._owns_sock:
            self._sock.close()

    def __enter__(self) -> Sender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start_iteration(self, expected_bytes: int | None = None) -> None:
        """The training loop's explicit iteration boundary; ``expected_bytes`` = bytes it will send."""
        self.progress.start_iteration(expected_bytes)

    # -- API -----------------------------------------------------------------------------------

    def send_tensor(
        self,
        job: int,
        iteration: int,
        tensor_id: int,
        buffer,
        *,
        importance: int | bytes | list[int] | None = None,
        layer_index: int = 0,
        num_layers: int = 1,
        loss_bound: float = 0.0,
        timeout: float | None = None,
    ) -> SendResult:
        """Send ``buffer`` (bytes-like, e.g. a C-contiguous numpy array) and block until delivered.

        ``importance``: None assigns classes from gradient magnitude (float32 buffers) and layer position
        (see mlfc.hosts.importance); an int applies to every chunk; a sequence gives one class per chunk.
        ``loss_bound``: the fraction of the tensor's bytes the receiver may zero-fill (unprotected chunks).
        Raises TransferRejected for bad input and PeerTimeout when the peer stops answering or
        ``timeout`` (s) passes."""
        cfg = self.config
        try:
            mv = memoryview(buffer).cast("B")
        except (TypeError, ValueError) as exc:
            raise TransferRejected(f"buffer must be a contiguous bytes-like object: {exc}") from None
        nbytes = mv.nbytes
        if nbytes == 0:
            raise TransferRejected("empty buffer")
        if nbytes > cfg.max_tensor_bytes:
            raise TransferRejected(f"buffer of {nbytes} bytes exceeds max_tensor_bytes={cfg.max_tensor_bytes}")
        if not 0 <= job <= 0xFFFF or (cfg.jobs is not None and job not in cfg.jobs):
            raise TransferRejected(f"unknown job {job}")
        if not 0 <= iteration <= 0xFFFFFFFF or not 0 <= tensor_id <= 0xFFFF:
            raise TransferRejected(f"iteration {iteration} / tensor_id {tensor_id} out of range")
        try:
            bound_bp = loss.to_basis_points(loss_bound)
        except PolicyError as exc:
            raise TransferRejected(str(exc)) from None
        n = num_chunks(nbytes, cfg.chunk_size)
        try:
            if importance is None:
                classes = bytearray(
                    assign_importance(
                        mv, cfg.chunk_size, layer_index=layer_index, num_layers=num_layers, gradients=nbytes % 4 == 0
                    )
                )
            else:
                classes = expand_importance(importance, n)
        except ValueError as exc:
            raise TransferRejected(str(exc)) from None
        loss.apply_floor(classes)
        self.progress.note_iteration(iteration)
        now = self._clock()
        # send_tensor returns only when everything is acknowledged, so between calls nothing is in flight.
        if cfg.restart_after_idle and self._last_active is not None and now - self._last_active > self._rto():
            self.cc.on_idle_restart(now)
            self.stats.idle_restarts += 1
        t = _Transfer(job, iteration, tensor_id, mv, cfg.chunk_size, classes, bound_bp, now)
        try:
            self._run(t, None if timeout is None else now + timeout)
        finally:
            self._last_active = self._clock()
        self.stats.tensors += 1
        return SendResult(job, iteration, tensor_id, nbytes, t.n, self._clock() - t.started, t.retransmits,
                          t.tolerated, t.fin)  # fmt: skip

    # -- the loop --------------------------------------------------------------------------------

    def _rto(self) -> float:
        return min(self.config.max_rto, self._rto_base * self._backoff)

    def _run(self, t: _Transfer, overall_deadline: float | None) -> None:
        cfg = self.config
        clock = self._clock
        sock = self._sock
        last_feedback = clock()
        rto_deadline = last_feedback + self._rto()
        while True:
            got, progressed = self._drain_feedback(t)
            now = clock()
            if got:
                last_feedback = now
            if progressed:
                self._backoff = 1
                rto_deadline = now + self._rto()
            if t.done:
                return
            if now - last_feedback > cfg.peer_timeout:
                raise PeerTimeout(
                    f"no feedback from {self.peer[0]}:{self.peer[1]} for {cfg.peer_timeout:.3g} s "
                    f"(job {t.job} iteration {t.iteration} tensor {t.tensor_id}: {t.acked_count}/{t.n} chunks acked)"
                )
            if overall_deadline is not None and now > overall_deadline:
                raise PeerTimeout(f"tensor {t.tensor_id} not delivered in time: {t.acked_count}/{t.n} chunks acked")
            self.cc.on_timer(now)
            if now >= rto_deadline:
                self._on_rto(t, now)
                rto_deadline = now + self._rto()
            self._sample(now)
            wait, want_write = self._send_some(t, now)
            if wait > 0:
                wait = min(wait, max(0.0, rto_deadline - now), cfg.peer_timeout)
                select.select([sock], [sock] if want_write else [], [], wait)
                self.stats.wait_seconds += clock() - now

    def _send_some(self, t: _Transfer, now: float) -> tuple[float, bool]:
        """Send what the window and pacer allow; returns (how long to wait before trying again, wait for
        writability). Wait 0 means come back at once (feedback to process)."""
        cc = self.cc
        mss = self.config.chunk_size
        rate = cc.pacing_rate
        if rate is not None:
            burst = max(16 * (mss + HEADER_LEN), rate * self.config.pacing_burst)
            self._tokens = min(burst, self._tokens + (now - self._last_refill) * rate)
            self._last_refill = now
        sent = 0
        retx = t.retx
        state = t.state
        while True:
            if t.inflight >= cc.cwnd / mss:
                return (0.0 if sent else 1.0), False  # window full: wait for feedback (bounded by the RTO)
            if rate is not None and self._tokens <= 0:
                return (0.0 if sent else (-self._tokens + 1) / rate), False
            seq = -1
            is_retx = False
            while retx:
                s = retx.popleft()
                if state[s] == _LOST:
                    seq, is_retx = s, True
                    break
            if seq < 0:
                if t.next_new >= t.n:
                    return (0.0 if sent else 1.0), False  # all sent: wait for feedback
                seq = t.next_new
            try:
                wire = self._xmit(t, seq, is_retx, now)
            except (BlockingIOError, InterruptedError):
                if is_retx:
                    retx.appendleft(seq)
                return 0.0005, True
            except OSError as exc:
                if exc.errno not in (errno.ENOBUFS, errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH):
                    raise
                self.stats.socket_errors += 1
                if is_retx:
                    retx.appendleft(seq)
                return 0.001, False
            if not is_retx:
                t.next_new += 1
            if rate is not None:
                self._tokens -= wire
            sent += 1
            if sent >= 64:  # go back to read feedback now and then
                return 0.0, False

    def _xmit(self, t: _Transfer, seq: int, is_retx: bool, now: float) -> int:
        off = seq * t.chunk
        ln = t.chunk if seq < t.n - 1 else t.nbytes - off
        flags = (Flags.LAST if seq == t.n - 1 else 0) | (Flags.RETX if is_retx else 0)
        progress = self.progress
        DATA_HEADER.pack_into(
            self._pkt, 0, DATA_B0, flags, t.job, t.iteration, t.tensor_id,
            (t.classes[seq] << 4) | progress.bucket, 0, seq,
            t.nbytes, t.chunk, t.loss_bound_bp, t.n_protected,
        )  # fmt: skip
        end = HEADER_LEN + ln
        self._pkt[HEADER_LEN:end] = t.mv[off : off + ln]
        self._sock.send(self._pktmv[:end])
        self._tx += 1
        if t.state[seq] != _INFLIGHT:
            t.inflight += 1
        t.state[seq] = _INFLIGHT
        t.xmit_tx[seq] = self._tx
        t.sent_at[seq] = now
        t.outstanding.append((self._tx, seq))
        st = self.stats
        st.chunks_sent += 1
        st.bytes_sent += end
        if is_retx:
            t.retransmitted[seq] = 1
            t.retransmits += 1
            st.retransmits += 1
        else:
            st.payload_bytes_sent += ln
            progress.on_sent(ln, now)
        self.cc.on_sent(end, now)
        return end + UDP_IP_OVERHEAD

    def _on_rto(self, t: _Transfer, now: float) -> None:
        """Retransmission timeout: everything in flight is lost; with nothing in flight, probe for a lost FIN."""
        self.stats.timeouts += 1
        self._backoff = min(self._backoff * 2, 64)
        if t.inflight > 0:
            for seq in range(t.n):
                if t.state[seq] == _INFLIGHT:
                    self._declare_lost(t, seq)
            t.outstanding.clear()
            self._recovery_tx = self._tx
            self.cc.on_timeout(now)
        elif not t.retx and t.next_new >= t.n:
            self.stats.probes += 1
            with contextlib.suppress(OSError):
                # the receiver answers a duplicate with its current ACK, or with FIN if it has finished
                self._xmit(t, t.n - 1, True, now)
                t.state[t.n - 1] = _ACKED if t.acked[t.n - 1] else _INFLIGHT
                if t.acked[t.n - 1]:
                    t.inflight -= 1

    def _declare_lost(self, t: _Transfer, seq: int) -> None:
        t.inflight -= 1
        if t.budget.try_tolerate(t.classes[seq], t.size(seq)):
            t.state[seq] = _TOLERATED
            t.tolerated += 1
            self.stats.tolerated_chunks += 1
        else:
            t.state[seq] = _LOST
            t.retx.append(seq)

    # -- feedback ----------------------------------------------------------------------------------

    def _drain_feedback(self, t: _Transfer) -> tuple[bool, bool]:
        """Read all pending ACK/CNPs; returns (any valid feedback for this flow, any data newly acked)."""
        got = progressed = False
        sock = self._sock
        for _ in range(1024):
            try:
                n = sock.recv_into(self._fbuf)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:  # e.g. ECONNREFUSED from an ICMP port unreachable: the peer may not be up yet
                self.stats.socket_errors += 1
                break
            try:
                fb = parse_feedback(self._fbmv[:n])
            except (ShimError, PacketError):
                try:
                    unpack_shim(self._fbmv[:n])
                    self.stats.foreign += 1
                except ShimError:
                    self.stats.malformed += 1
                continue
            if fb.job_id != t.job:
                self.stats.foreign += 1
                continue
            now = self._clock()
            if fb.msg_type == MsgType.CNP:
                got = True
                self.stats.cnps += 1
                self.cc.on_cnp(now)
                continue
            if (fb.iteration, fb.tensor_id) != (t.iteration, t.tensor_id):
                self.stats.stale += 1
                continue
            got = True
            if self._on_ack(t, fb, now):
                progressed = True
            if t.done:
                break
        return got, progressed

    def _on_ack(self, t: _Transfer, fb, now: float) -> bool:
        st = self.stats
        st.acks += 1
        if fb.cum_ack > t.n or any(e > t.n for _, e in fb.blocks):
            st.malformed += 1
            return False
        newly = 0
        max_tx = 0
        rtt_seq = -1
        ranges = [(t.cum, fb.cum_ack)] if fb.cum_ack > t.cum else []
        ranges.extend((max(s, fb.cum_ack), e) for s, e in fb.blocks if e > fb.cum_ack)
        acked, state, xmit_tx = t.acked, t.state, t.xmit_tx
        for s, e in ranges:
            pos = s
            while True:
                i = acked.find(0, pos, e)
                if i < 0:
                    break
                acked[i] = 1
                prev = state[i]
                if prev == _INFLIGHT:
                    t.inflight -= 1
                elif prev == _TOLERATED:
                    t.budget.release(t.size(i))
                state[i] = _ACKED
                newly += t.size(i)
                t.acked_count += 1
                if xmit_tx[i] > max_tx:
                    max_tx, rtt_seq = xmit_tx[i], i
                pos = i + 1
        if fb.cum_ack > t.cum:
            t.cum = fb.cum_ack
        rtt = None
        if rtt_seq >= 0 and not t.retransmitted[rtt_seq]:  # Karn: no samples from retransmitted chunks
            rtt = now - t.sent_at[rtt_seq]
            self._update_rtt(rtt)
        if max_tx > t.max_acked_tx:
            t.max_acked_tx = max_tx
        # RACK-style detection: anything sent reorder_window transmissions before an acked one is lost
        # with few chunks in flight there are not reorder_window later ones to wait for (RFC 5827's idea)
        horizon = t.max_acked_tx - max(1, min(self.config.reorder_window, t.inflight - 1))
        outstanding = t.outstanding
        lost_event = False
        while outstanding and outstanding[0][0] < horizon:
            tx, seq = outstanding.popleft()
            if state[seq] == _INFLIGHT and xmit_tx[seq] == tx:
                self._declare_lost(t, seq)
                if tx > self._recovery_tx:
                    lost_event = True
        ece = False
        if fb.ece:
            st.ece_acks += 1
            if max_tx > self._recovery_tx:
                ece = True
                st.ece_events += 1
        if lost_event:
            st.loss_events += 1
            self.cc.on_loss(now)
            self._recovery_tx = self._tx
        elif ece:
            self._recovery_tx = self._tx
        if newly or ece:
            self.cc.on_ack(newly, rtt, ece, now)
        st.bytes_acked += newly
        if fb.fin or t.acked_count == t.n:
            t.done = True
            t.fin = fb.fin
        return newly > 0

    def _update_rtt(self, r: float) -> None:
        # RFC 6298
        if self._srtt is None:
            self._srtt, self._rttvar = r, r / 2
        else:
            self._rttvar = 0.75 * self._rttvar + 0.25 * abs(self._srtt - r)
            self._srtt = 0.875 * self._srtt + 0.125 * r
        cfg = self.config
        self._rto_base = min(cfg.max_rto, max(cfg.min_rto, self._srtt + 4 * self._rttvar))
        self.stats.srtt = self._srtt

    def _sample(self, now: float) -> None:
        if now < self._next_sample or len(self.stats.samples) >= self.config.max_samples:
            return
        self._next_sample = now + self.config.sample_interval
        d = self.cc.describe()
        f, ratio = self.cc.factor(), self.progress.ratio
        self.stats.samples.append((now - self._t0, d["cwnd"], d["rate"], self.stats.bytes_acked, f, ratio))


# ---- receiver --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReceiverConfig:
    deadline: float = 0.02  # s after the last chunk first arrives before missing chunks may be zero-filled
    cnp_interval: float = 50e-6  # DCQCN NP: at most one CNP per flow per interval
    ack_every: int = 8  # in-order chunks per ACK (an ACK also goes out whenever the socket is drained)
    jobs: frozenset[int] | None = None  # accepted jobs (None: any)
    max_tensor_bytes: int = 1 << 30
    max_pending_bytes: int = 2 << 30  # memory for tensors being received
    stale_timeout: float = 10.0  # an incomplete tensor with no packet for this long is abandoned
    completed_memory: int = 4096  # finished tensors remembered to re-send their FIN
    rcvbuf: int = 8 << 20


@dataclass
class ReceiverStats:
    packets: int = 0
    data_bytes: int = 0
    duplicates: int = 0
    malformed: int = 0
    foreign: int = 0  # valid shim but not DATA (e.g. a stray ACK)
    unknown_job: int = 0
    oversized: int = 0
    over_memory: int = 0
    ce_marked: int = 0
    acks_sent: int = 0
    cnps_sent: int = 0
    tensors_delivered: int = 0
    tensors_zero_filled: int = 0
    abandoned: int = 0
    send_errors: int = 0


@dataclass(frozen=True)
class LossReport:
    total_bytes: int
    chunk_size: int
    missing_chunks: tuple[int, ...]  # zero-filled chunk sequence numbers
    zero_filled_bytes: int

    @property
    def loss_fraction(self) -> float:
        return self.zero_filled_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def complete(self) -> bool:
        return not self.missing_chunks


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


class _RxTensor:
    __slots__ = ("bound_bp", "buf", "ce", "ce_pending", "chunk", "count", "cum", "dups", "first", "last_packet")
    __slots__ += ("last_seen", "latest", "mv", "n", "nprot", "prot_received", "received", "total", "unacked")

    def __init__(self, total: int, chunk: int, bound_bp: int, nprot: int, now: float) -> None:
        self.total, self.chunk, self.bound_bp, self.nprot = total, chunk, bound_bp, nprot
        self.n = num_chunks(total, chunk)
        self.buf = bytearray(total)  # zeros: missing chunks are zero-filled by construction
        self.mv = memoryview(self.buf)
        self.received = bytearray(self.n)
        self.count = self.cum = self.prot_received = self.unacked = self.ce = self.dups = 0
        self.ce_pending = False
        self.latest = 0  # the chunk that arrived last (first SACK block)
        self.first = self.last_packet = now
        self.last_seen: float | None = None  # when the LAST chunk first arrived


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
        self._clock = clock
        self.stats = ReceiverStats()
        self._active: dict[tuple, _RxTensor] = {}
        self._waiting: set[tuple] = set()  # tensors whose LAST chunk arrived but which are incomplete
        self._pending_acks: set[tuple] = set()
        self._completed: OrderedDict[tuple, int] = OrderedDict()  # key -> cumulative ack at FIN
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
        buf = bytearray(MAX_CHUNK_PAYLOAD + HEADER_LEN + 64)
        mv = memoryview(buf)
        bufs = [mv]
        anc = socket.CMSG_SPACE(4)
        ip_level, ip_tos = socket.IPPROTO_IP, socket.IP_TOS
        next_sweep = self._clock() + 1.0
        while not self._stop.is_set():
            wait = 0.05
            if self._waiting:
                now = self._clock()
                soonest = min(self._active[k].last_seen for k in self._waiting) + self.config.deadline
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
                    tos = 0
                    for level, kind, data in ancdata:
                        if level == ip_level and kind == ip_tos and data:
                            tos = data[0]
                    self._on_packet(buf, mv, n, addr, tos)
            now = self._clock()
            for key in self._pending_acks:
                tr = self._active.get(key)
                if tr is not None:
                    self._send_ack(key, tr, 0)
            self._pending_acks.clear()
            if self._waiting:
                for key in [k for k in self._waiting if self._active[k].last_seen + self.config.deadline <= now]:
                    self._try_partial(key, now)
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

    def _on_packet(self, buf: bytearray, mv: memoryview, n: int, addr: tuple[str, int], tos: int) -> None:
        st = self.stats
        st.packets += 1
        if n < HEADER_LEN or buf[0] != DATA_B0:
            self._classify_bad(mv[:n])
            return
        _, _flags, job, it, tid, impprog, _, seq, total, chunk, bound, nprot = DATA_HEADER.unpack_from(buf)
        cfg = self.config
        if cfg.jobs is not None and job not in cfg.jobs:
            st.unknown_job += 1
            return
        key = (addr, job, it, tid)
        tr = self._active.get(key)
        now = self._clock()
        if tr is None:
            cum = self._completed.get(key)
            if cum is not None:  # a retransmission or probe after we finished: repeat the FIN
                st.duplicates += 1
                self._send(build_ack(job, it, tid, cum, (), Flags.FIN), addr, "acks_sent")
                return
            if total == 0 or chunk == 0 or not loss.valid_basis_points(bound):
                st.malformed += 1
                return
            if total > cfg.max_tensor_bytes:
                st.oversized += 1
                return
            if nprot > num_chunks(total, chunk):
                st.malformed += 1
                return
            if self._pending_bytes + total > cfg.max_pending_bytes:
                st.over_memory += 1
                return
            tr = _RxTensor(total, chunk, bound, nprot, now)
            self._active[key] = tr
            self._pending_bytes += total
        elif total != tr.total or chunk != tr.chunk or bound != tr.bound_bp or nprot != tr.nprot:
            st.malformed += 1
            return
        last_index = tr.n - 1
        if seq > last_index:
            st.malformed += 1
            return
        off = seq * chunk
        ln = chunk if seq < last_index else total - off
        if n - HEADER_LEN != ln:
            st.malformed += 1
            return
        tr.last_packet = now
        tr.latest = seq
        ack_now = False
        if tr.received[seq]:
            st.duplicates += 1
            tr.dups += 1
            ack_now = True
        else:
            tr.mv[off : off + ln] = mv[HEADER_LEN:n]
            tr.received[seq] = 1
            tr.count += 1
            st.data_bytes += ln
            if loss.is_protected(impprog >> 4):
                tr.prot_received += 1
            if seq == tr.cum:
                nxt = tr.received.find(0, seq)
                tr.cum = tr.n if nxt < 0 else nxt
            else:
                ack_now = True  # a hole: tell the sender at once
            if seq == last_index:
                tr.last_seen = now
                ack_now = True
                if tr.count < tr.n:
                    self._waiting.add(key)
            tr.unacked += 1
            if tr.unacked >= cfg.ack_every:
                ack_now = True
        if tos & ECN_MASK == ECN_CE:
            st.ce_marked += 1
            tr.ce += 1
            tr.ce_pending = True
            flow = (addr, job)
            if now - self._last_cnp.get(flow, -math.inf) >= cfg.cnp_interval:
                self._last_cnp[flow] = now
                self._send(build_cnp(job, it, tid, seq), addr, "cnps_sent")
        if tr.count == tr.n:
            self._finish(key, tr, now)
        elif ack_now:
            self._send_ack(key, tr, 0)
            self._pending_acks.discard(key)
        else:
            self._pending_acks.add(key)

    def _send(self, pkt: bytes, addr: tuple[str, int], counter: str) -> None:
        try:
            self._sock.sendto(pkt, addr)
        except OSError:
            self.stats.send_errors += 1
            return
        setattr(self.stats, counter, getattr(self.stats, counter) + 1)

    def _send_ack(self, key: tuple, tr: _RxTensor, flags: int) -> None:
        addr, job, it, tid = key
        if tr.ce_pending:
            flags |= Flags.ECE
            tr.ce_pending = False
        blocks = sack_blocks(tr.received, tr.cum, MAX_SACK_BLOCKS, tr.latest) if tr.cum < tr.n else ()
        self._send(build_ack(job, it, tid, tr.cum, blocks, flags), addr, "acks_sent")
        tr.unacked = 0

    def _try_partial(self, key: tuple, now: float) -> None:
        """After the deadline: deliver with zero-fill if no protected chunk is missing and the loss is in bound."""
        tr = self._active[key]
        missing_bytes = (tr.n - tr.count) * tr.chunk  # the last (short) chunk is in: LAST arrived
        if loss.may_zero_fill(missing_bytes, tr.nprot - tr.prot_received, tr.total, tr.bound_bp):
            self._finish(key, tr, now)

    def _finish(self, key: tuple, tr: _RxTensor, now: float) -> None:
        missing = []
        pos = 0
        while True:
            i = tr.received.find(0, pos)
            if i < 0:
                break
            missing.append(i)
            pos = i + 1
        self._send_ack(key, tr, Flags.FIN)
        del self._active[key]
        self._waiting.discard(key)
        self._pending_acks.discard(key)
        self._pending_bytes -= tr.total
        self._completed[key] = tr.cum
        if len(self._completed) > self.config.completed_memory:
            self._completed.popitem(last=False)
        st = self.stats
        st.tensors_delivered += 1
        if missing:
            st.tensors_zero_filled += 1
        report = LossReport(tr.total, tr.chunk, tuple(missing), len(missing) * tr.chunk)
        addr, job, it, tid = key
        self._queue.put(DeliveredTensor(addr, job, it, tid, tr.buf, report, tr.ce, tr.dups, tr.first, now))

    def _sweep(self, now: float) -> None:
        for key in [k for k, tr in self._active.items() if now - tr.last_packet > self.config.stale_timeout]:
            tr = self._active.pop(key)
            self._waiting.discard(key)
            self._pending_acks.discard(key)
            self._pending_bytes -= tr.total
            self.stats.abandoned += 1
        cutoff = now - 10 * self.config.cnp_interval - 1.0
        for flow in [f for f, t in self._last_cnp.items() if t < cutoff]:
            del self._last_cnp[flow]
