"""How the sender assigns each chunk its importance class 0..15 (15 = most important).

Two signals, after MLT (NSDI'24): gradient magnitude (a chunk with larger gradients moves the model
more) and layer position (later layers, nearer the loss, matter more). For a float32 gradient buffer:

* q: the rank of the chunk's mean |g| among the tensor's chunks, scaled to [0, 1);
* p: layer position, ``layer_index / (num_layers - 1)`` in [0, 1] (0 when there is one layer);
* score = 0.75 * q + 0.25 * p (magnitude dominates; position breaks ties between layers);
* the ``protect_fraction`` chunks with the largest magnitude (at least one) get 8 + floor(8 * score)
  clamped to 8..15 and are *protected*: the switch never drops them and the transport retransmits
  them until delivered; the others get floor(8 * score) clamped to 0..7 and may be dropped by the
  switch under congestion or zero-filled by the receiver within the tensor's loss bound.

Buffers that are not float32 gradients (raw bytes) use the layer position alone; the application can
also pass one class for the whole tensor or a class per chunk. Whatever the source, the transport
applies the protected floor of mlfc.policy.loss (the last chunk is raised to IMPORTANCE_PROTECTED).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mlfc.hosts import fastpath
from mlfc.wire import IMPORTANCE_LEVELS, IMPORTANCE_PROTECTED

MAGNITUDE_WEIGHT = 0.75


def num_chunks(nbytes: int, chunk_size: int) -> int:
    return max(1, -(-nbytes // chunk_size))


def layer_position(layer_index: int, num_layers: int) -> float:
    if num_layers <= 0 or not 0 <= layer_index < num_layers:
        raise ValueError(f"layer_index={layer_index} must be in 0..{num_layers - 1}")
    return 0.0 if num_layers == 1 else layer_index / (num_layers - 1)


def chunk_magnitudes(buffer: memoryview | bytes | bytearray | np.ndarray, chunk_size: int, *,
                     compiled: bool = True) -> np.ndarray:  # fmt: skip
    """Mean |g| per chunk, reading the buffer as float32 (bytes past the last whole float are ignored).
    ``compiled``: one pass in C where mlfc.hosts.fastpath is built (the same sums to float32 rounding)."""
    raw = np.frombuffer(memoryview(buffer).cast("B"), dtype=np.uint8)
    n = num_chunks(len(raw), chunk_size)
    values = raw[: len(raw) // 4 * 4].view(np.float32)
    per_chunk = max(1, chunk_size // 4)
    full = min(n, len(values) // per_chunk)
    mags = np.zeros(n)
    fast = fastpath.load() if compiled else None
    with np.errstate(invalid="ignore", over="ignore"):
        if fast is not None and full:
            # one read of the tensor (1.4 against 3.5 ms for 25 MB, the link idle meanwhile): numpy's
            # abs-then-reduce below writes and reads a temporary as large as the tensor
            fast.abs_means(values.ctypes.data, full, per_chunk, mags.ctypes.data)
        else:
            # float32 throughout the buffer: numpy's pairwise sums keep a chunk's few hundred values exact
            # enough to rank chunks, at half the time of a float64 accumulation; float64 only per chunk
            mags[:full] = np.add.reduce(np.abs(values[: full * per_chunk].reshape(full, per_chunk)), axis=1)
            mags[:full] /= per_chunk
        rest = values[full * per_chunk :]
        if len(rest) and full < n:
            mags[full] = float(np.abs(rest).mean(dtype=np.float64))
    return np.nan_to_num(mags, nan=0.0, posinf=float(np.finfo(np.float32).max))


def assign_importance(
    buffer: memoryview | bytes | bytearray | np.ndarray,
    chunk_size: int,
    *,
    layer_index: int = 0,
    num_layers: int = 1,
    protect_fraction: float = 0.25,
    gradients: bool = True,
    compiled: bool = True,
) -> bytes:
    """One class per chunk (a bytes object, index = chunk sequence number). ``compiled``: see
    ``chunk_magnitudes``."""
    if not 0.0 <= protect_fraction <= 1.0:
        raise ValueError(f"protect_fraction={protect_fraction!r} must be in [0, 1]")
    pos = layer_position(layer_index, num_layers)
    n = num_chunks(memoryview(buffer).nbytes, chunk_size)
    if gradients:
        mags = chunk_magnitudes(buffer, chunk_size, compiled=compiled)
        order = np.argsort(mags, kind="stable")
        q = np.empty(n)
        q[order] = np.arange(n) / n
    else:
        q = np.zeros(n)
    score = MAGNITUDE_WEIGHT * q + (1 - MAGNITUDE_WEIGHT) * pos
    classes = np.minimum(np.floor(8 * score), 7).astype(np.int64)
    n_protected = round(protect_fraction * n)
    if gradients and protect_fraction > 0:
        n_protected = max(1, n_protected)
        classes[order[n - n_protected :]] += IMPORTANCE_PROTECTED
    elif not gradients and protect_fraction >= 1.0:
        classes += IMPORTANCE_PROTECTED
    return bytes(np.clip(classes, 0, IMPORTANCE_LEVELS - 1).astype(np.uint8))


def expand_importance(importance: int | Sequence[int] | bytes, n_chunks: int) -> bytearray:
    """Normalise the application's importance argument to one class per chunk."""
    if isinstance(importance, int):
        classes = bytearray([importance]) * n_chunks
    else:
        classes = bytearray(importance)
        if len(classes) != n_chunks:
            raise ValueError(f"{len(classes)} importance classes for {n_chunks} chunks")
    if classes and max(classes) >= IMPORTANCE_LEVELS:  # C-level scan: this runs once per tensor, per chunk
        raise ValueError(f"importance classes must be in 0..{IMPORTANCE_LEVELS - 1}")
    return classes
