"""Approximate pulls (issue 25 item 4): under congestion the PS leaves out the parameter chunks that changed
least since a worker last received them, and the worker keeps its previous values there (as MLT does for a
lost parameter chunk).

The PS keeps, per worker and tensor, the copy it knows the worker holds. Before a pull it withholds the
chunks whose change since that copy is smallest, as many as the pull flow's congestion estimate says
(mlfc.policy.withhold: nothing on a free link, at most the bound of each tensor); chunks the switch's
selective drop takes count the same. Only what the worker's ACKs say arrived enters the copy, so whatever
was left out stays the difference between the PS's model and the worker's, grows, and goes out once it is
among the larger changes: delayed, never lost (error feedback on the pull side). The largest changes are
protected, never withheld. The first pull to a worker (and the first after it re-joins) is whole.

The precision is part of the decision on pulls too (issue 46 item 3, mlfc.policy.precision), for a worker
that said ``precision`` in its HELLO: a pull below fp32 carries the *change* since the copy the PS knows the
worker holds, at fp16 or int8 (the level nearest the share the network asks for), and the worker adds it to
its parameters. Leaving chunks out keeps the worker's copy stale by whole chunks (and rank 0 evaluates that
copy); a rounded change keeps it within the rounding, and the rounding is never lost: the PS's copy takes
exactly what the worker added, so the difference goes out with the next pull. Only what the precision
cannot shed is left out, within the bound. The worker tells a change from parameters by the length (a
whole fp32 tensor is parameters; fp16/int8 lengths, mlfc.policy.precision.precision_of, a change).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mlfc.hosts.importance import assign_importance, chunk_magnitudes, num_chunks
from mlfc.hosts.training.compress import decode_at, encode_at, received_at
from mlfc.policy.aggregation import received_elements
from mlfc.policy.precision import Plan, elements_per_chunk, precision_of
from mlfc.policy.precision import plan as precision_plan
from mlfc.policy.withhold import (
    CongestionEstimate,
    WithholdPolicy,
    choose_withheld,
    repair_bound,
    share_for,
    withheld_share,
)


@dataclass(frozen=True)
class PullPlan:
    """How one tensor of a pull goes out: its chunks' classes, the chunks left out, the tensor's loss bound."""

    classes: bytes
    withhold: list[int]
    loss_bound: float
    precision: str = "fp32"
    payload: bytes | None = None  # below fp32: the change since the worker's copy, encoded at ``precision``
    decoded: np.ndarray | None = None  # what the worker adds when every chunk arrives


@dataclass
class PullCopies:
    """One worker's pull flow: what the worker holds per tensor, and the flow's congestion estimate."""

    policy: WithholdPolicy
    bound: float
    protect_fraction: float = 0.25
    precision: bool = False  # the worker reads a pull's precision from its length (module doc)
    repair_drops: bool = False  # tolerate only the chunks left out by plan; network drops are retransmitted
    copies: dict[int, np.ndarray] = field(default_factory=dict)
    congestion: CongestionEstimate = field(init=False)

    def __post_init__(self) -> None:
        if not 0.0 < self.bound <= 1.0:
            raise ValueError(f"pull loss bound {self.bound!r} must be in (0, 1]")
        self.congestion = CongestionEstimate(self.policy)

    def plan(self, tensor: int, params: np.ndarray, chunk: int, layer_index: int, num_layers: int) -> PullPlan | None:
        """The tensor's plan, or None: send it whole and protected (no copy of it at the worker is known)."""
        copy = self.copies.get(tensor)
        if copy is None or copy.shape != params.shape:
            return None
        delta = params - copy
        if self.precision:  # the precision by the whole share asked, leaving out within the bound
            how = precision_plan(share_for(self.policy, self.congestion.value), params.size, chunk, self.bound)
        else:
            how = Plan("fp32", withheld_share(self.policy, self.congestion.value, self.bound))
        if how.precision == "fp32":
            classes, withhold = self._choose(delta, params.nbytes, chunk, chunk, how.withhold, layer_index, num_layers)
            return PullPlan(classes, withhold, self._bound(withhold, params.nbytes, chunk))
        payload = encode_at(how.precision, delta, chunk)
        assert isinstance(payload, bytes)
        decoded = decode_at(how.precision, payload, delta.size, chunk)
        span = int(4 * elements_per_chunk(how.precision, chunk))  # float32 bytes of one wire chunk's elements
        classes, withhold = self._choose(decoded, len(payload), chunk, span, how.withhold, layer_index, num_layers)
        return PullPlan(classes, withhold, self._bound(withhold, len(payload), chunk), how.precision, payload, decoded)

    def _bound(self, withhold: list[int], nbytes: int, chunk: int) -> float:
        """The pull's loss bound: the flow's, or with ``repair_drops`` just what covers the chunks left out (the
        last chunk is never left out, so each is a whole chunk)."""
        return repair_bound(len(withhold) * chunk, nbytes) if self.repair_drops else self.bound

    def _choose(
        self, change: np.ndarray, nbytes: int, chunk: int, span: int, share: float, layer_index: int, num_layers: int
    ) -> tuple[bytes, list[int]]:
        """The classes of a pull of ``nbytes`` in ``chunk``-byte wire chunks whose elements span ``span`` bytes of
        ``change``, and the chunks of least change to leave out, up to ``share`` of its bytes."""
        classes = assign_importance(
            change, span, layer_index=layer_index, num_layers=num_layers, protect_fraction=self.protect_fraction
        )
        if share <= 0:
            return classes, []
        n = num_chunks(nbytes, chunk)
        sizes = [chunk] * (n - 1) + [nbytes - chunk * (n - 1)]
        return classes, choose_withheld(classes, sizes, share, chunk_magnitudes(change, span).tolist())

    def delivered(
        self,
        tensor: int,
        params: np.ndarray,
        missing_chunks,
        chunk: int,
        congestion: float,
        plan: PullPlan | None = None,
    ) -> int:
        """After the tensor went out: the worker holds ``params`` except in ``missing_chunks`` (its previous
        values there; below fp32 it added the arrived part of ``plan``'s change); ``congestion`` is the send's
        sample (mlfc.policy.withhold.congestion_sample). Returns how many elements the worker now holds stale
        (not updated this pull; the rounding of a change is not counted)."""
        self.congestion.update(congestion)
        copy = self.copies.get(tensor)
        if plan is not None and plan.decoded is not None and copy is not None:
            got = received_at(plan.precision, params.size, chunk, missing_chunks)
            copy[got] += plan.decoded[got]  # exactly what the worker added (float32, the same operands)
            return int(np.count_nonzero(~got))
        if not len(missing_chunks):
            self.copies[tensor] = params.copy()
            return 0
        if copy is None or copy.shape != params.shape:
            # a whole pull lost chunks (it never should: it is protected and lossless): the worker's copy is
            # unknown, so the next pull goes whole again
            self.copies.pop(tensor, None)
            return 0
        got = received_elements(params.size, params.itemsize, chunk, missing_chunks)
        copy[got] = params[got]
        return int(np.count_nonzero(~got))


def keep_previous(previous: np.ndarray, pulled: np.ndarray, missing_chunks, chunk: int) -> np.ndarray:
    """The worker's side: ``pulled`` (the receiver zero-filled what did not arrive) with the elements of
    ``missing_chunks`` taken from ``previous`` instead; ``pulled`` itself when nothing is missing."""
    if not len(missing_chunks):
        return pulled
    got = received_elements(pulled.size, pulled.itemsize, chunk, missing_chunks)
    return np.where(got, pulled, previous.reshape(pulled.shape))


def apply_pull(previous: np.ndarray, payload: bytes | bytearray | memoryview, missing_chunks, chunk: int) -> np.ndarray:
    """The worker's side of a pull of one tensor: whole fp32 parameters (``keep_previous`` for what did not
    arrive), or, at a lower precision, the change the PS sent added to ``previous`` (the receiver zero-filled
    what did not arrive, which decodes to no change)."""
    numel = previous.size
    if len(payload) == 4 * numel:
        return keep_previous(previous, np.frombuffer(payload, dtype=np.float32), missing_chunks, chunk)
    change = decode_at(precision_of(len(payload), numel, chunk), payload, numel, chunk)
    return previous.reshape(-1) + change
