"""Approximate pulls (issue 25 item 4, hosts/training/pull_copies.py): the PS leaves out the parameter chunks
that changed least since a worker last got them, as much as congestion says and within the bound; the worker
keeps its previous values there; what was left out goes out later (delayed, never lost). Unit tests of the
PS's copies, then through the real PS and two workers on loopback."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from mlfc.hosts.training import pull_copies
from mlfc.hosts.training.cli import build_parser
from mlfc.hosts.training.client_config import ClientConfig
from mlfc.hosts.training.launch import TrainingJob, ps_argv, worker_argv
from mlfc.hosts.training.pull_copies import PullCopies, apply_pull, keep_previous
from mlfc.hosts.training.server import ServerConfig, TrainingServer
from mlfc.policy.precision import encoded_bytes
from mlfc.policy.withhold import WithholdPolicy
from mlfc.testing.ps_pair import SMALL, small_client
from mlfc.wire import IMPORTANCE_PROTECTED

CHUNK = 16  # bytes: 4 float32 per chunk
N = 40  # elements: 10 chunks


def run_workers(worker, ps: threading.Thread, ranks: int = 2) -> None:  # type: ignore[no-untyped-def]
    """Run ``worker(rank)`` for every rank in its own thread beside the PS's, and wait for all of them."""
    threads = [threading.Thread(target=worker, args=(r,)) for r in range(ranks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    ps.join(timeout=30)


def copies(bound: float = 0.5) -> PullCopies:
    return PullCopies(WithholdPolicy(), bound)


def test_the_first_pull_is_whole_and_then_the_copy_is_what_arrived():
    pc, p = copies(), np.arange(N, dtype=np.float32)
    assert pc.plan(0, p, CHUNK, 0, 1) is None  # no copy known: whole and protected
    assert pc.delivered(0, p, (), CHUNK, 0.0) == 0
    np.testing.assert_array_equal(pc.copies[0], p)
    p += 1  # the optimizer moves the live parameters: the copy must not move with them
    assert pc.copies[0][0] == 0.0


def test_a_free_link_leaves_nothing_out():
    pc, p = copies(), np.arange(N, dtype=np.float32)
    pc.delivered(0, p, (), CHUNK, 0.0)
    plan = pc.plan(0, p + np.linspace(0, 1, N, dtype=np.float32), CHUNK, 0, 1)
    assert plan is not None and plan.withhold == [] and plan.loss_bound == 0.5
    assert len(plan.classes) == 10


def test_congestion_leaves_out_the_least_changed_chunks_within_the_bound():
    pc, p = copies(0.3), np.zeros(N, dtype=np.float32)
    pc.delivered(0, p, (), CHUNK, 1.0)  # a fully marked pull: the estimate rises
    pc.congestion.value = 1.0
    change = np.repeat(np.array([5, 1, 9, 2, 8, 3, 7, 4, 6, 10], dtype=np.float32), 4)
    plan = pc.plan(0, p + change, CHUNK, 0, 1)
    assert plan.withhold == [1, 3, 5]  # the three smallest changes: 30 % of 10 chunks
    assert all(plan.classes[i] < IMPORTANCE_PROTECTED for i in plan.withhold)
    assert 9 not in plan.withhold  # the last chunk never (it ends the tensor)


def test_what_was_left_out_stays_the_difference_and_goes_out_later():
    pc, p = copies(), np.zeros(N, dtype=np.float32)
    pc.delivered(0, p, (), CHUNK, 0.0)
    new = p + np.repeat(np.arange(1, 11, dtype=np.float32), 4)
    assert pc.delivered(0, new, (0, 1), CHUNK, 0.0) == 8  # chunks 0 and 1 left out: 8 elements stale
    np.testing.assert_array_equal(pc.copies[0][:8], 0)  # the worker still has the old values there
    np.testing.assert_array_equal(pc.copies[0][8:], new[8:])
    pc.congestion.value = 1.0
    same = new.copy()  # nothing changed since: only chunks 0 and 1 differ from the worker's copy
    plan = pc.plan(0, same, CHUNK, 0, 1)
    assert 0 not in plan.withhold and 1 not in plan.withhold  # the grown difference is sent now


def test_an_unknown_copy_falls_back_to_a_whole_pull():
    pc, p = copies(), np.zeros(N, dtype=np.float32)
    pc.delivered(0, p, (3,), CHUNK, 0.0)  # a whole pull that lost a chunk: what the worker holds is unknown
    assert pc.plan(0, p, CHUNK, 0, 1) is None


def test_the_worker_keeps_its_previous_values_where_chunks_are_missing():
    prev = np.full(N, 7.0, dtype=np.float32)
    pulled = np.arange(N, dtype=np.float32)
    pulled[4:8] = 0  # the receiver zero-filled chunk 1
    out = keep_previous(prev, pulled, (1,), CHUNK)
    np.testing.assert_array_equal(out[4:8], 7.0)
    np.testing.assert_array_equal(np.delete(out, range(4, 8)), np.delete(np.arange(N, dtype=np.float32), range(4, 8)))
    assert keep_previous(prev, pulled, (), CHUNK) is pulled


@pytest.mark.parametrize("bound", [0.0, 1.5])
def test_bad_bounds_are_refused(bound):
    with pytest.raises(ValueError, match="pull loss bound"):
        copies(bound)
    with pytest.raises(ValueError, match="pull_withhold needs"):
        ServerConfig(job=5, workers=1, pull_withhold=WithholdPolicy(), pull_loss_bound=bound)
    with pytest.raises(ValueError, match="pull_withhold needs"):
        ServerConfig(job=5, workers=1, mode="aggregate", pull_withhold=WithholdPolicy(), pull_loss_bound=0.5)


def test_the_ps_command_line_carries_the_bound():
    argv = ps_argv(TrainingJob(job=3, workers=2, iterations=5, pull_loss_bound=0.4), "10.0.0.1")
    assert argv[argv.index("--pull-loss-bound") + 1] == "0.4"
    assert "--pull-loss-bound" not in ps_argv(TrainingJob(job=3, workers=2, iterations=5), "10.0.0.1")
    args = build_parser().parse_args(["ps", "--job", "3", "--workers", "2", "--pull-loss-bound", "0.4"])
    assert args.pull_loss_bound == 0.4


def test_through_the_real_ps_left_out_chunks_keep_old_values_and_arrive_later(monkeypatch):
    monkeypatch.setattr(pull_copies, "withheld_share", lambda policy, c, bound: bound)  # as congested as can be
    params = [np.zeros(N, dtype=np.float32)]

    def apply(_it: int, means: list[np.ndarray]) -> None:
        params[0] -= means[0]

    cfg = ServerConfig(job=5, workers=2, port=0, tx_port_base=None, deadline=0.005, timeout=20, sender=SMALL,
                       pull_withhold=WithholdPolicy(), pull_loss_bound=0.5)  # fmt: skip
    srv = TrainingServer(cfg, parameters=params, apply=apply, emit=None)
    # two iterations of real gradients, then none: the parameters stop moving, so what the workers still
    # lack is only what was left out before, which must reach them
    grads = [np.linspace(0.1, 4.0, N, dtype=np.float32), np.linspace(4.0, 0.1, N, dtype=np.float32) ** 2]
    iterations = 5
    ps = threading.Thread(target=lambda: (srv.accept(), srv.run(iterations)), daemon=True)
    ps.start()
    seen: dict[int, list] = {}

    def worker(rank: int) -> None:
        with small_client(srv, rank) as c:
            c.connect([N])
            held = c.initial_parameters().copy()
            out = []
            for it in range(iterations):
                c.start_iteration(4 * N)
                g = grads[rank] if it < 2 else np.zeros(N, dtype=np.float32)
                c.push(it, 0, g, layer_index=0, num_layers=1)
                d = c.wait(it, 0)
                held = keep_previous(held, np.frombuffer(d.data, np.float32).copy(), d.loss.missing_chunks,
                                     d.loss.chunk_size)  # fmt: skip
                out.append((held.copy(), tuple(d.loss.missing_chunks), c.stats(it)))
            seen[rank] = out

    run_workers(worker, ps)
    assert set(seen) == {0, 1}
    mean = (grads[0] + grads[1]) / 2
    for rank in range(2):
        (p0, miss0, s0), (p1, miss1, s1) = seen[rank][:2]
        assert miss0 == () and s0["pull_withheld_chunks"] == 0  # the first pull is whole
        np.testing.assert_allclose(p0, -mean, rtol=1e-6)
        assert 0 < len(miss1) <= 5 and 9 not in miss1  # within the bound (half of 10 chunks), never the last
        assert s1["pull_withheld_chunks"] == len(miss1) and s1["pull_sent_bytes"] == 4 * N - CHUNK * len(miss1)
        stale = np.zeros(N, dtype=bool)
        for seq in miss1:
            stale[4 * seq : 4 * seq + 4] = True
        np.testing.assert_allclose(p1[stale], p0[stale])  # left out: the previous values
        np.testing.assert_allclose(p1[~stale], -2 * mean[~stale], rtol=1e-6)
        assert sum(s["pull_withheld_chunks"] for _, _, s in seen[rank]) > len(miss1)  # still leaving out later
        final = seen[rank][-1][0]
        np.testing.assert_array_equal(final, params[0])  # delayed, never lost: the worker has the PS's model
        np.testing.assert_array_equal(srv.workers[rank].pulls.copies[0], final)  # and the PS knows it


# --- pulls at a lower precision (issue 46 item 3): the change since the worker's copy, rounded --------------


def test_a_pull_below_fp32_is_the_rounded_change_and_the_copy_is_exactly_what_the_worker_adds(monkeypatch):
    monkeypatch.setattr(pull_copies, "share_for", lambda policy, c: 0.65)  # int8's shed (56 of 160 bytes)
    pc = PullCopies(WithholdPolicy(), 0.5, precision=True)
    p0 = np.linspace(-1, 1, N, dtype=np.float32)
    assert pc.plan(0, p0, CHUNK, 0, 1) is None  # no copy known: whole, as without precision
    pc.delivered(0, p0, (), CHUNK, 0.0)
    held = p0.copy()
    p1 = p0 + np.linspace(0.01, 0.4, N, dtype=np.float32)
    plan = pc.plan(0, p1, CHUNK, 0, 1)
    assert plan is not None and plan.precision == "int8" and plan.withhold == []
    assert len(plan.payload) == encoded_bytes("int8", N, CHUNK) < 4 * N  # the bytes on the wire shrink
    held = apply_pull(held, plan.payload, (), CHUNK)
    assert pc.delivered(0, p1, (), CHUNK, 0.0, plan) == 0
    np.testing.assert_array_equal(pc.copies[0], held)  # the PS knows exactly what the worker holds
    assert 0 < np.abs(held - p1).max() <= 0.4 / 127  # within int8's rounding of the change


def test_a_lost_chunk_of_a_change_is_no_change_and_the_rest_arrives_with_the_next_pulls(monkeypatch):
    monkeypatch.setattr(pull_copies, "share_for", lambda policy, c: 0.65)
    pc = PullCopies(WithholdPolicy(), 0.5, precision=True)
    p0 = np.zeros(N, dtype=np.float32)
    pc.delivered(0, p0, (), CHUNK, 0.0)
    held = p0.copy()
    p1 = np.linspace(0.5, 2.0, N, dtype=np.float32)
    plan = pc.plan(0, p1, CHUNK, 0, 1)
    wire = bytearray(plan.payload)
    wire[CHUNK : 2 * CHUNK] = bytes(CHUNK)  # chunk 1 lost: the receiver zero-fills it
    held = apply_pull(held, wire, (1,), CHUNK)
    assert pc.delivered(0, p1, (1,), CHUNK, 0.0, plan) == CHUNK - 4  # an int8 chunk's elements went stale
    np.testing.assert_array_equal(pc.copies[0], held)
    np.testing.assert_array_equal(held[12:24], p0[12:24])  # no change where nothing arrived
    for _ in range(4):  # the parameters stop moving: what is missing and the rounding go out, never lost
        plan = pc.plan(0, p1, CHUNK, 0, 1)
        held = apply_pull(held, plan.payload, (), CHUNK)
        pc.delivered(0, p1, (), CHUNK, 0.0, plan)
        np.testing.assert_array_equal(pc.copies[0], held)
    np.testing.assert_allclose(held, p1, rtol=0, atol=1e-6)


def test_without_precision_a_pull_stays_fp32_whatever_the_share(monkeypatch):
    monkeypatch.setattr(pull_copies, "share_for", lambda policy, c: 0.65)
    pc = copies()
    pc.delivered(0, np.zeros(N, dtype=np.float32), (), CHUNK, 0.0)
    plan = pc.plan(0, np.ones(N, dtype=np.float32), CHUNK, 0, 1)
    assert plan is not None and plan.precision == "fp32" and plan.payload is None


def test_through_the_real_ps_a_precision_worker_takes_fp16_changes_and_ends_with_the_ps_model(monkeypatch):
    monkeypatch.setattr(pull_copies, "share_for", lambda policy, c: 0.5)  # fp16's shed: nothing left out
    params = [np.zeros(N, dtype=np.float32)]

    def apply(_it: int, means: list[np.ndarray]) -> None:
        params[0] -= means[0]

    cfg = ServerConfig(job=5, workers=2, port=0, tx_port_base=None, deadline=0.005, timeout=20, sender=SMALL,
                       pull_withhold=WithholdPolicy(), pull_loss_bound=0.5, pull_precision=True)  # fmt: skip
    srv = TrainingServer(cfg, parameters=params, apply=apply, emit=None)
    grads = [np.linspace(0.1, 4.0, N, dtype=np.float32) / 3, np.linspace(4.0, 0.1, N, dtype=np.float32) / 7]
    iterations = 6
    ps = threading.Thread(target=lambda: (srv.accept(), srv.run(iterations)), daemon=True)
    ps.start()
    seen: dict[int, list] = {}

    def worker(rank: int) -> None:
        policy = WithholdPolicy(signal="telemetry")
        with small_client(srv, rank, loss_bound=0.5, withhold=policy, precision=True) as c:
            c.connect([N])
            held = c.initial_parameters().copy()
            out = []
            for it in range(iterations):
                c.start_iteration(4 * N)
                c.push(it, 0, grads[rank] if it < 2 else np.zeros(N, dtype=np.float32), layer_index=0, num_layers=1)
                d = c.wait(it, 0)
                out.append((len(d.data), c.stats(it)))
                held = apply_pull(held, d.data, d.loss.missing_chunks, d.loss.chunk_size)
            seen[rank] = [*out, held]

    run_workers(worker, ps)
    assert set(seen) == {0, 1}
    for rank in range(2):
        *pulls, held = seen[rank]
        assert pulls[0][0] == 4 * N  # the first pull is the parameters, whole
        assert all(n == 2 * N for n, _ in pulls[1:])  # then fp16 changes
        assert all(s["pull_sent_bytes"] == 2 * N for _, s in pulls[1:])
        np.testing.assert_array_equal(srv.workers[rank].pulls.copies[0], held)  # the PS knows what it holds
        np.testing.assert_allclose(held, params[0], rtol=1e-5, atol=1e-7)  # the rounding went out too


def test_pull_precision_needs_approximate_pulls_and_reaches_the_ps():
    with pytest.raises(ValueError, match="pull_precision needs approximate pulls"):
        ServerConfig(job=5, workers=1, pull_precision=True)
    job = TrainingJob(job=3, workers=2, iterations=5, pull_loss_bound=0.4, pull_precision=True)
    assert "--pull-precision" in ps_argv(job, "10.0.0.1")
    assert "--pull-precision" not in ps_argv(TrainingJob(job=3, workers=2, iterations=5, pull_loss_bound=0.4), "x")
    args = build_parser().parse_args(["ps", "--job", "3", "--workers", "2", "--pull-loss-bound", "0.4",
                                      "--pull-precision"])  # fmt: skip
    assert args.pull_precision


def test_repairing_drops_tolerates_only_the_chunks_left_out_by_plan(monkeypatch):
    monkeypatch.setattr(pull_copies, "withheld_share", lambda policy, c, bound: 0.3)  # fp32: 3 of 10 chunks out
    monkeypatch.setattr(pull_copies, "share_for", lambda policy, c: 0.65)  # by precision: int8, nothing out
    p0 = np.linspace(-1, 1, N, dtype=np.float32)
    p1 = p0 + np.linspace(0.0, 0.4, N, dtype=np.float32)
    plans = {}
    for precision in (False, True):
        for repair in (False, True):
            pc = PullCopies(WithholdPolicy(), 0.5, precision=precision, repair_drops=repair)
            pc.delivered(0, p0, (), CHUNK, 0.0)
            plans[precision, repair] = pc.plan(0, p1, CHUNK, 0, 1)
    assert len(plans[False, True].withhold) == 3 and plans[False, True].precision == "fp32"
    assert plans[False, True].loss_bound == pytest.approx(0.3, abs=1e-4)  # the three chunks, not the flow's 0.5
    assert plans[True, True].precision == "int8" and plans[True, True].withhold == []
    assert plans[True, True].loss_bound == 0.0  # nothing left out: a drop is retransmitted
    assert plans[False, False].loss_bound == plans[True, False].loss_bound == 0.5  # without: the flow's bound


def test_repairing_drops_needs_approximate_pulls_or_a_withholding_worker_and_reaches_both():
    with pytest.raises(ValueError, match="pull_repair_drops needs approximate pulls"):
        ServerConfig(job=5, workers=1, pull_repair_drops=True)
    with pytest.raises(ValueError, match="repair_drops needs withhold"):
        ClientConfig(job=5, rank=0, ps=("127.0.0.1", 1), loss_bound=0.5, repair_drops=True)
    job = TrainingJob(job=3, workers=2, iterations=5, loss_bound=0.5, withhold=True, pull_loss_bound=0.4,
                      repair_drops=True)  # fmt: skip
    assert "--pull-repair-drops" in ps_argv(job, "10.0.0.1")
    assert "--repair-drops" in worker_argv(job, 0, "10.0.0.2", "10.0.0.1")
    assert "--pull-repair-drops" not in ps_argv(TrainingJob(job=3, workers=2, iterations=5, repair_drops=True), "x")
    ps = build_parser().parse_args(["ps", "--job", "3", "--workers", "2", "--pull-loss-bound", "0.4",
                                    "--pull-repair-drops"])  # fmt: skip
    worker = build_parser().parse_args(["worker", "--job", "3", "--rank", "0", "--ps", "127.0.0.1",
                                        "--loss-bound", "0.5", "--withhold", "--repair-drops"])  # fmt: skip
    assert ps.pull_repair_drops and worker.repair_drops
