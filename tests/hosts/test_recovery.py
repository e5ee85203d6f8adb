"""The sender's loss recovery without sockets (mlfc.hosts.transport.recovery) and its pacer, driven with
explicit times: SACK scoreboard, RACK detection, RFC 6298 RTT/RTO with backoff, the recovery point and the
tolerated-loss budget of mlfc.policy.loss."""

from __future__ import annotations

import pytest

from mlfc.hosts.transport.pacing import DeliveryRate, TokenBucket
from mlfc.hosts.transport.recovery import (
    ACKED,
    INFLIGHT,
    LOST,
    TOLERATED,
    UNSENT,
    AckEvents,
    FlowRecovery,
    RttEstimator,
    Scoreboard,
)
from mlfc.policy.loss import LossBudget
from mlfc.wire import IMPORTANCE_PROTECTED

CHUNK = 1000


def board(n: int, *, last: int = CHUNK, classes: bytes | None = None, bound_bp: int = 0) -> Scoreboard:
    nbytes = (n - 1) * CHUNK + last
    return Scoreboard(nbytes, CHUNK, bytearray(classes or bytes(n)), LossBudget(nbytes, bound_bp))


def send_all(b: Scoreboard, rec: FlowRecovery | None = None, now: float = 0.0) -> list[int]:
    """Send every chunk next_chunk offers; returns the transmission numbers used."""
    txs = []
    while (nxt := b.next_chunk()) is not None:
        seq, retx = nxt
        tx = rec.next_tx() if rec else len(txs) + 1
        b.on_transmit(seq, tx, now, retx)
        txs.append(tx)
    return txs


def flow(initial: float = 0.2) -> FlowRecovery:
    return FlowRecovery(RttEstimator(initial, 0.05, 1.0), reorder_window=3)


def test_chunks_go_out_in_order_and_cumulative_ack_frees_them():
    b = board(5, last=500)
    assert [b.size(i) for i in range(5)] == [1000, 1000, 1000, 1000, 500]
    for i in range(5):
        assert b.next_chunk() == (i, False)
        b.on_transmit(i, i + 1, 0.01 * i, retx=False)
    assert b.next_chunk() is None and b.inflight == 5 and bytes(b.state) == bytes([INFLIGHT] * 5)
    assert b.on_ack(2, ()) == (2000, 2, 1)  # 2 chunks, highest transmission 2 (chunk 1)
    assert b.rtt_sample(1, 0.25) == pytest.approx(0.24)
    assert b.on_ack(5, ()) == (2500, 5, 4) and b.complete and b.inflight == 0
    assert b.on_ack(5, ()) == (0, 0, -1)  # a repeat acknowledges nothing new


def test_sack_blocks_and_rack_declare_the_hole_lost():
    b = board(10)
    send_all(b)  # transmissions 1..10
    assert b.on_ack(0, ((1, 5),)) == (4000, 5, 4)
    assert b.inflight == 6 and b.max_acked_tx == 5
    # horizon = 5 - min(3, inflight - 1) = 2: chunk 0 (tx 1) is lost, 5..9 (tx 6..10) are not yet
    assert b.detect_losses(3) == 1
    assert b.state[0] == LOST and list(b.retx) == [0] and b.inflight == 5
    assert b.next_chunk() == (0, True)
    b.on_transmit(0, 11, 0.5, retx=True)
    assert b.retransmits == 1 and b.state[0] == INFLIGHT and b.inflight == 6
    assert b.on_ack(10, ()) == (6000, 11, 0)
    assert b.rtt_sample(0, 0.6) is None  # Karn: the acknowledged chunk was retransmitted


def test_rack_waits_for_fewer_later_chunks_when_little_is_in_flight():
    two = board(2)
    send_all(two)
    two.on_ack(0, ((1, 2),))
    assert two.detect_losses(3) == 0 and two.state[0] == INFLIGHT  # nothing later than chunk 1 to wait for
    three = board(3)
    send_all(three)
    three.on_ack(0, ((2, 3),))  # inflight 2: wait for one later transmission, not three
    assert three.detect_losses(3) == 1 and three.state[0] == LOST and three.state[1] == INFLIGHT


def test_lost_unprotected_chunks_are_tolerated_within_the_budget_then_retransmitted():
    b = board(10, bound_bp=1500)  # 15 % of 10,000 bytes: one chunk
    send_all(b)
    b.on_ack(0, ((3, 10),))  # 0, 1, 2 missing
    assert b.detect_losses(3) == 3  # tx 1..3 are below the horizon 10 - 3 = 7
    assert bytes(b.state[:3]) == bytes([TOLERATED, LOST, LOST]) and list(b.retx) == [1, 2]
    assert b.tolerated == 1 and b.budget.used == 1000
    b.on_ack(0, ((0, 1), (3, 10)))  # the tolerated chunk arrives late after all: its bytes come back
    assert b.state[0] == ACKED and b.budget.used == 0


def test_protected_chunks_and_the_last_are_never_tolerated():
    classes = bytes([IMPORTANCE_PROTECTED, 3, 3, 3, IMPORTANCE_PROTECTED])
    b = board(5, classes=classes, bound_bp=10000)  # the budget would cover the whole tensor
    send_all(b)
    b.on_rto()
    assert bytes(b.state) == bytes([LOST, TOLERATED, TOLERATED, TOLERATED, LOST])
    assert list(b.retx) == [0, 4] and not b.outstanding and b.inflight == 0


def test_ack_naming_chunks_beyond_the_tensor_changes_nothing():
    b = board(3)
    send_all(b)
    assert b.on_ack(4, ()) is None and b.on_ack(0, ((1, 9),)) is None
    assert b.acked_count == 0 and b.inflight == 3


def test_rtt_estimator_follows_rfc_6298():
    r = RttEstimator(initial_rto=0.2, min_rto=0.05, max_rto=1.0)
    assert r.rto == 0.2 and r.srtt is None
    r.sample(0.1)
    assert (r.srtt, r.rttvar, r.rto) == (0.1, 0.05, pytest.approx(0.3))
    r.sample(0.2)  # RTTVAR = 3/4 0.05 + 1/4 |0.1 - 0.2|, SRTT = 7/8 0.1 + 1/8 0.2
    assert r.rttvar == pytest.approx(0.0625) and r.srtt == pytest.approx(0.1125)
    assert r.rto == pytest.approx(0.1125 + 4 * 0.0625)
    r.back_off()
    assert r.rto == pytest.approx(2 * 0.3625)
    for _ in range(10):
        r.back_off()
    assert r.backoff == 64 and r.rto == 1.0  # backoff and RTO both capped
    r.reset_backoff()
    assert r.rto == pytest.approx(0.3625)
    r.sample(0.001)
    r.sample(0.001)
    assert r.base >= 0.05  # min_rto floor
    with pytest.raises(ValueError):
        RttEstimator(0.01, 0.05, 1.0)


def test_one_congestion_event_per_round_trip():
    rec = flow()
    b = board(20)
    txs = send_all(b, rec)
    assert txs == list(range(1, 21)) and rec.tx == 20
    ev = rec.on_ack(b, 0, ((1, 8),), ece=True, now=0.1)
    # a loss and an echo on one ACK: one response, the loss's (RFC 3168 6.1.2)
    assert ev == AckEvents(newly_acked=7000, rtt=pytest.approx(0.1), loss_event=True, ece_event=False)
    assert rec.point.tx == 20 and rec.rtt.srtt == pytest.approx(0.1)
    # more losses and echoes for data sent before the response: no new event
    ev = rec.on_ack(b, 0, ((1, 8), (10, 13)), ece=True, now=0.11)
    assert b.state[8] == LOST and b.state[9] == INFLIGHT and ev.newly_acked == 3000
    assert not ev.loss_event and not ev.ece_event
    b.on_transmit(0, rec.next_tx(), 0.12, retx=True)  # tx 21, after the recovery point
    ev = rec.on_ack(b, 1, ((1, 8), (10, 13)), ece=True, now=0.2)
    assert ev.ece_event and not ev.loss_event and ev.rtt is None  # retransmitted: no RTT sample (Karn)
    assert rec.point.tx == 21


def test_timeout_loses_everything_in_flight_and_backs_off():
    rec = flow(initial=0.2)
    b = board(4)
    send_all(b, rec)
    assert rec.on_timeout(b) is True
    assert bytes(b.state) == bytes([LOST] * 4) and list(b.retx) == [0, 1, 2, 3]
    assert rec.rtt.rto == pytest.approx(0.4) and rec.point.tx == 4
    send_all(b, rec)
    rec.on_ack(b, 4, (), ece=False, now=1.0)
    assert b.complete and b.needs_probe
    assert rec.on_timeout(b) is False and rec.rtt.rto == pytest.approx(0.8)  # nothing in flight: probe instead


def test_probe_of_an_acknowledged_chunk_changes_only_its_timing():
    b = board(3, bound_bp=10000)
    send_all(b)
    b.on_ack(0, ((2, 3),))
    b.on_rto()  # chunks 0 and 1 tolerated, the last acknowledged
    assert b.needs_probe and not b.complete
    b.on_transmit(2, 9, 2.0, retx=True)
    assert b.state[2] == ACKED and b.inflight == 0 and b.xmit_tx[2] == 9 and b.retransmitted[2]
    assert not b.outstanding and b.needs_probe


def test_a_failed_retransmission_goes_back_to_the_front():
    b = board(3)
    send_all(b)
    b.on_rto()
    seq, retx = b.next_chunk()
    assert (seq, retx) == (0, True)
    b.requeue(seq)
    assert b.next_chunk() == (0, True)
    assert b.state[0] == LOST and UNSENT not in bytes(b.state)


def test_token_bucket_paces_at_the_rate_with_a_burst_cap():
    tb = TokenBucket(now=0.0)
    assert not tb.may_send
    tb.refill(rate=1000.0, burst=3000.0, now=1.0)
    assert tb.tokens == 1000.0 and tb.may_send
    tb.spend(1500)  # a packet may take the bucket below zero
    assert tb.tokens == -500.0 and not tb.may_send and tb.wait(1000.0) == pytest.approx(0.501)
    tb.refill(rate=1000.0, burst=3000.0, now=10.0)
    assert tb.tokens == 3000.0  # capped at the burst


def test_a_run_sent_at_once_is_tracked_as_chunk_by_chunk_sends():
    one, run = board(10), board(10)
    for i in range(10):
        one.on_transmit(i, i + 1, 0.0, retx=False)
    run.on_transmit_run(0, 10, 1, 0.0)
    assert (run.inflight, run.next_new, run.xmit_tx, run.sent_at) == (10, 10, one.xmit_tx, one.sent_at)
    for b in (one, run):
        assert b.on_ack(0, ((4, 6),)) == (2000, 6, 5)
        assert b.detect_losses(3) == 2  # horizon 6 - 3: transmissions 1 and 2 (chunks 0, 1) are lost
    assert bytes(one.state) == bytes(run.state) and list(one.retx) == list(run.retx) == [0, 1]
    assert run.outstanding[0] == (3, 2, 8)  # the run is cut at the horizon
    for b in (one, run):
        b.on_transmit(0, 11, 0.1, retx=True)  # chunk 0 again: its entry in the old run is stale now
        b.on_ack(0, ((4, 10),))
        # inflight 3 (chunks 0, 2, 3): horizon 10 - 2 = 8, so chunks 2 and 3 (tx 3, 4) are lost, chunk 0 is not
        assert b.detect_losses(3) == 4 and list(b.retx) == [0, 1, 2, 3]
        assert b.state[0] == INFLIGHT and b.next_chunk() == (1, True)  # the queued 0 was re-sent: skipped


def test_take_builds_batches_lost_chunks_first_and_a_short_last_chunk_at_the_end():
    b = board(6, last=300)
    assert b.take(4) == ([], 0, 4) and b.run_sizes(0, 4) == [1000] * 4
    b.on_transmit_run(0, 4, 1, 0.0)
    b.on_rto()
    assert b.take(3) == ([0, 1, 2], 4, 0)
    b.requeue_all([0, 1, 2])
    assert list(b.retx) == [0, 1, 2, 3]
    assert b.take(6) == ([0, 1, 2, 3], 4, 2) and b.run_sizes(4, 2) == [1000, 300]
    b.on_transmit_run(4, 2, 5, 0.0)
    b.declare_lost(5)  # the short last chunk lost: it ends any batch it is in
    b.requeue_all([0, 1, 2, 3])
    b.retx.rotate(1)  # [5, 0, 1, 2, 3]
    assert b.take(6) == ([5], 6, 0)


def test_delivery_rate_is_measured_over_an_srtt_at_least():
    d = DeliveryRate(min_window=0.001)
    d.on_ack(1000, 0.0, None)  # opens the first window
    assert d.rate == 0.0
    d.on_ack(1000, 0.0005, 0.002)
    d.on_ack(1000, 0.0015, 0.002)
    assert d.rate == 0.0  # 1.5 ms < SRTT 2 ms: still open
    d.on_ack(2000, 0.002, 0.002)
    assert d.rate == pytest.approx(4000 / 0.002)
    d.restart(10.0)  # an idle gap says nothing of the path
    d.on_ack(500, 10.002, None)
    assert d.rate == pytest.approx(500 / 0.002)


def test_renege_queues_what_the_receiver_no_longer_holds():
    b = board(10)
    send_all(b)
    assert b.on_ack(10, ()) is not None and b.complete
    # the receiver's new copy holds chunks 0..2 and 6..7 only
    assert b.renege(3, ((6, 8),)) == 5
    assert not b.complete and b.cum == 3
    assert [b.state[i] for i in range(10)] == [ACKED] * 3 + [LOST] * 3 + [ACKED] * 2 + [LOST] * 2
    assert [b.next_chunk() for _ in range(5)] == [(3, True), (4, True), (5, True), (8, True), (9, True)]
