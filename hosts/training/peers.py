"""The parameter server's connections and the state its parts share: the push port (one ``Receiver``), the
workers it admitted (each with its own pull flow: a ``Sender`` and a one-thread pool), the iteration being
served, the workers' push compression, the loss ledger and the count of stray deliveries.

One ``Peers`` is shared by the membership (membership.py), the pushes (pushes.py) and the loops of the two
modes (iteration.py, buckets.py): they are one connection state machine, split by concern.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from mlfc.hosts.training import protocol as proto
from mlfc.hosts.training.accounting import LossLedger
from mlfc.hosts.training.compress import NONE, Compression
from mlfc.hosts.training.pull_copies import PullCopies
from mlfc.hosts.training.server_config import ServerConfig
from mlfc.hosts.transport import DeliveredTensor, Receiver, ReceiverConfig, Sender
from mlfc.hosts.transport.config import stale_timeout_for

log = logging.getLogger(__name__)


class TrainingError(RuntimeError):
    """The job cannot go on (a worker vanished, a transfer timed out, peers disagree about the model)."""


@dataclass
class Worker:
    rank: int
    push_peer: tuple[str, int]
    rx: tuple[str, int]
    numels: list[int]
    compression: Compression = NONE
    loss_feedback: bool = False  # what this PS zero-fills of its pushes comes again later (error feedback)
    sender: Sender | None = None
    pool: ThreadPoolExecutor | None = None
    session: int = 0  # its HELLO's iteration field: WELCOME and INITIAL carry it back
    pulls: PullCopies | None = None  # approximate pulls: what this worker holds (new with each pull flow)
    precision: bool = False  # its pushes come at fp32, fp16 or int8, told by their length (mlfc.policy.precision)


class Peers:
    def __init__(self, cfg: ServerConfig, params: list[np.ndarray] | None) -> None:
        self.cfg = cfg
        self.params = params  # PS mode: the flat float32 parameters the caller's optimizer updates
        self.ledger = LossLedger(cfg.job)
        self.workers: dict[int, Worker] = {}
        self.by_peer: dict[tuple[str, int], Worker] = {}
        self.deferred: list[DeliveredTensor] = []  # read while pulls ran (watch_pulls), taken first by recv
        self.stray = 0  # deliveries from unknown peers or for finished iterations
        self.compression = NONE  # the workers' push compression (from their HELLOs; all must agree)
        self.iteration = 0  # PS mode: the iteration being served (resume() sets where to start)
        self.rx = Receiver(
            (cfg.bind, cfg.port),
            ReceiverConfig(
                deadline=cfg.deadline, jobs=frozenset({cfg.job}), stale_timeout=stale_timeout_for(cfg.sender)
            ),
        )

    @property
    def role(self) -> str:
        return proto.role(self.cfg.mode)

    def recv(self, what: str) -> DeliveredTensor:
        if self.deferred:  # read while the pulls ran
            return self.deferred.pop(0)
        try:
            return self.rx.recv(timeout=self.cfg.timeout)
        except TimeoutError:
            have = sorted(self.workers)
            raise TrainingError(
                f"nothing from the workers for {self.cfg.timeout:.0f} s while "
                f"waiting for {what} (workers connected: {have})"
            ) from None

    def numels(self) -> list[int]:
        if self.params is not None:
            return [p.size for p in self.params]
        return self.workers[0].numels

    def open_pull_flow(self, worker: Worker) -> None:
        port = 0 if self.cfg.tx_port_base is None else self.cfg.tx_port_base + worker.rank
        worker.sender = Sender(worker.rx, (self.cfg.bind, port), self.cfg.sender)
        worker.pool = ThreadPoolExecutor(1, thread_name_prefix=f"mlfc-pull-{worker.rank}")
        if self.cfg.pull_withhold is not None:  # a new flow (a new or re-joined worker): its first pull is whole
            precision = self.cfg.pull_precision and worker.precision  # the worker reads precision by length
            worker.pulls = PullCopies(self.cfg.pull_withhold, self.cfg.pull_loss_bound, precision=precision,
                                      repair_drops=self.cfg.pull_repair_drops)  # fmt: skip

    def close_worker(self, worker: Worker) -> None:
        if worker.pool is not None:
            worker.pool.shutdown(wait=True, cancel_futures=True)
        if worker.sender is not None:
            worker.sender.close()

    def watch_pulls(self, pulls: dict[int, Future]) -> None:
        """Wait for the pulls (or a re-joined worker's parameters), reading what arrives meanwhile (kept for
        the next iteration): a HELLO from a rank whose pull is still running means that worker restarted, and
        the pull to its old process would only end at the peer timeout: abort it (the new process gets the
        parameters on re-joining)."""
        while not all(f.done() for f in pulls.values()):
            try:
                delivery = self.rx.recv(timeout=0.05)
            except TimeoutError:
                continue
            self.deferred.append(delivery)
            if delivery.tensor_id != proto.HELLO:
                continue
            try:
                rank = int(proto.decode(delivery.data, "HELLO")["rank"])
            except (proto.ProtocolError, KeyError, TypeError, ValueError):
                continue
            f, worker = pulls.get(rank), self.workers.get(rank)
            if f is not None and not f.done() and worker is not None and worker.sender is not None:
                log.warning("job %d: worker %d says HELLO while its pull runs: aborting the pull", self.cfg.job, rank)
                worker.sender.abort()

    def abort(self, ranks: set[int], reason: str) -> None:
        """Best effort, in parallel: ABORT to each worker of ``ranks`` so its waits end with ``reason``."""

        def tell(worker: Worker) -> None:
            try:
                with Sender(worker.rx, (self.cfg.bind, 0), self.cfg.sender) as tx:
                    tx.send_tensor(self.cfg.job, worker.session, proto.ABORT, proto.encode({"error": reason}),
                                   importance=proto.CONTROL_IMPORTANCE, timeout=min(5.0, self.cfg.timeout))  # fmt: skip
            except Exception as exc:
                log.info("job %d: ABORT to worker %d not delivered: %s", self.cfg.job, worker.rank, exc)

        threads = [threading.Thread(target=tell, args=(worker,), daemon=True, name=f"mlfc-abort-{worker.rank}")
                   for rank, worker in self.workers.items() if rank in ranks]  # fmt: skip
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=10)

    def close(self) -> None:
        for worker in self.workers.values():
            self.close_worker(worker)
        self.rx.close()


def wait_all(futures: Sequence[Future]) -> None:
    """Each future's end; the first that failed ends the job."""
    for f in futures:
        exc = f.exception()
        if exc is not None:
            raise TrainingError(f"pull failed: {exc}") from exc
