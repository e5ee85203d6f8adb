"""Bounded-loss gradient aggregation at the parameter server: what to do with elements the network lost.

The rule (one, used by the PS, the DDP hook's aggregator and the simulator): **average each element over
the workers whose copy of it arrived**. An element no worker delivered is 0 (the model does not move
along it this iteration).

Why this rule and not "rescale a worker's tensor by the fraction received": each worker's gradient is an
unbiased sample of the full-batch gradient, so the mean of the k copies that arrived is still an unbiased
estimate of it, only with k instead of N samples (variance x N/k on that element). Dividing by N with the
lost copies as zeros shrinks exactly the elements that were lost (a hidden per-element learning-rate cut
that grows with congestion), and rescaling one worker's tensor by 1 / fraction received inflates the
elements that did arrive, whose values have nothing to do with the lost ones. Per-element averaging needs
no assumption about which chunks were lost and reduces to the plain mean when nothing was lost.

**Unless the loss is only a delay**: a worker with error feedback (hosts/training/client.py ``loss_feedback``)
adds what the PS zero-filled to its next push of the tensor, so its lost element still arrives, one iteration
late. Averaged over the others now and added again later it would count twice (the others' copies stand in
for it now, and it comes anyway). Such a worker's lost copy therefore counts in the divisor as if it had
arrived as 0 (``delayed``): every gradient element is applied once with weight 1 / N, now or later, and the
sum of the means over the iterations is the sum of all gradients / N, as without loss.

Loss arrives from the transport per chunk (``LossReport.missing_chunks``, chunk size in bytes);
``received_elements`` turns that into a per-element mask. An element that straddles a chunk boundary
(chunk size not a multiple of the item size) counts as lost if any of its bytes were.

Pure numpy: no torch, no sockets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Aggregate:
    mean: np.ndarray  # same dtype and shape as the inputs
    contributors: np.ndarray  # int32 per element: how many workers' copies were averaged (0: none arrived)

    @property
    def lost_elements(self) -> int:
        """Elements no worker delivered (set to 0)."""
        return int(np.count_nonzero(self.contributors == 0))


def received_elements(n_elements: int, itemsize: int, chunk_size: int, missing_chunks: Sequence[int]) -> np.ndarray:
    """Boolean mask over a flat tensor of ``n_elements`` items of ``itemsize`` bytes: True where every byte
    of the element arrived, given the transport's missing chunk numbers (``chunk_size`` bytes each)."""
    if n_elements < 0 or itemsize < 1 or chunk_size < 1:
        raise ValueError(f"bad geometry: n_elements={n_elements}, itemsize={itemsize}, chunk_size={chunk_size}")
    mask = np.ones(n_elements, dtype=bool)
    if not len(missing_chunks):
        return mask
    nbytes = n_elements * itemsize
    n_chunks = max(1, -(-nbytes // chunk_size))
    for seq in missing_chunks:
        if not 0 <= seq < n_chunks:
            raise ValueError(f"missing chunk {seq} outside 0..{n_chunks - 1} of a {nbytes}-byte tensor")
        first_byte, end_byte = seq * chunk_size, min(nbytes, (seq + 1) * chunk_size)
        # every element with at least one byte in [first_byte, end_byte)
        mask[first_byte // itemsize : -(-end_byte // itemsize)] = False
    return mask


def average_received(
    values: Sequence[np.ndarray], received: Sequence[np.ndarray | None], delayed: Sequence[bool] | None = None
) -> Aggregate:
    """Per-element mean over the workers whose element arrived (``received[w]`` True, None = all arrived),
    and over those whose lost element comes with a later push (``delayed[w]`` True: it counts as a 0 now).

    All ``values`` must have one shape and one floating dtype; the mean is accumulated in float64 and
    returned in that dtype. Elements no worker delivered are 0 with ``contributors`` 0."""
    if not values:
        raise ValueError("no worker contributions to aggregate")
    if len(received) != len(values):
        raise ValueError(f"{len(values)} tensors but {len(received)} masks")
    if delayed is not None and len(delayed) != len(values):
        raise ValueError(f"{len(values)} tensors but {len(delayed)} delayed flags")
    shape, dtype = values[0].shape, values[0].dtype
    if not np.issubdtype(dtype, np.floating):
        raise ValueError(f"gradients must be floating point, not {dtype}")
    total = np.zeros(shape, dtype=np.float64)
    count = np.zeros(shape, dtype=np.int32)  # copies that arrived
    divisor = np.zeros(shape, dtype=np.int32)  # and copies that come later
    for w, (v, m) in enumerate(zip(values, received, strict=True)):
        if v.shape != shape or v.dtype != dtype:
            raise ValueError(f"worker {w}: {v.dtype}{list(v.shape)} differs from {dtype}{list(shape)}")
        late = delayed is not None and bool(delayed[w])
        if m is None or late:
            divisor += 1
        if m is None:
            total += v
            count += 1
            continue
        m = np.asarray(m, dtype=bool).reshape(shape)
        total += np.where(m, v, 0.0)
        count += m
        if not late:
            divisor += m
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(divisor > 0, total / np.maximum(divisor, 1), 0.0)
    return Aggregate(mean.astype(dtype), count)
