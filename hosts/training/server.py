"""The parameter server: one process, one push port, several workers.

Workers announce themselves (HELLO: rank, pull address, tensor sizes); once all ``workers`` have, the
PS answers each (WELCOME, and in PS mode the initial parameters) and the job runs:

* **PS mode** (``run``): per iteration, wait for every worker's push of every tensor, aggregate each
  tensor with the bounded-loss rule (``mlfc.policy.aggregation.average_received``), hand the means to
  ``apply`` (the optimizer step, done by the caller: this module needs no torch), then pull: send the
  updated parameters and a STATS message to every worker, in parallel (one thread per worker flow).
* **aggregate mode** (``serve``, for the DDP hook): no model here; as soon as every worker pushed a
  tensor (a DDP bucket) the mean goes back to all of them. Ends when every worker said BYE.

Pulls are lossless (loss bound 0) and protected: replicas must receive identical parameters/means, and a
zero-filled weight would be a corrupted model rather than a noisy update. The exception is opt-in, PS mode
only (``pull_withhold``, issue 25): under congestion a pull leaves out the parameter chunks that changed
least and the worker keeps its previous values there (hosts/training/pull_copies.py).

``TrainingServer`` composes the parts, each in its module, all sharing one connection state (``Peers``):

* peers.py: the push port, the admitted workers and their pull flows, what the parts share;
* membership.py: the handshake, refusals, re-joins, stashed early pushes, calling back a previous run;
* pushes.py: pushes filed per iteration and tensor, averaged once complete, their loss in the ledger;
* iteration.py: PS mode's loop; buckets.py: aggregate mode's loop;
* accounting.py: the loss ledger and the typed records (the JSON lines, the STATS message).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

import numpy as np

from mlfc.hosts.training import protocol as proto
from mlfc.hosts.training.accounting import LossLedger
from mlfc.hosts.training.buckets import BucketLoop
from mlfc.hosts.training.compress import Compression
from mlfc.hosts.training.iteration import IterationLoop
from mlfc.hosts.training.membership import Membership
from mlfc.hosts.training.peers import Peers, TrainingError, Worker
from mlfc.hosts.training.pushes import Pushes
from mlfc.hosts.training.server_config import ServerConfig
from mlfc.hosts.transport import Receiver

__all__ = ["ServerConfig", "TrainingError", "TrainingServer"]


def _emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


class TrainingServer:
    def __init__(
        self,
        cfg: ServerConfig,
        *,
        parameters: Sequence[np.ndarray] | None = None,
        apply: Callable[[int, list[np.ndarray]], None] | None = None,
        emit: Callable[[dict], None] | None = _emit,
        info: dict | None = None,
        on_step: Callable[[int], None] | None = None,
    ) -> None:
        """PS mode needs ``parameters`` (float32 arrays the caller's optimizer updates in place, e.g. views
        of torch parameters) and ``apply(iteration, mean_gradients)``. ``emit`` gets one dict per
        iteration (PS mode) or per aggregated tensor (aggregate mode); None: silent. ``info`` goes to
        every worker in the WELCOME (e.g. the number of iterations and the data seed). ``on_step(next)`` runs
        after each optimizer step, before the pulls (``next`` = the iteration a restart would resume at):
        the place to checkpoint."""
        if cfg.mode == "ps" and (parameters is None or apply is None):
            raise ValueError("PS mode needs parameters and apply")
        params = [np.ascontiguousarray(p).reshape(-1) for p in parameters] if parameters is not None else None
        if params is not None:
            for i, p in enumerate(params):
                if p.dtype != np.float32:
                    raise ValueError(f"parameter {i} is {p.dtype}; the PS exchanges float32")
            if len(params) > proto.MAX_TENSORS:
                raise ValueError(f"{len(params)} tensors; at most {proto.MAX_TENSORS}")
        self._peers = Peers(cfg, params)
        self._pushes = Pushes(self._peers)
        self._membership = Membership(self._peers, self._pushes, dict(info or {}))
        self._iterations = IterationLoop(self._peers, self._pushes, self._membership, apply, on_step, emit)
        self._buckets = BucketLoop(self._peers, self._pushes, self._membership, emit)

    # -- what callers and tests read of the shared state ------------------------------------------------

    @property
    def cfg(self) -> ServerConfig:
        return self._peers.cfg

    @cfg.setter
    def cfg(self, cfg: ServerConfig) -> None:  # e.g. a test's shorter peer timeout, before accept
        self._peers.cfg = cfg

    @property
    def address(self) -> tuple[str, int]:
        return self.rx.address

    @property
    def role(self) -> str:
        return self._peers.role

    @property
    def rx(self) -> Receiver:
        return self._peers.rx

    @property
    def params(self) -> list[np.ndarray] | None:
        return self._peers.params

    @property
    def workers(self) -> dict[int, Worker]:
        return self._peers.workers

    @property
    def ledger(self) -> LossLedger:
        return self._peers.ledger

    @property
    def compression(self) -> Compression:
        """The workers' push compression (from their HELLOs; all must agree)."""
        return self._peers.compression

    @property
    def iteration(self) -> int:
        """PS mode: the iteration being served (``resume`` sets where to start)."""
        return self._peers.iteration

    @property
    def stray(self) -> int:
        """Deliveries from unknown peers or for finished iterations."""
        return self._peers.stray

    @property
    def rejoins(self) -> int:
        """Workers that connected again while the job ran."""
        return self._membership.rejoins

    @property
    def pull_failures(self) -> int:
        """Pulls to a worker that failed (it was gone; it re-joins or the job times out)."""
        return self._iterations.pull_failures

    # -- the job ----------------------------------------------------------------------------------------

    def accept(self) -> None:
        """Wait for every worker's HELLO, check they agree on the model, answer each. After ``resume``
        the workers the checkpoint names are asked to connect again first (REJOIN)."""
        self._membership.accept()

    def run(self, iterations: int) -> None:
        """PS mode: serve ``iterations`` synchronous iterations (after ``accept``)."""
        self._iterations.run(iterations)

    def serve(self) -> None:
        """Aggregate mode: aggregate pushed tensors (DDP buckets) as they complete until every worker said BYE."""
        self._buckets.serve()

    def roster(self) -> dict[int, tuple[str, int]]:
        """Where each worker receives its pulls (what a checkpoint keeps, to call them back after a restart)."""
        return self._membership.roster()

    def resume(self, iteration: int, roster: dict[int, tuple[str, int]] | None = None) -> None:
        """Continue a job at ``iteration`` (from a checkpoint; the caller restored the parameters and the
        optimizer): ``accept`` sends REJOIN to every worker of ``roster`` and ``run`` starts there."""
        self._membership.resume(iteration, roster)

    def close(self) -> None:
        self._peers.close()

    def __enter__(self) -> TrainingServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
