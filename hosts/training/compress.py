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
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from mlfc.hosts.training.residual import Residuals
from mlfc.policy.aggregation import received_elements
from mlfc.policy.precision import INT8_SCALE_BYTES, elements_per_chunk, encoded_bytes

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


# Per-push precision (mlfc.policy.precision): the network-decided alternative to rigid fp16. int8 is laid out
# chunk by chunk (each wire chunk: its float32 scale, then chunk - 4 int8 values), so a withheld or lost chunk
# costs only its own elements, and the receiver's zero-fill (scale 0) decodes to zeros like a lost fp32 chunk.


def encode_int8(values: np.ndarray, chunk: int) -> bytes:
    v = np.asarray(values, dtype=np.float32).reshape(-1)
    per = int(elements_per_chunk("int8", chunk))
    rows = -(-v.size // per)
    padded = np.zeros(rows * per, dtype=np.float32)
    padded[: v.size] = v
    block = padded.reshape(rows, per)
    scale = (np.abs(block).max(axis=1) / 127.0).astype(np.float32)
    safe = np.where(scale > 0, scale, np.float32(1.0))[:, None]
    q = np.clip(np.rint(block / safe), -127, 127).astype(np.int8)
    out = np.empty((rows, chunk), dtype=np.uint8)
    out[:, :INT8_SCALE_BYTES] = scale.astype("<f4").view(np.uint8).reshape(rows, INT8_SCALE_BYTES)
    out[:, INT8_SCALE_BYTES:] = q.view(np.uint8)
    return out.reshape(-1)[: encoded_bytes("int8", v.size, chunk)].tobytes()


def decode_int8(payload: bytes | bytearray | memoryview, numel: int, chunk: int) -> np.ndarray:
    raw = np.frombuffer(memoryview(payload).cast("B"), dtype=np.uint8)
    if raw.size != encoded_bytes("int8", numel, chunk):
        raise ValueError(f"int8 payload of {raw.size} bytes for a tensor of {numel} in {chunk}-byte chunks")
    per = int(elements_per_chunk("int8", chunk))
    rows = -(-numel // per)
    full = np.zeros(rows * chunk, dtype=np.uint8)
    full[: raw.size] = raw
    block = full.reshape(rows, chunk)
    scale = block[:, :INT8_SCALE_BYTES].copy().view("<f4").astype(np.float32)
    q = block[:, INT8_SCALE_BYTES:].view(np.int8).astype(np.float32)
    return (q * scale).reshape(-1)[:numel]


def encode_at(precision: str, values: np.ndarray, chunk: int) -> bytes | np.ndarray:
    """``values`` (float32, flat) at ``precision``: fp32 stays the array itself (the transport reads it)."""
    if precision == "fp16":
        return encode_fp16(values)
    if precision == "int8":
        return encode_int8(values, chunk)
    return np.asarray(values, dtype=np.float32).reshape(-1)


def decode_at(precision: str, payload: bytes | bytearray | memoryview, numel: int, chunk: int) -> np.ndarray:
    """A push at ``precision`` back to float32 (what the PS averages; what the worker's residual subtracts)."""
    if precision == "fp16":
        return decode_fp16(payload, numel)
    if precision == "int8":
        return decode_int8(payload, numel, chunk)
    return decode(NONE, payload, numel)


def received_at(precision: str, numel: int, chunk: int, missing_chunks: Sequence[int]) -> np.ndarray:
    """Boolean mask of the elements of a push at ``precision`` that arrived, given its missing chunks."""
    if precision == "int8":  # chunk k carries elements [k * per, (k + 1) * per): one "byte" each past the scale
        return received_elements(numel, 1, int(elements_per_chunk("int8", chunk)), missing_chunks)
    return received_elements(numel, 2 if precision == "fp16" else 4, chunk, missing_chunks)
