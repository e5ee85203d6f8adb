"""Loss recovery for one flow, without sockets or clocks (time is passed in): what to send next, what an
ACK acknowledges, what is lost, when to time out, and what the congestion controller must hear.

* ``Scoreboard``: one tensor's chunks (unsent, in flight, lost, acknowledged, tolerated), updated from
  cumulative + selective ACKs; RACK-style loss detection (a chunk is lost once one sent
  ``reorder_window`` transmissions after it is acknowledged; fewer with little in flight, RFC 5827's
  idea); lost chunks are queued for retransmission unless the tolerated-loss budget of
  mlfc.policy.loss lets them stay lost (the receiver zero-fills them). Chunks the sender *withholds*
  (``withhold``: mlfc.policy.withhold, the network-decided share) are never sent: they take the same
  budget, start tolerated, and are no loss to the congestion controller.
* ``RttEstimator``: RFC 6298 SRTT/RTTVAR and the RTO with exponential backoff; Karn's rule (no samples
  from retransmitted chunks) is the scoreboard's.
* ``RecoveryPoint``: one congestion response per round trip: a loss or an ECN echo is a new congestion
  event only for data sent after the previous response (RFC 6582's recovery point, RFC 3168).
* ``FlowRecovery`` ties them together for the sender: ``on_ack`` returns the ``AckEvents`` the sender
  hands to its congestion controller, ``on_timeout`` handles an RTO. How a *tolerated* loss (one the
  budget lets stay lost; the switch's selective drop causes most of them) reaches the controller is
  ``tolerated_loss`` (TOLERATED_LOSS_REACTIONS): "loss" as any loss (a loss event), "ecn" as one ECN
  echo (an ECE event, at most one reduction per round trip like RFC 3168's), "proportional" (the default)
  a cut in proportion to the bytes dropped (``AckEvents.tolerated_bytes``; DCTCP's cwnd * (1 - a / 2) with
  a the share of the window dropped), "none" not at all.

Transmissions are numbered per flow (``FlowRecovery.next_tx``); RACK orders by that number.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from mlfc.hosts.importance import num_chunks
from mlfc.policy.loss import LossBudget

# chunk states
UNSENT, INFLIGHT, LOST, ACKED, TOLERATED = 0, 1, 2, 3, 4
MAX_BACKOFF = 64
# what a tolerated loss is to the congestion controller
TOLERATED_LOSS_REACTIONS = ("proportional", "ecn", "loss", "none")
# The default (issue 25 item 3): a tolerated drop is a low-importance chunk the switch chose to drop because
# its queue was deep, i.e. a congestion mark that happens to lose bytes the PS does not need, not evidence of
# overflow: the window shrinks in proportion to what was dropped (DCTCP/DCQCN-style marking), not by a loss
# halving; Reno's ECE path ("ecn") is a halving too. A loss that must be retransmitted is always a loss.
# "loss" and "ecn" keep the other reactions for measuring the difference (lab/approx/cli.py --tolerated-loss).
DEFAULT_TOLERATED_LOSS = "proportional"
_INFLIGHT_RUN = bytes([INFLIGHT]) * 128


class Scoreboard:
    """Sender-side state of one tensor of ``nbytes`` in chunks of ``chunk`` bytes with importance ``classes``."""

    def __init__(self, nbytes: int, chunk: int, classes: bytes | bytearray, budget: LossBudget) -> None:
        self.nbytes = nbytes
        self.chunk = chunk
        self.n = num_chunks(nbytes, chunk)
        if len(classes) != self.n:
            raise ValueError(f"{len(classes)} importance classes for {self.n} chunks")
        self.classes = classes
        self.budget = budget
        self.state = bytearray(self.n)
        self.acked = bytearray(self.n)
        self.retransmitted = bytearray(self.n)
        self.xmit_tx = [0] * self.n  # transmission number of the latest send of each chunk
        self.sent_at = [0.0] * self.n
        # (first tx, first seq, count): runs of chunks sent as consecutive transmissions, in transmission order
        self.outstanding: deque[tuple[int, int, int]] = deque()
        self.retx: deque[int] = deque()  # lost chunks to send again, in the order they were found lost
        self.next_new = 0
        self.inflight = 0
        self.acked_count = 0
        self.cum = 0
        self.max_acked_tx = 0
        self.retransmits = 0
        self.tolerated = 0  # chunks left to the receiver (they may still arrive and be acknowledged)
        self.tolerated_bytes = 0  # their bytes, as found lost (a late acknowledgement does not take them back)
        self.withheld = 0  # chunks never sent (``withhold``): left to the receiver from the start
        self.withheld_bytes = 0

    def withhold(self, seqs) -> int:
        """Before any send: chunks ``seqs`` are not sent, each while the loss budget takes its bytes (a
        protected one never: the last chunk is protected). Returns how many are withheld."""
        if self.next_new or self.inflight:
            raise ValueError("withhold before the first send")
        for seq in seqs:
            if not 0 <= seq < self.n or self.state[seq] != UNSENT:
                raise ValueError(f"chunk {seq} of {self.n} cannot be withheld")
            if self.budget.try_tolerate(self.classes[seq], self.size(seq)):
                self.state[seq] = TOLERATED
                self.withheld += 1
                self.withheld_bytes += self.size(seq)
        self._skip_withheld()
        return self.withheld

    def _skip_withheld(self) -> None:
        """Move the next new chunk past withheld ones (every chunk at or above it is unsent or withheld)."""
        while self.next_new < self.n and self.state[self.next_new] == TOLERATED:
            self.next_new += 1

    def size(self, seq: int) -> int:
        return self.chunk if seq < self.n - 1 else self.nbytes - self.chunk * (self.n - 1)

    def run_sizes(self, first: int, count: int) -> list[int]:
        """Payload bytes of chunks ``first .. first + count - 1``."""
        if count <= 0:
            return []
        if first + count < self.n:
            return [self.chunk] * count
        return [self.chunk] * (count - 1) + [self.size(self.n - 1)]

    @property
    def complete(self) -> bool:
        return self.acked_count == self.n

    @property
    def needs_probe(self) -> bool:
        """Nothing in flight or queued and every chunk sent, yet not all acknowledged (the rest tolerated)
        or the FIN lost: after an RTO, a probe makes the receiver repeat its ACK or FIN."""
        return self.inflight == 0 and not self.retx and self.next_new >= self.n

    # -- sending -------------------------------------------------------------------------------------

    def next_chunk(self) -> tuple[int, bool] | None:
        """(seq, is_retransmission) to send next, lost chunks first; None when nothing is left to send.
        A retransmission is taken off the queue: give it back with ``requeue`` if the send fails."""
        state = self.state
        while self.retx:
            seq = self.retx.popleft()
            if state[seq] == LOST:
                return seq, True
        if self.next_new < self.n:
            return self.next_new, False
        return None

    def requeue(self, seq: int) -> None:
        self.retx.appendleft(seq)

    def take(self, limit: int) -> tuple[list[int], int, int]:
        """Up to ``limit`` chunks for one batched send: lost ones first (taken off the queue: give them back
        with ``requeue_all`` if the send fails), then a run of new ones. Returns (retransmissions, first new
        chunk, new count). A short last chunk ends the batch (segments of one send are equal but the last)."""
        retx: list[int] = []
        state = self.state
        short_last = self.n - 1 if self.nbytes % self.chunk else -1
        while self.retx and len(retx) < limit:
            seq = self.retx.popleft()
            if state[seq] == LOST:
                retx.append(seq)
                if seq == short_last:
                    return retx, self.next_new, 0
        run_end = self.state.find(TOLERATED, self.next_new) if self.withheld else -1  # a withheld chunk ends the run
        end = self.n if run_end < 0 else run_end
        return retx, self.next_new, min(limit - len(retx), end - self.next_new)

    def requeue_all(self, seqs: list[int]) -> None:
        self.retx.extendleft(reversed(seqs))

    def on_transmit(self, seq: int, tx: int, now: float, retx: bool) -> None:
        """Chunk ``seq`` left as transmission ``tx``. A probe re-sends an acknowledged chunk: only its
        timing changes."""
        if self.state[seq] != ACKED:
            if self.state[seq] != INFLIGHT:
                self.inflight += 1
            self.state[seq] = INFLIGHT
            self.outstanding.append((tx, seq, 1))
        self.xmit_tx[seq] = tx
        self.sent_at[seq] = now
        if retx:
            self.retransmitted[seq] = 1
            self.retransmits += 1
        else:
            self.next_new = seq + 1
            self._skip_withheld()

    def on_transmit_run(self, first: int, count: int, tx: int, now: float) -> None:
        """New chunks ``first .. first + count - 1`` left as transmissions ``tx .. tx + count - 1``: what
        ``on_transmit`` chunk by chunk does, in slice operations."""
        if count <= 0:
            return
        end = first + count
        self.state[first:end] = _INFLIGHT_RUN[:count] if count <= len(_INFLIGHT_RUN) else bytes([INFLIGHT]) * count
        self.inflight += count
        self.xmit_tx[first:end] = range(tx, tx + count)
        self.sent_at[first:end] = [now] * count
        self.outstanding.append((tx, first, count))
        self.next_new = end
        self._skip_withheld()

    # -- feedback ------------------------------------------------------------------------------------

    def on_ack(self, cum_ack: int, blocks: tuple[tuple[int, int], ...]) -> tuple[int, int, int] | None:
        """Apply a cumulative ack and SACK blocks. Returns (bytes newly acknowledged, the highest
        transmission number among them (0: none), its chunk (-1: none)), or None for an ACK naming
        chunks beyond the tensor (the scoreboard is unchanged)."""
        n = self.n
        if cum_ack > n or any(e > n for _, e in blocks):
            return None
        newly = max_tx = 0
        rtt_seq = -1
        ranges = [(self.cum, cum_ack)] if cum_ack > self.cum else []
        ranges.extend((max(s, cum_ack), e) for s, e in blocks if e > cum_ack)
        acked, state, xmit_tx = self.acked, self.state, self.xmit_tx
        for s, e in ranges:
            if e - s > 1 and state.count(INFLIGHT, s, e) == e - s:
                # the common case, a run of chunks all in flight: the loop below in slice operations
                acked[s:e] = b"\x01" * (e - s)
                state[s:e] = bytes([ACKED]) * (e - s)
                self.inflight -= e - s
                self.acked_count += e - s
                newly += (e - s) * self.chunk if e < n else (e - 1 - s) * self.chunk + self.size(n - 1)
                txs = xmit_tx[s:e]
                top = max(txs)
                if top > max_tx:
                    max_tx, rtt_seq = top, s + txs.index(top)
                continue
            pos = s
            while True:
                i = acked.find(0, pos, e)
                if i < 0:
                    break
                acked[i] = 1
                prev = state[i]
                if prev == INFLIGHT:
                    self.inflight -= 1
                elif prev == TOLERATED:
                    self.budget.release(self.size(i))
                state[i] = ACKED
                newly += self.size(i)
                self.acked_count += 1
                if xmit_tx[i] > max_tx:
                    max_tx, rtt_seq = xmit_tx[i], i
                pos = i + 1
        if cum_ack > self.cum:
            self.cum = cum_ack
        if max_tx > self.max_acked_tx:
            self.max_acked_tx = max_tx
        return newly, max_tx, rtt_seq

    def renege(self, cum_ack: int, blocks: tuple[tuple[int, int], ...]) -> int:
        """The receiver no longer holds chunks it acknowledged: it gave the tensor up (no packet for its
        stale timeout, e.g. a flow starved in a low class) and this ACK is its new, partial copy's. Every
        acknowledged chunk from ``cum_ack`` on that ``blocks`` do not cover is queued for retransmission
        (a chunk the SACK blocks merely leave out may be sent twice: the receiver counts a duplicate).
        Returns how many chunks were queued."""
        held = bytearray(self.n)
        held[:cum_ack] = b"\x01" * cum_ack
        for s, e in blocks:
            held[s:e] = b"\x01" * (e - s)
        queued = 0
        for seq in range(cum_ack, self.n):
            if not held[seq] and self.state[seq] == ACKED:
                self.acked[seq] = 0
                self.state[seq] = LOST
                self.acked_count -= 1
                self.retx.append(seq)
                queued += 1
        self.cum = min(self.cum, cum_ack)
        return queued

    def rtt_sample(self, seq: int, now: float) -> float | None:
        """The RTT of chunk ``seq`` just acknowledged; None for a retransmitted chunk (Karn) or none."""
        if seq < 0 or self.retransmitted[seq]:
            return None
        return now - self.sent_at[seq]

    def detect_losses(self, reorder_window: int) -> int:
        """RACK: every chunk still in flight that was sent more than ``reorder_window`` transmissions before
        the latest acknowledged one is lost. Returns the highest transmission number declared lost (0: none)."""
        return max(self.detect_losses_split(reorder_window))

    def detect_losses_split(self, reorder_window: int) -> tuple[int, int]:
        """``detect_losses``, telling the two outcomes apart: (highest transmission number of the chunks
        queued for retransmission, highest of those tolerated), 0 for none."""
        # with few chunks in flight there are not reorder_window later ones to wait for
        horizon = self.max_acked_tx - max(1, min(reorder_window, self.inflight - 1))
        outstanding, state, xmit_tx = self.outstanding, self.state, self.xmit_tx
        lost_tx = tolerated_tx = 0
        while outstanding and outstanding[0][0] < horizon:
            tx0, seq0, count = outstanding[0]
            below = min(count, horizon - tx0)  # this run's transmissions older than the horizon
            if state.find(INFLIGHT, seq0, seq0 + below) >= 0:  # else all acknowledged, lost or tolerated already
                for j in range(below):
                    if state[seq0 + j] == INFLIGHT and xmit_tx[seq0 + j] == tx0 + j:  # not re-sent since
                        if self.declare_lost(seq0 + j):
                            tolerated_tx = tx0 + j
                        else:
                            lost_tx = tx0 + j
            if below == count:
                outstanding.popleft()
            else:
                outstanding[0] = (tx0 + below, seq0 + below, count - below)
        return lost_tx, tolerated_tx

    def declare_lost(self, seq: int) -> bool:
        """A chunk in flight is lost: tolerate it if the loss policy allows (True), else queue it for
        retransmission (False)."""
        self.inflight -= 1
        if self.budget.try_tolerate(self.classes[seq], self.size(seq)):
            self.state[seq] = TOLERATED
            self.tolerated += 1
            self.tolerated_bytes += self.size(seq)
            return True
        self.state[seq] = LOST
        self.retx.append(seq)
        return False

    def unacknowledged(self) -> tuple[int, ...]:
        """Chunks not acknowledged (so far): once the receiver has ended the transfer (FIN), the ones it
        zero-filled, as far as its ACKs told. Mostly tolerated chunks, but the receiver may also give up on
        a chunk still in flight or queued for retransmission when the bound covers it."""
        out = []
        acked, pos = self.acked, 0
        while (i := acked.find(0, pos)) >= 0:
            out.append(i)
            pos = i + 1
        return tuple(out)

    def on_rto(self) -> None:
        """Retransmission timeout: everything in flight is lost (in chunk order)."""
        for seq in range(self.n):
            if self.state[seq] == INFLIGHT:
                self.declare_lost(seq)
        self.outstanding.clear()


class RttEstimator:
    """RFC 6298: SRTT, RTTVAR and RTO = clamp(SRTT + 4 RTTVAR, min_rto, max_rto), doubled per backoff step."""

    def __init__(self, initial_rto: float, min_rto: float, max_rto: float) -> None:
        if not 0 < min_rto <= initial_rto <= max_rto:
            raise ValueError("need 0 < min_rto <= initial_rto <= max_rto")
        self.min_rto, self.max_rto = min_rto, max_rto
        self.srtt: float | None = None
        self.rttvar = 0.0
        self.base = initial_rto
        self.backoff = 1

    @property
    def rto(self) -> float:
        return min(self.max_rto, self.base * self.backoff)

    def sample(self, r: float) -> None:
        if self.srtt is None:
            self.srtt, self.rttvar = r, r / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - r)
            self.srtt = 0.875 * self.srtt + 0.125 * r
        self.base = min(self.max_rto, max(self.min_rto, self.srtt + 4 * self.rttvar))

    def back_off(self) -> None:
        self.backoff = min(self.backoff * 2, MAX_BACKOFF)

    def reset_backoff(self) -> None:
        self.backoff = 1


class RecoveryPoint:
    """Congestion events are counted once per round trip: only for data sent after the last response."""

    def __init__(self) -> None:
        self.tx = 0  # the flow's transmission number when the congestion controller last responded

    def is_new(self, tx: int) -> bool:
        return tx > self.tx

    def respond(self, tx_now: int) -> None:
        self.tx = tx_now


@dataclass(frozen=True, slots=True)
class AckEvents:
    """What one ACK means for the congestion controller."""

    newly_acked: int  # bytes
    rtt: float | None  # an RTT sample, if the ACK gave one
    loss_event: bool  # chunks found lost, sent after the recovery point: call on_loss
    ece_event: bool  # ECN echo for data sent after the recovery point, no loss event: a window reduction
    # tolerated chunks found lost, sent after the recovery point (whatever the reaction, for the counters)
    tolerated_event: bool = False
    # "proportional": bytes of tolerated chunks this ACK found lost (the controller's on_mark share); else 0
    tolerated_bytes: int = 0


class FlowRecovery:
    """Per-flow loss recovery state, kept across tensors like a TCP connection's."""

    def __init__(
        self, rtt: RttEstimator, reorder_window: int = 3, tolerated_loss: str = DEFAULT_TOLERATED_LOSS
    ) -> None:
        if reorder_window < 1:
            raise ValueError(f"reorder_window={reorder_window} must be >= 1")
        if tolerated_loss not in TOLERATED_LOSS_REACTIONS:
            raise ValueError(f"tolerated_loss={tolerated_loss!r}: choose one of {', '.join(TOLERATED_LOSS_REACTIONS)}")
        self.rtt = rtt
        self.reorder_window = reorder_window
        self.tolerated_loss = tolerated_loss
        self.point = RecoveryPoint()
        self.tx = 0  # transmissions so far

    def next_tx(self, count: int = 1) -> int:
        """Number ``count`` transmissions; returns the first number."""
        self.tx += count
        return self.tx - count + 1

    def on_ack(
        self, board: Scoreboard, cum_ack: int, blocks: tuple[tuple[int, int], ...], ece: bool, now: float
    ) -> AckEvents | None:
        """Scoreboard, then RTT, then RACK, then the recovery point; None for an ACK beyond the tensor.
        A tolerated loss is a loss event, an ECE event or nothing, as ``tolerated_loss`` says; a loss to
        retransmit is always a loss event."""
        acked = board.on_ack(cum_ack, blocks)
        if acked is None:
            return None
        newly, max_tx, rtt_seq = acked
        rtt = board.rtt_sample(rtt_seq, now)
        if rtt is not None:
            self.rtt.sample(rtt)
        tolerated_before = board.tolerated_bytes
        lost_tx, tolerated_tx = board.detect_losses_split(self.reorder_window)
        point = self.point
        tolerated_event = point.is_new(tolerated_tx)
        if self.tolerated_loss == "loss":
            lost_tx = max(lost_tx, tolerated_tx)
        loss_event = point.is_new(lost_tx)
        # one response per round trip: an echo on the ACK that finds a new loss is covered by the loss's
        # reduction (RFC 3168 6.1.2: at most once per window for loss and ECN together)
        ece_event = ece and not loss_event and point.is_new(max_tx)
        if self.tolerated_loss == "ecn" and tolerated_event and not loss_event:
            ece_event = True  # the window's response to one mark, not to a loss, for data the switch dropped
        if loss_event or ece_event:
            point.respond(self.tx)
        # proportional: every drop counts by its bytes, no once-per-round-trip rule (the cuts of one round
        # trip multiply to about 1 - dropped / (2 cwnd)); a loss event's own reduction covers them
        marked = board.tolerated_bytes - tolerated_before if self.tolerated_loss == "proportional" else 0
        return AckEvents(newly, rtt, loss_event, ece_event, tolerated_event, 0 if loss_event else marked)

    def on_timeout(self, board: Scoreboard) -> bool:
        """An RTO: back off; if chunks were in flight they are lost and the controller must collapse its
        window (True). With nothing in flight (False) the sender may probe (``board.needs_probe``)."""
        self.rtt.back_off()
        if board.inflight == 0:
            return False
        board.on_rto()
        self.point.respond(self.tx)
        return True
