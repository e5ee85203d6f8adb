"""Aggregate mode's loop (the DDP hook, hosts/training/ddp.py): no model here; as soon as every worker pushed
a tensor (a DDP bucket) the mean goes back to all of them. Ends when every worker said BYE; a worker that
gave up (BYE with an error), a late HELLO or a rank gone silent (no answer to a probe) ends it for all."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future

import numpy as np

from mlfc.hosts.training import protocol as proto
from mlfc.hosts.training.accounting import BucketRecord
from mlfc.hosts.training.membership import Membership
from mlfc.hosts.training.peers import Peers, TrainingError, Worker, wait_all
from mlfc.hosts.training.pushes import Pushes
from mlfc.hosts.transport import DeliveredTensor


class BucketLoop:
    PROBE_AFTER = 2.0  # s without anything from the workers before the aggregator checks they are alive

    def __init__(
        self, peers: Peers, pushes: Pushes, membership: Membership, emit: Callable[[dict], None] | None
    ) -> None:
        self.peers = peers
        self.pushes = pushes
        self.membership = membership
        self.emit = emit
        self._inflight: list[Future] = []
        self._pings = 0

    def serve(self) -> None:
        """Aggregate pushed tensors (DDP buckets) as they complete until every worker said BYE."""
        try:
            self._serve()
        finally:  # ended with the ranks' BYEs or telling them why (a killed process keeps the roster)
            self.membership.drop_roster()

    def _serve(self) -> None:
        peers, pushes = self.peers, self.pushes
        active = set(peers.workers)
        while active:
            finished = [f for f in self._inflight if f.done()]
            wait_all(finished)  # a failed pull ends the job here, not at the end
            self._inflight = [f for f in self._inflight if not f.done()]
            delivery = self._next_in_serve(active)
            worker = peers.by_peer.get(delivery.peer)
            if delivery.tensor_id == proto.HELLO:
                self.membership.late_hello(delivery, active)
                continue
            if worker is not None and delivery.tensor_id == proto.BYE:
                active.discard(worker.rank)
                error = self._bye_error(delivery)
                if error is not None:
                    reason = f"worker {worker.rank} gave up: {error}"
                    peers.abort(active, reason)
                    self.membership.linger(reason)
                    raise TrainingError(reason)
                continue
            if not pushes.place(delivery):
                continue
            copies = pushes.pending[delivery.iteration][delivery.tensor_id]
            if len(copies) < peers.cfg.workers:
                continue
            del pushes.pending[delivery.iteration][delivery.tensor_id]
            if not pushes.pending[delivery.iteration]:
                del pushes.pending[delivery.iteration]
            t0 = time.time()
            mean = pushes.aggregate(delivery.iteration, delivery.tensor_id, copies)
            pushes.done.add((delivery.iteration, delivery.tensor_id))
            if len(pushes.done) > 8192:  # remember recent buckets only: duplicates come from the last steps
                newest = max(it for it, _ in pushes.done)
                pushes.done = {k for k in pushes.done if k[0] >= newest - 16}
            for peer in peers.workers.values():
                self._inflight.append(
                    peer.pool.submit(self._pull_mean, peer, delivery.iteration, delivery.tensor_id, mean)
                )  # type: ignore[union-attr]
            if self.emit is not None:
                loss = peers.ledger.of(delivery.iteration)
                record = BucketRecord.of(
                    peers.cfg.job, delivery.iteration, delivery.tensor_id, loss, round(time.time() - t0, 5)
                )
                self.emit(record.to_dict())
        wait_all(self._inflight)
        self._inflight.clear()

    def _next_in_serve(self, active: set[int]) -> DeliveredTensor:
        """The next delivery; while none comes, every PROBE_AFTER s a PING to each active worker: a rank
        that is gone (killed, no BYE) ends the job then, not at the timeout."""
        peers = self.peers
        waited = 0.0
        while True:
            step = min(self.PROBE_AFTER, peers.cfg.timeout - waited)
            try:
                return peers.rx.recv(timeout=step)
            except TimeoutError:
                waited += step
            if waited >= peers.cfg.timeout:
                raise TrainingError(
                    f"nothing from the workers for {peers.cfg.timeout:.0f} s while waiting for buckets or BYE "
                    f"from workers {sorted(active)}"
                )
            gone = self._probe(active)
            if gone:
                reason = f"worker(s) {gone} gone: no answer to the aggregator's probe (killed without a BYE?)"
                peers.abort(active - set(gone), reason)
                raise TrainingError(reason)

    def _probe(self, active: set[int]) -> list[int]:
        cfg = self.peers.cfg
        self._pings += 1
        n = self._pings

        def ping(worker: Worker) -> None:
            assert worker.sender is not None
            worker.sender.send_tensor(cfg.job, n, proto.PING, b"\0", importance=proto.CONTROL_IMPORTANCE,
                                      timeout=min(5.0, cfg.timeout))  # fmt: skip

        futures = {r: w.pool.submit(ping, w) for r, w in self.peers.workers.items() if r in active}  # type: ignore[union-attr]
        return sorted(r for r, f in futures.items() if f.exception() is not None)

    @staticmethod
    def _bye_error(delivery: DeliveredTensor) -> str | None:
        try:
            error = proto.decode(delivery.data, "BYE").get("error")
        except proto.ProtocolError:
            return None
        return None if error is None else str(error)

    def _pull_mean(self, worker: Worker, it: int, tensor: int, mean: np.ndarray) -> None:
        cfg = self.peers.cfg
        assert worker.sender is not None
        worker.sender.send_tensor(cfg.job, it, tensor, mean, importance=proto.CONTROL_IMPORTANCE, timeout=cfg.timeout)
