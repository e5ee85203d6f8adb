"""The sender: one flow (one socket, one peer, one congestion controller kept across tensors, like a TCP
connection). ``Sender.send_tensor`` splits a buffer into chunks, tags each with the shim and sends them
ECT(0), paced and window-limited by the controller; it returns when the receiver has the whole tensor or
has accepted it within its loss bound (ACK with FIN). What is lost, retransmitted or tolerated is decided
by the socket-free loss recovery (recovery.py, with the policy of mlfc.policy.loss); how chunks leave,
one by one or in GSO batches, is transmit.py. This module runs the loop: what the window, the pacer and
the batch size allow, feedback, timeouts, and the controller's events.
"""

from __future__ import annotations

import contextlib
import errno
import math
import select
import socket
import time

from mlfc.hosts.cc import CongestionControl, Mltcp, make_cc
from mlfc.hosts.progress import IterationProgress
from mlfc.hosts.transport import outgoing
from mlfc.hosts.transport.config import SenderConfig
from mlfc.hosts.transport.errors import PeerTimeout, TransferAborted
from mlfc.hosts.transport.gso import batch_size, should_defer
from mlfc.hosts.transport.outgoing import Transfer
from mlfc.hosts.transport.pacing import DeliveryRate, TokenBucket
from mlfc.hosts.transport.packet import (
    HEADER_LEN,
    Feedback,
    PacketError,
    parse_feedback,
    plain_ack,
)
from mlfc.hosts.transport.recovery import FlowRecovery, RttEstimator
from mlfc.hosts.transport.sockets import ECT0, UDP_IP_OVERHEAD, bind_shim_socket
from mlfc.hosts.transport.stats import FlowStats
from mlfc.hosts.transport.transmit import Transmitter
from mlfc.hosts.transport.tuning import OnlineF
from mlfc.policy.mltcp import MltcpParams
from mlfc.policy.withhold import echo_excess, own_share
from mlfc.wire import MsgType, ShimError, is_shim_port, unpack_shim

_TRANSIENT_SEND_ERRORS = (errno.ENOBUFS, errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH)
FEEDBACK_EVERY = 64  # chunks sent between two reads of the feedback socket


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
        self._abort = False
        self._sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, ECT0)
        self._sock.connect(peer)
        self._sock.setblocking(False)
        self.progress = IterationProgress(idle_gap=cfg.idle_gap, ewma_weight=cfg.ewma_weight)
        now = clock()
        mltcp = None if cfg.mltcp is None else Mltcp(cfg.mltcp, self.progress)
        self.cc: CongestionControl = make_cc(cfg.cc, cfg.chunk_size, mltcp, line_rate=cfg.line_rate, now=now)
        rtt = RttEstimator(cfg.initial_rto, cfg.min_rto, cfg.max_rto)
        self.recovery = FlowRecovery(rtt, cfg.reorder_window, cfg.tolerated_loss)
        self.stats = FlowStats()
        self._t0 = now
        self._next_sample = now
        self._pacer = TokenBucket(now)
        self.delivery = DeliveryRate()
        self.capacity = 0.0  # the highest delivery rate measured, bytes/s: the link's rate as this flow saw it
        self._last_active: float | None = None  # when the previous transfer ended
        self._fbuf = bytearray(4096)
        self._fbmv = memoryview(self._fbuf)
        self.transmit = Transmitter(self._sock, cfg, self.progress, self.cc, self.recovery, self.stats)
        # MLTCP's slope/intercept tuned from this flow's iteration times (SenderConfig.mltcp_tune)
        self.online_f = None if cfg.mltcp_tune is None or cfg.mltcp is None else OnlineF(cfg.mltcp, cfg.mltcp_tune)
        self._iterations_seen = 0

    @property
    def local_address(self) -> tuple[str, int]:
        return self._sock.getsockname()

    def abort(self) -> None:
        """Make the ``send_tensor`` in progress (from another thread) raise TransferAborted within one
        RTO (at most ``max_rto``), e.g. when the caller learnt that its peer restarted and forgot the
        transfer. Later transfers run normally."""
        self._abort = True

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
        self._on_boundary()

    @property
    def mltcp_params(self) -> MltcpParams | None:
        """F's parameters in use now (they move under SenderConfig.mltcp_tune); None without MLTCP."""
        return None if self.cc.mltcp is None else self.cc.mltcp.params

    def _on_boundary(self) -> None:
        """After any iteration boundary (explicit, new iteration number, idle gap): feed the F tuner."""
        if self.progress.iterations_started == self._iterations_seen:
            return
        self._iterations_seen = self.progress.iterations_started
        if self.online_f is not None:
            moved = self.online_f.iteration_started(self._clock(), self.stats.payload_bytes_sent)
            if moved is not None:
                self.cc.mltcp = Mltcp(moved, self.progress)

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
        withhold=(),
    ) -> outgoing.SendResult:
        """Send ``buffer`` (bytes-like, e.g. a C-contiguous numpy array) and block until delivered.

        ``importance``: None assigns classes from gradient magnitude (float32 buffers) and layer position
        (see mlfc.hosts.importance); an int applies to every chunk; a sequence gives one class per chunk.
        ``loss_bound``: the fraction of the tensor's bytes the receiver may zero-fill (unprotected chunks).
        ``withhold``: chunks not to send at all, each while ``loss_bound`` covers it (mlfc.policy.withhold
        chooses them); they are no loss to the congestion controller.
        The result's ``missing_chunks`` are the chunks the receiver ended without (zero-filled), as its ACKs
        told (withheld chunks among them): empty when every chunk was acknowledged.
        Raises TransferRejected for bad input and PeerTimeout when the peer stops answering or
        ``timeout`` (s) passes."""
        t = outgoing.prepare(self.config, job, iteration, tensor_id, buffer, importance, layer_index, num_layers,
                             loss_bound, batched=self.transmit.batching, withhold=withhold)  # fmt: skip
        self.progress.note_iteration(iteration)
        self._on_boundary()
        self._abort = False
        t.started = now = self._clock()  # after the importance classes, as the transfer's clock starts
        self.transmit.start(t)
        # send_tensor returns only when everything is acknowledged, so between calls nothing is in flight.
        rto = self.recovery.rtt.rto
        if self.config.restart_after_idle and self._last_active is not None and now - self._last_active > rto:
            self.cc.on_idle_restart(now)
            self.stats.idle_restarts += 1
        self.delivery.restart(now)
        try:
            self._run(t, None if timeout is None else now + timeout)
        finally:
            self._last_active = self._clock()
        self.stats.tensors += 1
        return t.result(self._clock())

    # -- the loop --------------------------------------------------------------------------------

    def _run(self, t: Transfer, overall_deadline: float | None) -> None:
        cfg = self.config
        clock = self._clock
        sock = self._sock
        rtt = self.recovery.rtt
        last_feedback = clock()
        rto_deadline = last_feedback + rtt.rto
        while True:
            got, progressed = self._drain_feedback(t)
            now = clock()
            if got:
                last_feedback = now
            if progressed:
                rtt.reset_backoff()
                rto_deadline = now + rtt.rto
            if got:  # the controller's state right after its feedback (batches leave few loop turns)
                self._sample(now)
            if t.done:
                return
            if self._abort:
                raise TransferAborted(
                    f"aborted: job {t.job} iteration {t.iteration} tensor {t.tensor_id} to {self.peer[0]}:"
                    f"{self.peer[1]} ({t.board.acked_count}/{t.board.n} chunks acked)"
                )
            if now - last_feedback > cfg.peer_timeout:
                raise PeerTimeout(
                    f"no feedback from {self.peer[0]}:{self.peer[1]} for {cfg.peer_timeout:.3g} s (job {t.job} "
                    f"iteration {t.iteration} tensor {t.tensor_id}: {t.board.acked_count}/{t.board.n} chunks acked)"
                )
            if overall_deadline is not None and now > overall_deadline:
                b = t.board
                raise PeerTimeout(f"tensor {t.tensor_id} not delivered in time: {b.acked_count}/{b.n} chunks acked")
            self.cc.on_timer(now)
            if now >= rto_deadline:
                self._on_rto(t, now)
                rto_deadline = now + rtt.rto
            self._sample(now)
            wait, want_write = self._send_some(t, now)
            if wait > 0:
                wait = min(wait, max(0.0, rto_deadline - now), cfg.peer_timeout)
                select.select([sock], [sock] if want_write else [], [], wait)
                self.stats.wait_seconds += clock() - now

    def _send_some(self, t: Transfer, now: float) -> tuple[float, bool]:
        """Send what the window and pacer allow, in GSO batches where possible; returns (how long to wait
        before trying again, wait for writability). Wait 0 means come back at once (feedback to process)."""
        cc = self.cc
        mss = self.config.chunk_size
        rate = cc.pacing_rate
        pacer = self._pacer
        full_wire = HEADER_LEN + mss + UDP_IP_OVERHEAD
        if rate is not None:
            pacer.refill(rate, max(16 * (mss + HEADER_LEN), rate * self.config.pacing_burst), now)
        board = t.board
        sent = 0
        while True:
            room = cc.cwnd / mss - board.inflight  # chunks the window still allows, rounded up
            if room <= 0:
                return (0.0 if sent else 1.0), False  # window full: wait for feedback (bounded by the RTO)
            if rate is not None and not pacer.may_send:
                return (0.0 if sent else pacer.wait(rate)), False
            limit = self._autosize(rate) if self.transmit.batching else 1
            if limit > 1 and should_defer(board, room, min(limit, self.transmit.per_send), cc.cwnd / mss):
                return (0.0 if sent else 1.0), False  # a few more ACKs open room for a whole batch
            if math.isfinite(room):
                limit = min(limit, math.ceil(room))
            if rate is not None:
                limit = min(limit, math.ceil(pacer.tokens / full_wire))  # the pacer's rule per chunk, in bulk
            try:
                if limit > 1 and t.chunks is not None:
                    chunks, wire = self.transmit.send_batch(t, limit, now)
                else:
                    chunks, wire = self.transmit.send_one(t, now)
            except (BlockingIOError, InterruptedError):
                return 0.0005, True
            except OSError as exc:
                if exc.errno not in _TRANSIENT_SEND_ERRORS:
                    raise
                self.stats.socket_errors += 1
                return 0.001, False
            if chunks == 0:
                return (0.0 if sent else 1.0), False  # all sent: wait for feedback
            if rate is not None:
                pacer.spend(wire)
            sent += chunks
            if sent >= FEEDBACK_EVERY:  # go back to read feedback now and then
                return 0.0, False

    def _autosize(self, rate: float | None) -> int:
        """Chunks for the next GSO send (gso.batch_size) at the flow's rate: the pacing rate, else the larger
        of cwnd / SRTT (what TCP paces at) and the measured delivery rate; 1 before any RTT sample."""
        if rate is None:
            srtt = self.recovery.rtt.srtt
            if not srtt:
                return 1
            rate = max(self.delivery.rate, self.cc.cwnd / srtt if math.isfinite(self.cc.cwnd) else math.inf)
        return batch_size(rate, self.config.gso_burst, HEADER_LEN + self.config.chunk_size, self.transmit.max_batch)

    def _on_rto(self, t: Transfer, now: float) -> None:
        """Retransmission timeout: everything in flight is lost; with nothing in flight, probe for a lost FIN."""
        self.stats.timeouts += 1
        board = t.board
        tolerated = board.tolerated
        if self.recovery.on_timeout(board):
            self.stats.tolerated_chunks += board.tolerated - tolerated
            self.cc.on_timeout(now)
        elif board.needs_probe:
            self.stats.probes += 1
            with contextlib.suppress(OSError):
                # the receiver answers a duplicate with its current ACK, or with FIN if it has finished
                self.transmit.xmit(t, board.n - 1, True, now)

    # -- feedback ----------------------------------------------------------------------------------

    def _drain_feedback(self, t: Transfer) -> tuple[bool, bool]:
        """Read all pending ACK/CNPs; returns (any valid feedback for this flow, any data newly acked).

        Plain cumulative ACKs that follow one another in the socket (each advancing, no SACK blocks, no
        ECE or FIN) are handled as the last of them, which acknowledges everything the earlier ones did:
        loss recovery, the delivery rate and the congestion controllers count acknowledged bytes, not
        ACKs, so the outcome is the same for a fraction of the work (a few ACKs wait per read at high
        rates). A plain ACK is read with one struct call (packet.plain_ack); any other feedback is decoded
        whole and first settles the ACK held back."""
        got = progressed = False
        sock = self._sock
        st = self.stats
        held = -1  # the cumulative ack of the latest plain ACK not yet handled (-1: none)
        merged = 0  # plain ACKs it stands for
        echo = (0, 0)  # the latest plain ACK's telemetry (rate_class, queue_bytes): the held one's
        for _ in range(1024):
            try:
                n = sock.recv_into(self._fbuf)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:  # e.g. ECONNREFUSED from an ICMP port unreachable: the peer may not be up yet
                st.socket_errors += 1
                break
            plain = plain_ack(self._fbuf, n)
            if plain is not None:
                job, iteration, tensor_id, cum, *telemetry = plain
                fb = None
            else:
                try:
                    fb = parse_feedback(self._fbmv[:n])
                except (ShimError, PacketError):
                    try:
                        unpack_shim(self._fbmv[:n])
                        st.foreign += 1
                    except ShimError:
                        st.malformed += 1
                    continue
                job, iteration, tensor_id = fb.job_id, fb.iteration, fb.tensor_id
            if job != t.job:
                st.foreign += 1
                continue
            now = self._clock()
            if fb is not None and fb.msg_type == MsgType.CNP:
                got = True
                st.cnps += 1
                self.cc.on_cnp(now)
                continue
            if (iteration, tensor_id) != (t.iteration, t.tensor_id):
                st.stale += 1
                continue
            got = True
            if fb is None and held >= 0 and cum > held:
                held, merged, echo = cum, merged + 1, telemetry
                continue
            if held >= 0:
                progressed |= self._on_ack(t, self._plain(t, held, echo), now, merged)
                held = -1
                if t.done:
                    break
            if fb is None:
                if cum > t.board.cum:
                    held, merged, echo = cum, 1, telemetry
                    continue
                fb = self._plain(t, cum, telemetry)
            if self._on_ack(t, fb, now):
                progressed = True
            if t.done:
                break
        if held >= 0 and not t.done:
            progressed |= self._on_ack(t, self._plain(t, held, echo), self._clock(), merged)
        return got, progressed

    @staticmethod
    def _plain(t: Transfer, cum: int, telemetry) -> Feedback:  # type: ignore[no-untyped-def]
        return Feedback(MsgType.ACK, t.job, t.iteration, t.tensor_id, cum, 0, (), *telemetry)

    def _on_ack(self, t: Transfer, fb: Feedback, now: float, acks: int = 1) -> bool:
        """Loss recovery first, then the counters, then the congestion controller; True if data was newly acked.
        ``acks``: the plain ACKs ``fb`` stands for (_drain_feedback)."""
        st = self.stats
        st.acks += acks
        t.acks += acks
        t.ece_acks += fb.ece
        board = t.board
        tolerated = board.tolerated
        ev = self.recovery.on_ack(board, fb.cum_ack, fb.blocks, fb.ece, now)
        if ev is None:
            st.malformed += 1
            return False
        st.tolerated_chunks += board.tolerated - tolerated
        if ev.rtt is not None:
            st.srtt = self.recovery.rtt.srtt or 0.0
        st.ece_acks += fb.ece
        st.ece_events += ev.ece_event
        st.loss_events += ev.loss_event
        st.tolerated_events += ev.tolerated_event
        st.bytes_acked += ev.newly_acked
        if fb.ece:
            st.ece_bytes_acked += ev.newly_acked
        self.delivery.on_ack(ev.newly_acked, now, self.recovery.rtt.srtt)
        self.capacity = max(self.capacity, self.delivery.rate)
        if fb.ece and (share := own_share(self.delivery.rate, self.capacity)) is not None:
            t.share_sum += share  # a standing queue: how much of the busy link this flow gets
            t.share_n += 1
        # the echoed queue: this flow's share of the excess when the bottleneck has no room (0 when it has)
        excess = echo_excess(fb.queue_bytes, fb.rate_class, self.delivery.rate, self.capacity)
        if excess is not None:
            t.excess_sum += excess * acks
            t.excess_n += acks
        if ev.newly_acked:  # DCTCP's per-ACK echo (its alpha) before this ACK's congestion response
            self.cc.on_ecn_feedback(ev.newly_acked, ev.newly_acked if fb.ece else 0, now)
        if ev.loss_event:
            self.cc.on_loss(now)
        elif ev.tolerated_bytes:
            cwnd = self.cc.cwnd
            self.cc.on_mark(min(1.0, ev.tolerated_bytes / cwnd) if math.isfinite(cwnd) and cwnd > 0 else 1.0, now)
        if ev.newly_acked or ev.ece_event:
            self.cc.on_ack(ev.newly_acked, ev.rtt, ev.ece_event, now)
        if fb.fin or fb.cum_ack >= board.n:
            t.done = True
            t.fin = fb.fin
        elif board.complete:
            # Every chunk acknowledged, some only by SACKs, yet no FIN: a receiver holding the whole tensor
            # says FIN, so this one gave the tensor up (stale) and started again. Send it what it lacks
            # instead of taking the tensor for delivered (the peer would wait for it forever).
            st.reneged_chunks += board.renege(fb.cum_ack, fb.blocks)
        return ev.newly_acked > 0

    def _sample(self, now: float) -> None:
        if now < self._next_sample or len(self.stats.samples) >= self.config.max_samples:
            return
        self._next_sample = now + self.config.sample_interval
        d = self.cc.describe()
        f, ratio = self.cc.factor(), self.progress.ratio
        self.stats.samples.append((now - self._t0, d["cwnd"], d["rate"], self.stats.bytes_acked, f, ratio))
