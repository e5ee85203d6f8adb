"""A worker's push shaped around the transport's send, without sockets (``WorkerClient``, hosts/training/client.py,
sends it).

Importance of a pushed chunk: ``mlfc.hosts.importance.assign_importance`` on the real gradient values
(mean |g| rank of the chunk within its tensor) and the tensor's layer position (``layer_index`` of
``num_layers``); the ``protect_fraction`` largest chunks are protected. The classes computed are
passed to the transport explicitly, so the push result can say how many chunks were protected.

Loss becomes delay (``loss_feedback``, PS mode with a loss bound): the elements of a push the PS zero-filled
(the send result's missing chunks) are kept in a per-tensor residual (hosts/training/residual.py) and added to
the next push of that tensor, as error feedback does for top-k; importance is computed on gradient + residual.

The network decides how much (``withhold``, issue 25): the worker keeps a congestion estimate for its job (an
EWMA over pushes of the policy's signal, by default the share of chunks marked or dropped) and before a push
withholds its least important chunks up to min(loss bound, f(estimate)) of the push's bytes
(mlfc.policy.withhold): nothing on a free link. Withheld chunks are not sent; the PS zero-fills them like lost
ones, and their elements reach the residual by the same path (the send result's missing chunks), once.

The precision is part of the decision (``precision``, issue 46 item 3, mlfc.policy.precision): the share the
network asks for is shed first by sending the whole push at fp16 or int8, and only what that cannot shed is
withheld. The rounding (what was sent minus what the PS decodes) joins the residual, so it comes later too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from mlfc.hosts.importance import assign_importance, chunk_magnitudes
from mlfc.hosts.training.client_config import ClientConfig
from mlfc.hosts.training.compress import Compressor, decode_at, encode_at, received_at
from mlfc.hosts.training.residual import Residuals
from mlfc.hosts.transport import SendResult
from mlfc.policy.precision import PRECISIONS, Plan, elements_per_chunk, plan
from mlfc.policy.withhold import CongestionEstimate, choose_withheld, share_for, withheld_share
from mlfc.wire import IMPORTANCE_PROTECTED


@dataclass
class PushResult:
    """What a push sent, or an iteration's pushes added up (``PushShaper.settle``'s ``result``)."""

    bytes: int = 0
    chunks: int = 0
    protected_chunks: int = 0
    retransmits: int = 0
    tolerated_chunks: int = 0  # lost chunks the sender left to the PS's zero-fill (an upper bound on the loss)
    held_elements: int = 0  # gradient elements the PS zero-filled, held back for the next push (loss feedback)
    withheld_chunks: int = 0  # chunks not sent at all (the network-decided share; among the zero-filled ones)
    withheld_bytes: int = 0
    # chunks handed to the network per precision (mlfc.policy.precision; fp32 for every unadapted push)
    precision_chunks: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PRECISIONS, 0))

    @property
    def sent_bytes(self) -> int:
        """Payload bytes handed to the network (retransmissions aside)."""
        return self.bytes - self.withheld_bytes


@dataclass(frozen=True)
class ShapedPush:
    """One push as the transport gets it."""

    payload: bytes | np.ndarray  # compressed bytes, or the gradient (+ residual) as float32
    classes: bytes | int  # importance per chunk, or one class for every chunk (compressed: all protected)
    protected: int  # chunks sent protected, the end-of-tensor one included
    withhold: list[int]  # chunks not to send at all (the network-decided share)
    precision: str = "fp32"  # of the payload (uncompressed pushes; mlfc.policy.precision)
    values: np.ndarray | None = None  # uncompressed: the float32 gradient (+ residual) the payload encodes
    decoded: np.ndarray | None = None  # below fp32: what the PS decodes of it when every chunk arrives


class PushShaper:
    """Per worker, kept across reconnects: the compressor's error feedback, the residuals of loss feedback and
    the job's congestion estimate all describe what earlier pushes left to later ones."""

    def __init__(self, cfg: ClientConfig) -> None:
        self.cfg = cfg
        self.compressor = Compressor(cfg.compression)
        self.residuals = Residuals()  # loss feedback: per tensor, what the PS zero-filled of the last push
        self.congestion = None if cfg.withhold is None else CongestionEstimate(cfg.withhold)

    def shape(self, tensor_id: int, grad: np.ndarray, chunk: int, *, layer_index: int, num_layers: int) -> ShapedPush:
        """What to send of one float32 gradient tensor, in chunks of ``chunk`` bytes, and how."""
        cfg = self.cfg
        buf = np.ascontiguousarray(grad, dtype=np.float32).reshape(-1)
        if cfg.compression.active:
            payload: bytes | np.ndarray = self.compressor.encode(tensor_id, buf)
            classes: bytes | int = IMPORTANCE_PROTECTED
            protected = -(-len(payload) // chunk)
            return ShapedPush(payload, classes, protected, [])
        values = self.residuals.add(tensor_id, buf) if cfg.feeds_back_loss else buf
        how = self._plan(values.size, chunk)
        payload = encode_at(how.precision, values, chunk)
        decoded = None if how.precision == "fp32" else decode_at(how.precision, payload, values.size, chunk)
        # importance per wire chunk: the decoded values in float32 spans holding the same elements as a chunk
        seen = values if decoded is None else decoded
        span = int(4 * elements_per_chunk(how.precision, chunk))
        classes = assign_importance(
            seen, span, layer_index=layer_index, num_layers=num_layers, protect_fraction=cfg.protect_fraction
        )
        # the transport raises the last chunk to protected (end-of-tensor marker): count it the same way
        protected = sum(c >= IMPORTANCE_PROTECTED for c in classes[:-1]) + 1
        withhold = self._to_withhold(len(memoryview(payload).cast("B")), seen, span, classes, chunk, how.withhold)
        return ShapedPush(payload, classes, protected, withhold, how.precision, values, decoded)

    def settle(
        self, tensor_id: int, push: ShapedPush, sent: SendResult, chunk: int, result: PushResult | None = None
    ) -> PushResult:
        """After the send: the congestion estimate updated, what the PS zero-filled held for the next push, and
        the push counted into ``result`` (a new one when None)."""
        if self.congestion is not None:
            self.congestion.update(sent.congestion(self.congestion.policy))
        payload = push.payload
        out = result if result is not None else PushResult()
        out.withheld_chunks += sent.withheld_chunks
        out.withheld_bytes += sent.withheld_bytes
        if self.cfg.feeds_back_loss and push.values is not None:
            out.held_elements += self._hold_lost(tensor_id, push, sent.missing_chunks, chunk)
        out.bytes += len(payload) if isinstance(payload, bytes) else payload.nbytes
        out.precision_chunks[push.precision] += sent.chunks - sent.withheld_chunks
        out.chunks += sent.chunks
        out.protected_chunks += push.protected
        out.retransmits += sent.retransmits
        out.tolerated_chunks += sent.tolerated_chunks
        return out

    def _plan(self, numel: int, chunk: int) -> Plan:
        """This push's precision and withheld share by the network's congestion (fp32, nothing: no withhold)."""
        if self.congestion is None:
            return Plan()
        if self.cfg.precision:  # the precision by the whole share asked, withholding within the bound
            return plan(share_for(self.cfg.withhold, self.congestion.value), numel, chunk, self.cfg.loss_bound)  # type: ignore[arg-type]
        return Plan("fp32", withheld_share(self.cfg.withhold, self.congestion.value, self.cfg.loss_bound))  # type: ignore[arg-type]

    def _to_withhold(
        self, nbytes: int, seen: np.ndarray, span: int, classes: bytes, chunk: int, share: float
    ) -> list[int]:
        """The chunks of this push to withhold: the least important up to ``share`` of its ``nbytes``."""
        if share <= 0:
            return []
        sizes = [chunk] * (len(classes) - 1) + [nbytes - chunk * (len(classes) - 1)]
        return choose_withheld(classes, sizes, share, chunk_magnitudes(seen, span).tolist())

    def _hold_lost(self, tensor_id: int, push: ShapedPush, missing_chunks: Sequence[int], chunk: int) -> int:
        """Keep what the PS did not get of ``push`` for the next push: the elements of ``missing_chunks`` (by
        the PS's own element rule) and, below fp32, the rounding of the rest. Returns how many elements were
        not received at all."""
        values = push.values
        assert values is not None
        lost = ~received_at(push.precision, values.size, chunk, missing_chunks)
        if push.decoded is None:
            if not missing_chunks:
                self.residuals.clear(tensor_id)
            else:
                self.residuals.hold(tensor_id, values, lost)
        else:
            rest = values - push.decoded
            rest[lost] = values[lost]
            self.residuals.keep(tensor_id, rest)
        return int(np.count_nonzero(lost))
