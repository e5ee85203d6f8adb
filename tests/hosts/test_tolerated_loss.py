"""What a tolerated loss (within the tensor's loss bound, not retransmitted) does to the sender: the congestion
controller's reaction chosen by SenderConfig.tolerated_loss ("loss" | "ecn" | "none"), driven through the
sender's real ACK path with a counting controller, and the chunks the send result reports missing."""

from __future__ import annotations

import pytest

from mlfc.hosts.transport import Sender, SenderConfig
from mlfc.hosts.transport.outgoing import prepare
from mlfc.hosts.transport.packet import Feedback
from mlfc.hosts.transport.recovery import TOLERATED, FlowRecovery, RttEstimator
from mlfc.hosts.transport.sockets import bind_shim_socket
from mlfc.wire import IMPORTANCE_PROTECTED, Flags, MsgType

CHUNK = 1000
N = 20  # chunks per tensor


class CountingCc:
    """The two calls a loss or an echo can cause, counted."""

    def __init__(self) -> None:
        self.losses = 0
        self.ece_acks = 0
        self.acks = 0

    def on_loss(self, now: float) -> None:
        self.losses += 1

    def on_ack(self, acked_bytes: int, rtt: float | None, ece: bool, now: float) -> None:
        self.acks += 1
        self.ece_acks += ece

    def on_ecn_feedback(self, acked_bytes: int, marked_bytes: int, now: float) -> None:
        pass  # every ACK's echo (DCTCP's); not a reaction


@pytest.fixture
def peer():
    sock = bind_shim_socket("127.0.0.1")
    yield sock.getsockname()
    sock.close()


@pytest.fixture
def sender(peer):
    """sender(reaction): a Sender to ``peer`` whose congestion controller counts calls."""
    made: list[Sender] = []

    def make(reaction: str) -> tuple[Sender, CountingCc]:
        s = Sender(peer, ("127.0.0.1", 0), SenderConfig(chunk_size=CHUNK, tolerated_loss=reaction))
        made.append(s)
        s.cc = cc = CountingCc()
        return s, cc

    yield make
    for s in made:
        s.close()


def transfer(s: Sender, *, classes: bytes = bytes(N), bound: float = 0.5):
    """A tensor of N chunks, all sent (transmissions numbered by the flow), none acknowledged yet."""
    t = prepare(s.config, 1, 0, 0, bytes(N * CHUNK), list(classes), 0, 1, bound, batched=False)
    t.board.on_transmit_run(0, N, s.recovery.next_tx(N), 0.0)
    return t


def ack(cum: int, blocks: tuple[tuple[int, int], ...], flags: int = 0) -> Feedback:
    return Feedback(MsgType.ACK, 1, 0, 0, cum, flags, blocks)


@pytest.mark.parametrize(
    ("reaction", "losses", "ece_acks", "events"),
    [("loss", 1, 0, 1), ("ecn", 0, 1, 1), ("none", 0, 0, 2)],  # "none" never moves the recovery point
)
def test_a_tolerated_loss_drives_the_controller_as_configured(sender, reaction, losses, ece_acks, events):
    s, cc = sender(reaction)
    t = transfer(s)
    s._on_ack(t, ack(0, ((1, 10),)), 0.1)  # chunk 0 is lost (RACK) and tolerated: unprotected, within the bound
    assert t.board.state[0] == TOLERATED
    # a second tolerated loss among data sent before the response: no second reaction in this round trip
    s._on_ack(t, ack(0, ((1, 10), (11, 18))), 0.11)
    assert t.board.state[10] == TOLERATED
    assert (cc.losses, cc.ece_acks) == (losses, ece_acks)
    assert cc.acks == 2  # the newly acknowledged bytes reach the controller in every mode
    assert s.stats.tolerated_chunks == 2 and s.stats.tolerated_events == events
    assert s.stats.loss_events == losses and s.stats.ece_events == ece_acks


@pytest.mark.parametrize("reaction", ["loss", "ecn", "none"])
def test_a_loss_to_retransmit_is_a_loss_whatever_the_reaction_to_tolerated_ones(sender, reaction):
    s, cc = sender(reaction)
    classes = bytes([IMPORTANCE_PROTECTED]) + bytes(N - 1)  # chunk 0 may not stay lost
    t = transfer(s, classes=classes)
    s._on_ack(t, ack(0, ((1, 10),)), 0.1)
    assert list(t.board.retx) == [0]
    assert (cc.losses, cc.ece_acks) == (1, 0)


def test_an_ecn_reaction_comes_again_one_round_trip_later(sender):
    s, cc = sender("ecn")
    t = transfer(s)
    s._on_ack(t, ack(0, ((1, 10),)), 0.1)
    second = transfer(s)  # the next tensor's chunks leave after the response: their loss is a new event
    s._on_ack(second, ack(0, ((1, 10),)), 0.3)
    assert cc.ece_acks == 2 and cc.losses == 0


def test_a_real_echo_and_a_tolerated_loss_in_one_ack_are_one_reduction(sender):
    s, cc = sender("ecn")
    t = transfer(s)
    s._on_ack(t, Feedback(MsgType.ACK, 1, 0, 0, 0, Flags.ECE, ((1, 10),)), 0.1)
    assert (cc.losses, cc.ece_acks) == (0, 1)


def test_flow_recovery_refuses_an_unknown_reaction():
    with pytest.raises(ValueError, match="tolerated_loss"):
        FlowRecovery(RttEstimator(0.2, 0.05, 1.0), 3, "halve")
    with pytest.raises(ValueError, match="tolerated_loss"):
        SenderConfig(tolerated_loss="halve")


def test_the_send_result_lists_the_chunks_the_receiver_ended_without(sender):
    s, _ = sender("loss")
    t = transfer(s)
    s._on_ack(t, ack(0, ((1, 10),)), 0.1)  # chunk 0 tolerated
    # the receiver's FIN: it has everything but 0 (tolerated) and 18 (too recent for RACK: still in flight
    # here), which the receiver's deadline gave up on within the bound
    s._on_ack(t, ack(0, ((1, 18), (19, N)), Flags.FIN), 0.2)
    assert t.done and t.fin
    res = t.result(0.2)
    assert res.missing_chunks == (0, 18) and res.tolerated_chunks == 1
    # every chunk acknowledged: nothing missing
    full = transfer(s)
    s._on_ack(full, ack(N, ()), 0.3)
    assert full.done and full.result(0.3).missing_chunks == ()


def test_a_late_arrival_of_a_tolerated_chunk_is_not_reported_missing(sender):
    s, _ = sender("loss")
    t = transfer(s)
    s._on_ack(t, ack(0, ((1, 10),)), 0.1)
    s._on_ack(t, ack(N, (), Flags.FIN), 0.2)  # chunk 0 arrived after all (reordered)
    assert t.result(0.2).missing_chunks == ()


def test_with_reno_a_tolerated_loss_halves_the_window_unless_ignored(peer):
    # the real controller: Reno's ECE path is its loss decrease (RFC 3168), so "ecn" cuts as "loss" does;
    # only the increase for the bytes the same ACK acknowledged is skipped (on_ack returns after the cut)
    after = {}
    for reaction in ("loss", "ecn", "none"):
        s = Sender(peer, ("127.0.0.1", 0), SenderConfig(chunk_size=CHUNK, cc="reno", tolerated_loss=reaction))
        t = transfer(s)
        before = s.cc.cwnd
        s._on_ack(t, ack(0, ((1, 10),)), 0.1)
        assert t.board.state[0] == TOLERATED
        after[reaction] = s.cc.cwnd / before
        s.close()
    assert after["ecn"] == 0.5 and 0.5 < after["loss"] < 0.75 and after["none"] > 1
