"""Delivery of decisions to the controller's IntentService.

Only the latest decision matters (Apply replaces the whole intent), so the sender holds one slot: a
newer decision overwrites an unsent older one. Failures are retried with exponential backoff and
jitter until the controller acknowledges; decisions are persisted before they get here, so a
coordinator restart re-sends the latest one.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable

import grpc

from mlfc.proto import intent_pb2, intent_pb2_grpc

log = logging.getLogger(__name__)


class IntentSender:
    def __init__(
        self,
        target: str,
        on_applied: Callable[[int, int], None] | None = None,
        timeout_s: float = 5.0,
        backoff_initial_s: float = 0.05,
        backoff_max_s: float = 5.0,
    ) -> None:
        self.target = target
        self._on_applied = on_applied
        self._timeout = timeout_s
        self._b0, self._bmax = backoff_initial_s, backoff_max_s
        # The channel's own reconnect backoff would otherwise grow to minutes while the controller is down.
        self._channel = grpc.insecure_channel(
            target,
            options=[
                ("grpc.initial_reconnect_backoff_ms", int(backoff_initial_s * 1000) or 1),
                ("grpc.min_reconnect_backoff_ms", int(backoff_initial_s * 1000) or 1),
                ("grpc.max_reconnect_backoff_ms", int(backoff_max_s * 1000)),
            ],
        )
        self._stub = intent_pb2_grpc.IntentServiceStub(self._channel)
        self._cv = threading.Condition()
        self._pending: tuple[int, intent_pb2.Intent] | None = None
        self._stopping = False
        self.applied_seq = 0
        self.refused_seq = 0  # latest decision the controller refused as invalid (not retried)
        self.generation = 0
        self.last_error = ""
        self.attempts = 0
        self._thread = threading.Thread(target=self._run, name="intent-sender", daemon=True)

    def start(self) -> IntentSender:
        self._thread.start()
        return self

    def submit(self, seq: int, intent: intent_pb2.Intent) -> None:
        with self._cv:
            if self._pending is None or seq >= self._pending[0]:
                self._pending = (seq, intent)
            self._cv.notify_all()

    def wait_applied(self, seq: int, timeout: float) -> bool:
        with self._cv:
            return self._cv.wait_for(lambda: self.applied_seq >= seq, timeout)

    def stop(self) -> None:
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout=self._timeout + 1)
        self._channel.close()

    def _run(self) -> None:
        backoff = self._b0
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._stopping or self._pending is not None)
                if self._stopping:
                    return
                assert self._pending is not None
                seq, intent = self._pending
            self.attempts += 1
            try:
                reply = self._stub.Apply(intent, timeout=self._timeout)
            except grpc.RpcError as e:
                code = e.code() if hasattr(e, "code") else None
                self.last_error = f"{getattr(code, 'name', code)}: {e.details() if hasattr(e, 'details') else e}"
                if code == grpc.StatusCode.INVALID_ARGUMENT:
                    # Re-sending the same intent cannot succeed; wait for the next decision.
                    log.error("controller rejected decision %d: %s", seq, self.last_error)
                    with self._cv:
                        self.refused_seq = max(self.refused_seq, seq)
                        if self._pending is not None and self._pending[0] == seq:
                            self._pending = None
                    continue
                # Warn once per outage, not on every retry.
                level = logging.WARNING if backoff == self._b0 else logging.DEBUG
                log.log(
                    level,
                    "controller %s: %s; retrying with backoff up to %.1fs",
                    self.target,
                    self.last_error,
                    self._bmax,
                )
                with self._cv:
                    # A newer decision does not cut the backoff short: a down controller is not hammered.
                    self._cv.wait_for(lambda: self._stopping, backoff * random.uniform(0.8, 1.2))
                backoff = min(backoff * 2, self._bmax)
                continue
            backoff = self._b0
            self.last_error = ""
            with self._cv:
                self.applied_seq = max(self.applied_seq, seq)
                self.generation = reply.generation
                if self._pending is not None and self._pending[0] == seq:
                    self._pending = None
                self._cv.notify_all()
            if self._on_applied is not None:
                try:
                    self._on_applied(seq, reply.generation)
                except Exception:  # bookkeeping must not kill delivery
                    log.exception("recording applied decision %d failed", seq)
