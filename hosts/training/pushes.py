"""The pushes a parameter server holds: each filed under its iteration and tensor until every worker's copy
is in, then averaged with the bounded-loss rule (``mlfc.policy.aggregation.average_received``), the loss of
each copy recorded in the ledger. Both modes use it: PS mode per iteration (iteration.py), aggregate mode per
DDP bucket (buckets.py)."""

from __future__ import annotations

import logging
from collections import defaultdict

import numpy as np

from mlfc.hosts.training import protocol as proto
from mlfc.hosts.training.compress import decode, decode_at, received_at
from mlfc.hosts.training.peers import Peers, TrainingError
from mlfc.hosts.transport import DeliveredTensor
from mlfc.policy.aggregation import average_received, received_elements
from mlfc.policy.precision import encoded_bytes, precision_of, usable

log = logging.getLogger(__name__)


class Pushes:
    def __init__(self, peers: Peers) -> None:
        self.peers = peers
        # iteration -> tensor -> rank -> its push
        self.pending: dict[int, dict[int, dict[int, DeliveredTensor]]] = defaultdict(lambda: defaultdict(dict))
        self.done: set[tuple[int, int]] = set()  # aggregate mode: (iteration, tensor) already answered

    def place(self, delivery: DeliveredTensor) -> bool:
        """File a push under its iteration and tensor; False for anything else (control, strays)."""
        peers = self.peers
        worker = peers.by_peer.get(delivery.peer)
        if worker is None or delivery.tensor_id >= proto.MAX_TENSORS:
            if worker is not None and delivery.tensor_id == proto.BYE:
                return False
            peers.stray += 1
            return False
        numels = peers.numels()
        if peers.cfg.mode == "ps" and worker.precision:  # any precision the tensor may be pushed at
            chunk, tid = delivery.loss.chunk_size, delivery.tensor_id
            bad = tid >= len(numels) or delivery.loss.total_bytes not in {
                encoded_bytes(p, numels[tid], chunk) for p in usable(numels[tid], chunk)
            }
        elif peers.cfg.mode == "ps":
            bad = delivery.tensor_id >= len(numels) or delivery.loss.total_bytes != peers.compression.payload_bytes(
                numels[delivery.tensor_id]
            )
        else:  # DDP buckets: sizes are DDP's business; all workers' copies must match (checked when averaged)
            bad = delivery.loss.total_bytes % 4 != 0
        if bad:
            peers.stray += 1
            log.warning(
                "job %d: worker %d sent tensor %d of %d bytes: not in the model",
                peers.cfg.job,
                worker.rank,
                delivery.tensor_id,
                delivery.loss.total_bytes,
            )
            return False
        if (delivery.iteration, delivery.tensor_id) in self.done:
            peers.stray += 1
            return False
        self.pending[delivery.iteration][delivery.tensor_id][worker.rank] = delivery
        return True

    def aggregate(self, iteration: int, tensor: int, pushes: dict[int, DeliveredTensor]) -> np.ndarray:
        peers = self.peers
        values, masks, delayed = [], [], []
        for rank in sorted(pushes):
            worker = peers.workers.get(rank)
            delayed.append(worker is not None and worker.loss_feedback)
            delivery = pushes[rank]
            rep = delivery.loss
            if peers.compression.active:
                if rep.missing_chunks:  # the workers send compressed pushes with loss bound 0: cannot happen
                    raise TrainingError(f"iteration {iteration} tensor {tensor}: a compressed push arrived incomplete")
                try:
                    v = decode(peers.compression, delivery.data, peers.numels()[tensor])
                except ValueError as exc:
                    raise TrainingError(f"iteration {iteration} tensor {tensor} of worker {rank}: {exc}") from None
                mask = None
            elif worker is not None and worker.precision:  # fp32, fp16 or int8: its length says (place checked it)
                numel = peers.numels()[tensor]
                precision = precision_of(rep.total_bytes, numel, rep.chunk_size)
                v = decode_at(precision, delivery.data, numel, rep.chunk_size)
                mask = received_at(precision, numel, rep.chunk_size, rep.missing_chunks) if rep.missing_chunks else None
            else:
                v = np.frombuffer(delivery.data, dtype=np.float32)
                mask = received_elements(v.size, 4, rep.chunk_size, rep.missing_chunks) if rep.missing_chunks else None
            values.append(v)
            n_chunks = -(-rep.total_bytes // rep.chunk_size)
            peers.ledger.record(iteration, rank, tensor, n_chunks, len(rep.missing_chunks))
            masks.append(mask)
        try:
            agg = average_received(values, masks, delayed)
        except ValueError as exc:
            raise TrainingError(f"iteration {iteration} tensor {tensor}: {exc}") from None
        peers.ledger.record_elements(iteration, tensor, agg.lost_elements)
        return agg.mean
