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
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mlfc.hosts.importance import assign_importance, chunk_magnitudes, num_chunks
from mlfc.policy.aggregation import received_elements
from mlfc.policy.withhold import CongestionEstimate, WithholdPolicy, choose_withheld, withheld_share


@dataclass(frozen=True)
class PullPlan:
    """How one tensor of a pull goes out: its chunks' classes, the chunks left out, the tensor's loss bound."""

    classes: bytes
    withhold: list[int]
    loss_bound: float


@dataclass
class PullCopies:
    """One worker's pull flow: what the worker holds per tensor, and the flow's congestion estimate."""

    policy: WithholdPolicy
    bound: float
    protect_fraction: float = 0.25
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
        classes = assign_importance(
            delta, chunk, layer_index=layer_index, num_layers=num_layers, protect_fraction=self.protect_fraction
        )
        share = withheld_share(self.policy, self.congestion.value, self.bound)
        withhold: list[int] = []
        if share > 0:
            n = num_chunks(params.nbytes, chunk)
            sizes = [chunk] * (n - 1) + [params.nbytes - chunk * (n - 1)]
            withhold = choose_withheld(classes, sizes, share, chunk_magnitudes(delta, chunk).tolist())
        return PullPlan(classes, withhold, self.bound)

    def delivered(self, tensor: int, params: np.ndarray, missing_chunks, chunk: int, congestion: float) -> int:
        """After the tensor went out: the worker holds ``params`` except in ``missing_chunks`` (its previous
        values there); ``congestion`` is the send's sample (mlfc.policy.withhold.congestion_sample). Returns
        how many elements the worker now holds stale."""
        self.congestion.update(congestion)
        copy = self.copies.get(tensor)
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
