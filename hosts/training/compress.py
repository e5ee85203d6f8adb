"""Rigid gradient compression of every push: the host-side baseline that ignores the network.

Two schemes, chosen per job (``mlfc-train worker --compress fp16|topk:F``; the PS learns it from the
HELLO and every worker of a job must use the same):

* ``fp16``: each gradient element sent as IEEE half precision (2 bytes instead of 4), round to nearest;
  values beyond half's range saturate to +-65504 rather than becoming infinite. The PS widens back to
  float32.
* ``topk:F``: per tensor the k = ceil(F * n) elements of largest magnitude are sent as k uint32 indices
  then k float32 values (8k bytes instead of 4n: F = 0.1 sends 20 % of the bytes); the PS scatters them
  into zeros. With **error feedback** (memory, as in Deep Gradient Compression and "Sparsified SGD with
  memory"): what a worker did not send is added to its next gradient of the same tensor, so every
  gradient component is applied eventually; without it, top-k at 10 % loses most small components for
  good. Ties in magnitude go to the lower index (a stable order), so encoding is deterministic.

Compressed pushes are retransmitted until complete (loss bound 0) and sent protected: a lost index or
half-precision chunk cannot be zero-filled meaningfully, and this baseline does not let the network
choose what to drop. The PS averages the decoded (dense float32) gradients with the usual rule.
Numpy only: the PS needs no torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from mlfc.hosts.training.residual import Residuals

FP16_MAX = float(np.finfo(np.float16).max)


@dataclass(frozen=True)
class Compression:
    scheme: str = "none"  # none | fp16 | topk
    fraction: float = 1.0  # topk: share of each tensor's elements sent

    def __post_init__(self) -> None:
        if self.scheme not in ("none", "fp16", "topk"):
            raise ValueError(f"compression {self.scheme!r}: choose none, fp16 or topk:F")
        if self.scheme == "topk" and not 0.0 < self.fraction <= 1.0:
            raise ValueError(f"topk fraction {self.fraction!r} must be in (0, 1]")

    @property
    def active(self) -> bool:
        return self.scheme != "none"

    def spec(self) -> str:
        """The text form ``parse`` reads (and the HELLO carries)."""
        return f"topk:{self.fraction:g}" if self.scheme == "topk" else self.scheme

    def k(self, numel: int) -> int:
        return max(1, min(numel, math.ceil(self.fraction * numel)))

    def payload_bytes(self, numel: int) -> int:
        """Bytes a tensor of ``numel`` float32 elements takes on the wire."""
        if self.scheme == "fp16":
            return 2 * numel
        if self.scheme == "topk":
            return 8 * self.k(numel)
        return 4 * numel


NONE = Compression()


def parse(text: str | None) -> Compression:
    """'none' | 'fp16' | 'topk:0.1' -> Compression (ValueError naming the problem otherwise)."""
    if text is None or text in ("", "none"):
        return NONE
    if text == "fp16":
        return Compression("fp16")
    scheme, sep, frac = text.partition(":")
    if scheme == "topk" and sep:
        try:
            return Compression("topk", float(frac))
        except ValueError as exc:
            raise ValueError(f"compression {text!r}: {exc}") from None
    raise ValueError(f"compression {text!r}: choose none, fp16 or topk:F (e.g. topk:0.1)")


def encode_fp16(grad: np.ndarray) -> bytes:
    g = np.asarray(grad, dtype=np.float32).reshape(-1)
    return np.clip(g, -FP16_MAX, FP16_MAX).astype(np.float16).tobytes()


def decode_fp16(payload: bytes | bytearray | memoryview, numel: int) -> np.ndarray:
    half = np.frombuffer(payload, dtype=np.float16)
    if half.size != numel:
        raise ValueError(f"fp16 payload of {half.size} elements for a tensor of {numel}")
    return half.astype(np.float32)


def topk_indices(values: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest |values|, ascending; ties go to the lower index."""
    order = np.argsort(-np.abs(values), kind="stable")[:k]
    return np.sort(order)


def encode_topk(values: np.ndarray, k: int) -> tuple[bytes, np.ndarray]:
    """(payload, indices sent) of the k largest-magnitude elements of ``values`` (float32, flat)."""
    v = np.asarray(values, dtype=np.float32).reshape(-1)
    idx = topk_indices(v, k)
    return idx.astype(np.uint32).tobytes() + v[idx].tobytes(), idx


def decode_topk(payload: bytes | bytearray | memoryview, numel: int) -> np.ndarray:
    raw = memoryview(payload).cast("B")
    if len(raw) % 8:
        raise ValueError(f"top-k payload of {len(raw)} bytes is not whole (index, value) pairs")
    k = len(raw) // 8
    idx = np.frombuffer(raw[: 4 * k], dtype=np.uint32)
    val = np.frombuffer(raw[4 * k :], dtype=np.float32)
    if k and int(idx.max()) >= numel:
        raise ValueError(f"top-k index {int(idx.max())} outside a tensor of {numel}")
    out = np.zeros(numel, dtype=np.float32)
    out[idx] = val
    return out


@dataclass
class Compressor:
    """A worker's encoder: one residual (error-feedback memory, hosts/training/residual.py) per tensor for top-k."""

    compression: Compression
    error_feedback: bool = True
    memory: Residuals = field(default_factory=Residuals)

    @property
    def residual(self) -> dict[int, np.ndarray]:
        return self.memory.as_dict()

    def encode(self, tensor_id: int, grad: np.ndarray) -> bytes:
        c = self.compression
        g = np.asarray(grad, dtype=np.float32).reshape(-1)
        if c.scheme == "fp16":
            return encode_fp16(g)
        if c.scheme == "topk":
            acc = self.memory.add(tensor_id, g) if self.error_feedback else g.copy()
            payload, idx = encode_topk(acc, c.k(acc.size))
            if self.error_feedback:  # what was sent leaves the memory; the rest waits for the next push
                self.memory.hold_all_but(tensor_id, acc, idx)
            return payload
        return g.tobytes()


def decode(compression: Compression, payload: bytes | bytearray | memoryview, numel: int) -> np.ndarray:
    """A push's payload back to a dense float32 gradient of ``numel`` elements."""
    if compression.scheme == "fp16":
        return decode_fp16(payload, numel)
    if compression.scheme == "topk":
        return decode_topk(payload, numel)
    out = np.frombuffer(payload, dtype=np.float32)
    if out.size != numel:
        raise ValueError(f"payload of {out.size} float32 for a tensor of {numel}")
    return out
