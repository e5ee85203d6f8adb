"""Loss becomes delay: a worker keeps the gradient elements the PS zero-filled of a push (the send result's
missing chunks) and adds them to the tensor's next push (hosts/training/residual.py, client.py), and the PS
counts such a worker's lost copy as coming later (mlfc/policy/aggregation.py). With a fake transport
first (exact control of what is lost), then through the real PS and a lossy socket."""

from __future__ import annotations

import numpy as np
import pytest

from mlfc.hosts.training.cli import build_parser
from mlfc.hosts.training.client import ClientConfig, PushResult, WorkerClient
from mlfc.hosts.training.launch import TrainingJob, worker_argv
from mlfc.hosts.training.options import sender_config as _sender_config
from mlfc.hosts.training.residual import Residuals
from mlfc.hosts.transport import SenderConfig
from mlfc.hosts.transport.outgoing import SendResult
from mlfc.policy.aggregation import average_received, received_elements
from mlfc.policy.withhold import WithholdPolicy
from mlfc.testing.ps_pair import first_push_lossy, push_twice, small_server
from mlfc.wire import IMPORTANCE_PROTECTED, SHIM_PORT_BASE

CHUNK = 16  # bytes: 4 float32 per chunk
N = 40  # elements: 10 chunks


class FakeSender:
    """Stands in for the push flow: records what each push carried and reports the given chunks missing."""

    def __init__(self, losses: list[tuple[int, ...]]) -> None:
        self.config = SenderConfig(chunk_size=CHUNK)
        self.losses = list(losses)
        self.sent: list[tuple[np.ndarray, list[int], tuple[int, ...]]] = []  # (payload, classes, missing chunks)
        self.withheld: list[tuple[int, ...]] = []  # what each push was told to withhold
        self.bounds: list[float] = []  # each push's loss bound

    def send_tensor(self, job, iteration, tensor_id, buffer, *, importance, loss_bound, timeout, withhold=()):
        payload = np.array(buffer, dtype=np.float32, copy=True)
        missing = tuple(sorted({*withhold, *(self.losses.pop(0) if self.losses else ())}))
        self.sent.append((payload, list(importance), missing))
        self.withheld.append(tuple(withhold))
        self.bounds.append(loss_bound)
        return SendResult(job, iteration, tensor_id, payload.nbytes, -(-payload.nbytes // CHUNK), 0.0, 0,
                          len(missing) - len(withhold), bool(missing), missing, len(withhold),
                          CHUNK * len(withhold))  # fmt: skip

    def received(self, i: int) -> np.ndarray:
        """What the PS took of push ``i``: its payload with the missing chunks' elements zero-filled."""
        payload, _, missing = self.sent[i]
        return np.where(received_elements(payload.size, 4, CHUNK, missing), payload, 0.0).astype(np.float32)

    def close(self) -> None:
        pass


@pytest.fixture
def client_with():
    made = []

    def make(losses: list[tuple[int, ...]], **kw) -> tuple[WorkerClient, FakeSender]:
        cfg = ClientConfig(job=1, rank=0, ps=("127.0.0.1", SHIM_PORT_BASE + 1), rx_port=0, tx_port=0,
                           sender=SenderConfig(chunk_size=CHUNK), **{"loss_bound": 0.5, **kw})  # fmt: skip
        c = WorkerClient(cfg)
        fake = FakeSender(losses)
        made.append((c, c.tx))
        c.tx = fake
        return c, fake

    yield make
    for c, real in made:
        c.tx = real
        c.close()


def grad(seed: int) -> np.ndarray:
    # multiples of 1/8 in a small range: float32 sums of a few of them are exact
    return (np.random.default_rng(seed).integers(-400, 400, N) / 8).astype(np.float32)


def test_the_residual_holds_exactly_the_lost_elements_and_goes_out_with_the_next_push(client_with):
    c, fake = client_with([(2, 5), (), ()])
    g0, g1, g2 = grad(0), grad(1), grad(2)
    res = c.push(0, 3, g0, layer_index=0, num_layers=1)
    lost = np.zeros(N, bool)
    lost[8:12] = lost[20:24] = True  # chunks 2 and 5: elements 8..11 and 20..23
    r = c.residuals.get(3)
    assert r is not None and r[lost].tolist() == g0[lost].tolist() and not r[~lost].any()
    assert res.held_elements == 8
    c.push(1, 3, g1, layer_index=0, num_layers=1)
    assert fake.sent[1][0].tolist() == (g1 + np.where(lost, g0, 0)).tolist()  # gradient + residual
    assert c.residuals.get(3) is None  # fully delivered: nothing held
    c.push(2, 3, g2, layer_index=0, num_layers=1)
    assert fake.sent[2][0].tolist() == g2.tolist()


def test_residuals_are_per_tensor(client_with):
    c, fake = client_with([(0,), ()])
    g = grad(3)
    c.push(0, 0, g, layer_index=0, num_layers=2)
    c.push(0, 1, g, layer_index=1, num_layers=2)  # another tensor: its push carries no residual of tensor 0
    assert fake.sent[1][0].tolist() == g.tolist()
    assert 0 in c.residuals and 1 not in c.residuals


def test_nothing_is_lost_over_a_sequence_of_lossy_pushes(client_with):
    rng = np.random.default_rng(7)
    losses = [tuple(sorted(rng.choice(9, size=rng.integers(0, 5), replace=False).tolist())) for _ in range(11)]
    losses.append(())  # the last push is delivered whole
    c, fake = client_with(losses)
    grads = [grad(10 + i) for i in range(len(losses))]
    for it, g in enumerate(grads):
        c.push(it, 0, g, layer_index=0, num_layers=1)
    got = sum(fake.received(i).astype(np.float64) for i in range(len(grads)))
    assert got.tolist() == sum(g.astype(np.float64) for g in grads).tolist()
    # and with losses still held after the last push: what arrived + the residual = all gradients
    c2, fake2 = client_with([(1, 3), (4,)])
    for it in range(2):
        c2.push(it, 0, grads[it], layer_index=0, num_layers=1)
    arrived = fake2.received(0).astype(np.float64) + fake2.received(1)
    assert (arrived + c2.residuals.get(0)).tolist() == (grads[0].astype(np.float64) + grads[1]).tolist()


def test_importance_is_computed_on_gradient_plus_residual(client_with):
    c, fake = client_with([(3,), ()])
    g = np.ones(N, np.float32)
    g[12:16] = 50.0  # chunk 3: the largest, and lost
    c.push(0, 0, g, layer_index=0, num_layers=1)
    c.push(1, 0, np.ones(N, np.float32), layer_index=0, num_layers=1)
    classes = fake.sent[1][1]
    assert classes[3] >= IMPORTANCE_PROTECTED and classes[3] == max(classes)


@pytest.mark.parametrize(
    "kw",
    [{"loss_feedback": False}, {"loss_bound": 0.0}, {"mode": "aggregate"}],
    ids=["off", "no-loss-bound", "aggregate-mode"],
)
def test_no_residual_without_loss_feedback_a_loss_bound_or_in_aggregate_mode(client_with, kw):
    c, fake = client_with([(0, 1), ()], **kw)
    g0, g1 = grad(4), grad(5)
    out = PushResult()
    c.push(0, 0, g0, layer_index=0, num_layers=1, result=out)
    c.push(1, 0, g1, layer_index=0, num_layers=1, result=out)
    assert len(c.residuals) == 0 and out.held_elements == 0
    assert fake.sent[1][0].tolist() == g1.tolist()


def test_the_loss_bound_may_go_to_one_and_is_range_checked():
    for bound in (0.5, 0.75, 1.0):
        assert ClientConfig(job=1, rank=0, ps=("127.0.0.1", 1), loss_bound=bound).feeds_back_loss
    for bad in (-0.1, 1.5, True):
        with pytest.raises(ValueError, match="loss_bound"):
            ClientConfig(job=1, rank=0, ps=("127.0.0.1", 1), loss_bound=bad)


def test_residuals_refuse_a_gradient_of_another_shape():
    r = Residuals()
    sent = np.arange(4, dtype=np.float32)
    r.hold(0, sent, np.array([True, False, False, True]))
    assert r.get(0).tolist() == [0.0, 0.0, 0.0, 3.0]
    assert r.add(0, np.ones(4, np.float32)).tolist() == [1.0, 1.0, 1.0, 4.0]
    with pytest.raises(ValueError, match="residual of 4"):
        r.add(0, np.ones(5, np.float32))
    r.hold(0, sent, np.zeros(4, bool))  # nothing lost: the memory empties
    assert 0 not in r


def test_a_delayed_workers_lost_copy_counts_in_the_divisor():
    a, b = np.array([2.0, 4.0], np.float32), np.array([6.0, 8.0], np.float32)
    b_got = np.array([True, False])  # b's element 1 lost
    assert average_received([a, b], [None, b_got]).mean.tolist() == [4.0, 4.0]  # gone: a's alone
    assert average_received([a, b], [None, b_got], [False, True]).mean.tolist() == [4.0, 2.0]  # b's comes later
    agg = average_received([a, b], [~b_got, b_got], [True, True])  # a's element 0 lost too
    assert agg.mean.tolist() == [3.0, 2.0] and agg.contributors.tolist() == [1, 1]
    with pytest.raises(ValueError, match="delayed"):
        average_received([a, b], [None, None], [True])


def test_the_options_reach_the_worker_and_its_sender():
    ap = build_parser()
    args = ap.parse_args(["worker", "--job", "1", "--rank", "0", "--ps", "127.0.0.1", "--tolerated-loss", "loss",
                          "--no-loss-feedback", "--loss-bound", "0.5"])  # fmt: skip
    assert not args.loss_feedback and _sender_config(args).tolerated_loss == "loss"
    default = ap.parse_args(["worker", "--job", "1", "--rank", "0", "--ps", "127.0.0.1"])
    assert _sender_config(default).tolerated_loss == "proportional"  # a tolerated drop is a mark, not a loss (issue 25)
    args = ap.parse_args(["ps", "--job", "1", "--workers", "2", "--tolerated-loss", "none"])
    assert _sender_config(args).tolerated_loss == "none"
    assert build_parser().parse_args(["worker", "--job", "1", "--rank", "0", "--ps", "x"]).loss_feedback
    argv = worker_argv(TrainingJob(1, 2, 10, tolerated_loss="loss", loss_feedback=False), 0, "127.0.0.1", "10.0.0.1")
    assert argv[argv.index("--tolerated-loss") + 1] == "loss" and "--no-loss-feedback" in argv
    plain = worker_argv(TrainingJob(1, 2, 10), 0, "127.0.0.1", "10.0.0.1")
    assert "--tolerated-loss" not in plain and "--no-loss-feedback" not in plain
    with pytest.raises(SystemExit):
        ap.parse_args(["ps", "--job", "1", "--workers", "2", "--tolerated-loss", "halve"])


def test_through_the_ps_a_lost_chunk_arrives_in_the_next_iteration_counted_once():
    params = [np.zeros(N, np.float32)]
    g0 = np.arange(N, dtype=np.float32)
    g1 = 100 + np.arange(N, dtype=np.float32)
    # worker 1 loses the first transmission of every chunk of iteration 0's push (2 protected ones come again)
    with small_server(params) as srv:
        results = push_twice(srv, [g0, g1], [None, first_push_lossy()], loss_bound=1.0)
    assert results[1]["push0"].held_elements == 32  # chunks 0..7 zero-filled; 8, 9 protected and retransmitted
    held = np.concatenate([g1[:32], np.zeros(8, np.float32)])
    # iteration 0: worker 1's lost elements count as 0 (they come later), not as "worker 0's alone"
    mean0 = (g0 + g1 - held) / 2
    assert results[0]["params0"].tolist() == (-mean0).tolist()
    # iteration 1: worker 1's push carries them; over both iterations every gradient counted once
    mean1 = (g0 + g1 + held) / 2
    assert results[1]["params1"].tolist() == (-mean0 - mean1).astype(np.float32).tolist()
    assert (mean0 + mean1).tolist() == (g0 + g1).tolist()


def test_a_free_link_withholds_nothing_and_congestion_withholds_within_the_bound(client_with):
    c, fake = client_with([(), ()], loss_bound=0.25, withhold=WithholdPolicy(gain=4.0, weight=1.0))
    res = c.push(0, 3, grad(0), layer_index=0, num_layers=1)
    assert fake.withheld[0] == () and res.withheld_chunks == 0  # f(0) = 0: nothing before any congestion
    assert c.congestion is not None and c.congestion.value == 0.0  # and the push saw none
    c.congestion.value = 0.5  # half the chunks marked or dropped lately: min(0.25, 4 * 0.5) of the bytes
    res = c.push(1, 3, grad(1), layer_index=0, num_layers=1)
    assert len(fake.withheld[1]) == 2 and res.withheld_bytes == 2 * CHUNK <= 0.25 * N * 4  # 2 of 10 chunks
    _, classes, _ = fake.sent[1]
    kept = [i for i in range(10) if i not in fake.withheld[1]]
    assert max(classes[i] for i in fake.withheld[1]) <= min(classes[i] for i in kept[:-1])  # least important
    assert res.sent_bytes == N * 4 - 2 * CHUNK


def test_repairing_drops_tolerates_only_the_withheld_chunks(client_with):
    for repair in (False, True):
        c, fake = client_with([(), ()], loss_bound=0.25, withhold=WithholdPolicy(gain=4.0, weight=1.0),
                              repair_drops=repair)  # fmt: skip
        c.push(0, 3, grad(0), layer_index=0, num_layers=1)  # a free link: nothing withheld
        c.congestion.value = 0.5
        c.push(1, 3, grad(1), layer_index=0, num_layers=1)  # 2 of 10 chunks withheld
        assert len(fake.withheld[1]) == 2
        if repair:  # a drop beyond the plan is retransmitted: the bound covers the two chunks alone
            assert fake.bounds == [0.0, pytest.approx(2 * CHUNK / (N * 4), abs=1e-4)]
        else:
            assert fake.bounds == [0.25, 0.25]


def test_withheld_elements_arrive_summed_in_the_next_push_once(client_with):
    c, fake = client_with([(), (), ()], withhold=WithholdPolicy(weight=1.0))
    grads = [grad(20 + i) for i in range(3)]
    c.congestion.value = 0.1  # share min(0.5, 2 * 0.1): two chunks of the first push
    c.push(0, 0, grads[0], layer_index=0, num_layers=1)
    held = fake.withheld[0]
    assert len(held) == 2
    lost = ~received_elements(N, 4, CHUNK, held)
    assert c.residuals.get(0)[lost].tolist() == grads[0][lost].tolist()
    c.congestion.value = 0.0
    c.push(1, 0, grads[1], layer_index=0, num_layers=1)
    assert fake.withheld[1] == ()  # a free link again
    assert fake.sent[1][0].tolist() == (grads[1] + np.where(lost, grads[0], 0)).tolist()  # summed, once
    assert c.residuals.get(0) is None
    c.push(2, 0, grads[2], layer_index=0, num_layers=1)
    got = sum(fake.received(i).astype(np.float64) for i in range(3))
    assert got.tolist() == sum(g.astype(np.float64) for g in grads).tolist()  # nothing lost, nothing twice


def test_withhold_needs_loss_feedback():
    with pytest.raises(ValueError, match="withhold"):
        ClientConfig(job=1, rank=0, ps=("127.0.0.1", SHIM_PORT_BASE + 1), loss_bound=0.1, loss_feedback=False,
                     withhold=WithholdPolicy())  # fmt: skip
    args = build_parser().parse_args(["worker", "--job", "1", "--rank", "0", "--ps", "x", "--withhold"])
    assert args.withhold and args.withhold_gain is None and args.withhold_signal == WithholdPolicy().signal
    marks = build_parser().parse_args(
        ["worker", "--job", "1", "--rank", "0", "--ps", "x", "--withhold-signal", "share"]
    )
    assert WithholdPolicy(gain=marks.withhold_gain, signal=marks.withhold_signal).gain == 1.0
    argv = worker_argv(TrainingJob(1, 2, 10, loss_bound=0.1, withhold=True, withhold_signal="share"), 0, "x", "x")
    assert argv[argv.index("--withhold-signal") + 1] == "share"
    assert "--withhold" in worker_argv(TrainingJob(1, 2, 10, loss_bound=0.1, withhold=True), 0, "127.0.0.1", "x")
