"""Error feedback: per tensor, the gradient elements an earlier push did not deliver, added to the next push
of the same tensor (Deep Gradient Compression's memory, "Sparsified SGD with memory").

Two users: rigid top-k compression (what top-k held back, hosts/training/compress.py) and bounded loss (what
the network lost within the loss bound and the PS zero-filled, hosts/training/client.py). Either way every
gradient component reaches the PS eventually, late instead of never: the sum of what the PS received plus
the residual equals the sum of the gradients computed.

Numpy only (the PS side needs no torch).
"""

from __future__ import annotations

import numpy as np


class Residuals:
    """One float32 residual per tensor id, the shape of the flat gradient it belongs to."""

    def __init__(self) -> None:
        self._memory: dict[int, np.ndarray] = {}

    def __contains__(self, tensor_id: int) -> bool:
        return tensor_id in self._memory

    def __len__(self) -> int:
        return len(self._memory)

    def get(self, tensor_id: int) -> np.ndarray | None:
        """The tensor's residual (None: nothing held back)."""
        return self._memory.get(tensor_id)

    def as_dict(self) -> dict[int, np.ndarray]:
        return dict(self._memory)

    def add(self, tensor_id: int, grad: np.ndarray) -> np.ndarray:
        """``grad`` (flattened, float32) plus the tensor's residual, as a new array: what to send now."""
        g = np.asarray(grad, dtype=np.float32).reshape(-1)
        r = self._memory.get(tensor_id)
        if r is None:
            return g.copy()
        if r.shape != g.shape:
            raise ValueError(f"tensor {tensor_id}: gradient of {g.size} elements, residual of {r.size}")
        return g + r

    def hold(self, tensor_id: int, sent: np.ndarray, undelivered: np.ndarray) -> None:
        """After a push of ``sent`` (what ``add`` returned): keep its ``undelivered`` elements (a boolean mask or
        an index array) for the next push; everything else arrived and leaves the memory."""
        keep = np.zeros_like(sent, dtype=np.float32)
        keep[undelivered] = sent[undelivered]
        if keep.any():
            self._memory[tensor_id] = keep
        else:
            self._memory.pop(tensor_id, None)

    def hold_all_but(self, tensor_id: int, sent: np.ndarray, delivered: np.ndarray) -> None:
        """``hold`` given what was delivered (e.g. top-k's indices): ``sent`` itself becomes the memory."""
        sent[delivered] = 0.0
        self._memory[tensor_id] = sent

    def clear(self, tensor_id: int) -> None:
        """The push delivered everything: nothing is held back."""
        self._memory.pop(tensor_id, None)

    def keep(self, tensor_id: int, residual: np.ndarray) -> None:
        """Set the tensor's residual outright (a reduced-precision push: its rounding plus what was lost)."""
        r = np.asarray(residual, dtype=np.float32).reshape(-1)
        if r.any():
            self._memory[tensor_id] = r
        else:
            self._memory.pop(tensor_id, None)
