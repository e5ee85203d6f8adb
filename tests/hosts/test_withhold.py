"""Withheld chunks (the network-decided share, mlfc.policy.withhold) in the transport: never sent, within the
loss bound, no loss to the controller, and the receiver's missing chunks; the proportional window reaction."""

from __future__ import annotations

import numpy as np
import pytest

from mlfc.hosts.cc.reno import Reno
from mlfc.hosts.transport import Receiver, ReceiverConfig, Sender, SenderConfig, bind_shim_socket
from mlfc.hosts.transport.recovery import TOLERATED, FlowRecovery, RttEstimator, Scoreboard
from mlfc.policy.loss import LossBudget
from mlfc.policy.telemetry import class_rate as rate_class_rate
from mlfc.policy.telemetry import rate_class
from mlfc.policy.withhold import ROOM_BYTES, WithholdPolicy
from mlfc.testing.lossy import LossySocket
from mlfc.wire import IMPORTANCE_PROTECTED

CHUNK = 1000


def board(n: int, bound_bp: int, classes: bytes | None = None) -> Scoreboard:
    cls = bytearray(classes or bytes(n))
    cls[-1] = IMPORTANCE_PROTECTED
    return Scoreboard(n * CHUNK, CHUNK, cls, LossBudget(n * CHUNK, bound_bp))


def test_withheld_chunks_are_skipped_by_both_send_paths():
    b = board(10, 5000)
    assert b.withhold([0, 3, 4]) == 3 and b.withheld_bytes == 3 * CHUNK
    assert b.next_chunk() == (1, False)
    assert b.take(8) == ([], 1, 2)  # the run stops before the withheld chunk 3
    b.on_transmit_run(1, 2, 1, 0.0)
    assert b.next_new == 5  # past 3 and 4
    sent = []
    while (nxt := b.next_chunk()) is not None:
        b.on_transmit(nxt[0], 10 + len(sent), 0.0, nxt[1])
        sent.append(nxt[0])
    assert sent == [5, 6, 7, 8, 9] and b.inflight == 7
    assert b.unacknowledged() == tuple(range(10))


def test_the_bound_is_never_exceeded_and_protected_chunks_are_sent():
    b = board(10, 2000, classes=bytes([0, IMPORTANCE_PROTECTED, 0, 0, 0, 0, 0, 0, 0, 0]))
    assert b.withhold([1, 2, 3, 4, 5]) == 2  # protected 1 refused; 20 % of 10 chunks: 2 and 3
    assert [i for i in range(10) if b.state[i] == TOLERATED] == [2, 3]
    assert b.budget.used == 2 * CHUNK == b.budget.limit
    assert not b.budget.try_tolerate(0, 1)  # nothing left for the network


def test_withhold_is_only_before_the_first_send():
    b = board(4, 5000)
    b.on_transmit(0, 1, 0.0, False)
    with pytest.raises(ValueError, match="before"):
        b.withhold([1])
    with pytest.raises(ValueError, match="cannot"):
        board(4, 5000).withhold([9])


@pytest.mark.parametrize("reaction", ["proportional", "ecn", "loss", "none"])
def test_withheld_chunks_are_no_loss_to_the_controller(reaction):
    b = board(10, 5000)
    b.withhold([2, 5])
    rec = FlowRecovery(RttEstimator(0.2, 0.05, 1.0), 3, reaction)
    while (nxt := b.next_chunk()) is not None:
        b.on_transmit(nxt[0], rec.next_tx(), 0.0, nxt[1])
    ev = rec.on_ack(b, 2, ((3, 5), (6, 10)), False, 0.01)
    assert ev is not None and b.complete is False and b.acked_count == 8
    assert not ev.loss_event and not ev.ece_event and not ev.tolerated_event and ev.tolerated_bytes == 0
    assert b.tolerated == 0


def test_a_tolerated_drop_cuts_reno_in_proportion_not_by_half():
    r = Reno(CHUNK)
    r._cwnd = r.ssthresh = 40 * CHUNK
    r.on_mark(0.1, 0.0)  # a tenth of the window dropped by the switch
    assert r.cwnd == pytest.approx(38 * CHUNK)  # * (1 - 0.1 / 2)
    r.on_mark(1.0, 0.0)
    assert r.cwnd == pytest.approx(19 * CHUNK)  # never more than the loss halving
    assert SenderConfig().tolerated_loss == "proportional"


def test_proportional_reports_the_dropped_bytes_once():
    b = board(20, 5000)
    rec = FlowRecovery(RttEstimator(0.2, 0.05, 1.0), 3, "proportional")
    b.on_transmit_run(0, 20, rec.next_tx(20), 0.0)
    ev = rec.on_ack(b, 0, ((2, 12),), False, 0.01)  # chunks 0, 1 lost and tolerated
    assert ev is not None and ev.tolerated_bytes == 2 * CHUNK and not ev.loss_event
    ev = rec.on_ack(b, 0, ((2, 14),), False, 0.02)
    assert ev is not None and ev.tolerated_bytes == 0


def test_a_withheld_push_over_loopback():
    rx = Receiver(("127.0.0.1", 0), ReceiverConfig(deadline=0.01))
    sock = LossySocket(bind_shim_socket("127.0.0.1"), None)
    tx = Sender(rx.address, config=SenderConfig(chunk_size=CHUNK), sock=sock)
    try:
        data = np.arange(20 * CHUNK // 4, dtype=np.float32).tobytes()
        r = tx.send_tensor(1, 0, 0, data, importance=0, loss_bound=0.2, withhold=[1, 7, 8], timeout=10)
        d = rx.recv(timeout=3)
        assert d.loss.missing_chunks == (1, 7, 8)
        assert {h.chunk_seq for h in sock.sent}.isdisjoint({1, 7, 8})  # never on the wire
        assert r.withheld_chunks == 3 and r.withheld_bytes == 3 * CHUNK and r.tolerated_chunks == 0
        assert r.missing_chunks == (1, 7, 8) and r.retransmits == 0 and r.congestion(WithholdPolicy()) == 0.0
    finally:
        tx.close()
        rx.close()


def test_the_flows_share_of_a_busy_link_is_sampled_at_marked_acks_only():
    """own_share: the delivery rate over the flow's capacity at each ACK that echoes ECN (mlfc.policy.withhold)."""
    SHARE = WithholdPolicy(signal="share")
    rx = Receiver(("127.0.0.1", 0), ReceiverConfig(deadline=0.01))
    data = np.arange(200 * CHUNK // 4, dtype=np.float32).tobytes()
    try:
        for tos, marked in ((0x03, True), (None, False)):  # every packet CE-marked / none
            sock = LossySocket(bind_shim_socket("127.0.0.1"), None, force_tos=tos)
            with Sender(rx.address, config=SenderConfig(chunk_size=CHUNK), sock=sock) as tx:
                results = [tx.send_tensor(1, i, 0, data, importance=0, timeout=10) for i in range(3)]
                for _ in range(3):
                    rx.recv(timeout=3)
            shares = [r.own_share for r in results]
            if marked:
                assert all(s is not None and 0 < s <= 1 for s in shares[1:]), shares
                assert tx.capacity > 0
                assert results[-1].congestion(SHARE) == pytest.approx(1 - shares[-1])
            else:
                assert shares == [None, None, None]
                assert results[-1].congestion(SHARE) == 0.0
    finally:
        rx.close()


@pytest.mark.parametrize("queue_bytes", [0, ROOM_BYTES, 100 * 1500])
def test_the_receiver_echoes_the_queue_telemetry_into_the_senders_sample(queue_bytes):
    """Every DATA packet leaves a 'switch' with (rate_class, queue_bytes) written in (testing.lossy); the
    receiver echoes them in its ACKs and the sender's sample is the mean excess over them: nothing while the
    queue leaves room, 1 - delivery rate / link rate when it stands (mlfc.policy.withhold.echo_excess)."""
    telemetry = WithholdPolicy(signal="telemetry")
    rx = Receiver(("127.0.0.1", 0), ReceiverConfig(deadline=0.01))
    data = np.arange(200 * CHUNK // 4, dtype=np.float32).tobytes()
    sock = LossySocket(bind_shim_socket("127.0.0.1"), None, telemetry=(rate_class(12e6), queue_bytes))
    try:
        with Sender(rx.address, config=SenderConfig(chunk_size=CHUNK), sock=sock) as tx:
            results = [tx.send_tensor(1, i, 0, data, importance=0, timeout=10) for i in range(3)]
            for _ in range(3):
                rx.recv(timeout=3)
        last = results[-1]
        assert last.excess is not None
        if queue_bytes <= ROOM_BYTES:
            assert [r.excess for r in results[1:]] == [0.0, 0.0] and last.congestion(telemetry) == 0.0
        else:
            # loopback outruns the class's 12 Mb/s: the link's rate is the flow's own highest delivery rate
            assert 0.0 < last.excess < 1.0 and tx.capacity > rate_class_rate(rate_class(12e6)) / 8
            assert last.congestion(telemetry) == pytest.approx(last.excess)
    finally:
        rx.close()
