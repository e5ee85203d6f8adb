"""PS mode's loop: per iteration, wait for every worker's push of every tensor (a HELLO meanwhile is a worker
re-joining), aggregate each tensor, hand the means to ``apply`` (the optimizer step, done by the caller: no
torch here), then pull: the updated parameters and a STATS message to every worker, in parallel (one thread
per worker flow). Pulls are lossless and protected unless the job opts into approximate pulls
(``ServerConfig.pull_withhold``, hosts/training/pull_copies.py)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import numpy as np

from mlfc.hosts.importance import assign_importance
from mlfc.hosts.training import protocol as proto
from mlfc.hosts.training.accounting import IterationLoss, IterationRecord, PullStats
from mlfc.hosts.training.membership import Membership
from mlfc.hosts.training.peers import Peers, Worker
from mlfc.hosts.training.pushes import Pushes

log = logging.getLogger(__name__)


class IterationLoop:
    def __init__(
        self,
        peers: Peers,
        pushes: Pushes,
        membership: Membership,
        apply: Callable[[int, list[np.ndarray]], None] | None,
        on_step: Callable[[int], None] | None,
        emit: Callable[[dict], None] | None,
    ) -> None:
        self.peers = peers
        self.pushes = pushes
        self.membership = membership
        self.apply = apply
        self.on_step = on_step
        self.emit = emit
        self.pull_failures = 0  # pulls to a worker that failed (it was gone; it re-joins or the job times out)

    def run(self, iterations: int) -> None:
        """Serve ``iterations`` synchronous iterations (after ``accept``)."""
        peers, cfg = self.peers, self.peers.cfg
        assert peers.params is not None and self.apply is not None
        n_tensors = len(peers.params)
        for it in range(peers.iteration, iterations):
            peers.iteration = it
            t0 = time.time()
            pending = self.pushes.pending[it]
            while len(pending) < n_tensors or any(len(r) < cfg.workers for r in pending.values()):
                have = sum(len(r) for r in pending.values())
                delivery = peers.recv(f"iteration {it}'s pushes ({have}/{n_tensors * cfg.workers} tensors in)")
                if delivery.tensor_id == proto.HELLO:
                    self.membership.rejoin(delivery)
                    continue
                if delivery.iteration < it:
                    peers.stray += 1  # a late duplicate of an earlier iteration
                    continue
                if delivery.peer not in peers.by_peer:
                    self.membership.stash(delivery)
                    continue
                self.pushes.place(delivery)
            t_in = time.time()
            del self.pushes.pending[it]
            means = [self.pushes.aggregate(it, t, pending[t]) for t in range(n_tensors)]
            t_agg = time.time()
            self.apply(it, means)
            if self.on_step is not None:
                self.on_step(it + 1)
            t_step = time.time()
            loss = peers.ledger.of(it)
            pulls = {w.rank: w.pool.submit(self._pull_params, w, it, loss) for w in peers.workers.values()}  # type: ignore[union-attr]
            peers.watch_pulls(pulls)
            for rank, f in pulls.items():
                exc = f.exception()
                if exc is not None:  # the worker is gone: it gets the parameters when it connects again
                    self.pull_failures += 1
                    log.warning("job %d: pull of iteration %d to worker %d failed (%s); waiting for it to re-join",
                                cfg.job, it, rank, exc)  # fmt: skip
            peers.iteration = it + 1
            peers.ledger.finished(it)
            t_out = time.time()
            if self.emit is not None:
                record = IterationRecord.of(cfg.job, it, loss, peers.workers, t0, t_in, t_agg, t_step, t_out)
                self.emit(record.to_dict())

    def _pull_params(self, worker: Worker, it: int, loss: IterationLoss) -> None:
        params, cfg = self.peers.params, self.peers.cfg
        assert params is not None and worker.sender is not None
        tx = worker.sender
        n = len(params)
        chunk = tx.config.chunk_size
        tx.start_iteration(sum(p.nbytes for p in params))
        sent = stale = withheld = 0
        for t, p in enumerate(params):
            plan = worker.pulls.plan(t, p, chunk, t, n) if worker.pulls is not None else None
            if plan is None:
                res = tx.send_tensor(cfg.job, it, t, p, importance=_pull_classes(p, chunk, t, n), timeout=cfg.timeout)
            else:  # the parameters, or below fp32 their change since the worker's copy
                body = p if plan.payload is None else plan.payload
                res = tx.send_tensor(cfg.job, it, t, body, importance=plan.classes, loss_bound=plan.loss_bound,
                                     withhold=plan.withhold, timeout=cfg.timeout)  # fmt: skip
            if worker.pulls is not None:
                congestion = res.congestion(worker.pulls.policy)
                stale += worker.pulls.delivered(t, p, res.missing_chunks, chunk, congestion, plan)
            sent += (p.nbytes if plan is None or plan.payload is None else len(plan.payload)) - res.withheld_bytes
            withheld += res.withheld_chunks
        stats = PullStats.of(loss, worker.rank, sent_bytes=sent, withheld_chunks=withheld, stale_elements=stale)
        tx.send_tensor(
            cfg.job, it, proto.STATS, proto.encode(stats.to_dict()), importance=proto.CONTROL_IMPORTANCE,
            timeout=cfg.timeout,
        )  # fmt: skip


def _pull_classes(p: np.ndarray, chunk: int, index: int, n: int) -> bytes:
    """Parameters are protected (8..15, higher for later layers): the switch never drops them selectively."""
    return assign_importance(p, chunk, layer_index=index, num_layers=n, protect_fraction=1.0, gradients=False)
