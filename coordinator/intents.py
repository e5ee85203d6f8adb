"""Delivery of decisions to the controller's IntentService, and keeping them there.

Only the latest decision matters (Apply replaces the whole intent), so the sender holds one slot: a
newer decision overwrites an unsent older one. Failures are retried with exponential backoff and
jitter until the controller acknowledges; decisions are persisted before they get here, so a
coordinator restart re-sends the latest one.

Once delivered, the decision is watched: every ``check_interval_s`` the sender asks the controller what it
holds (Get). If the controller lost it (restarted without its state file: generation back to 0) or holds
another intent, the latest decision is sent again. The controller's own generation counter tells the
normal case apart cheaply: it is the one our Apply returned.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable

import grpc

from mlfc.controller.client import IntentClient
from mlfc.proto import intent_pb2
from mlfc.tls import TlsConfig

log = logging.getLogger(__name__)


def _same_intent(a: intent_pb2.Intent, b: intent_pb2.Intent) -> bool:
    """Equal but for ``source`` (who sent it)."""
    x, y = intent_pb2.Intent(), intent_pb2.Intent()
    x.CopyFrom(a)
    y.CopyFrom(b)
    x.source = y.source = ""
    return x == y


class IntentSender:
    def __init__(
        self,
        target: str,
        on_applied: Callable[[int, int], None] | None = None,
        timeout_s: float = 5.0,
        backoff_initial_s: float = 0.05,
        backoff_max_s: float = 0.25,
        check_interval_s: float = 0.5,
        tls: TlsConfig | None = None,
    ) -> None:
        self.target = target
        self._on_applied = on_applied
        self._timeout = timeout_s
        self._b0, self._bmax = backoff_initial_s, backoff_max_s
        self._check_s = check_interval_s
        # The channel's own reconnect backoff would otherwise grow to minutes while the controller is down;
        # capped at backoff_max_s, a controller that comes back is reached within about that.
        self._client = IntentClient(target, timeout_s, tls=tls, reconnect_backoff_s=(backoff_initial_s, backoff_max_s))
        self._cv = threading.Condition()
        self._pending: tuple[int, intent_pb2.Intent] | None = None
        self._latest: tuple[int, intent_pb2.Intent] | None = None  # the latest decision submitted
        self._checking = check_interval_s > 0  # off for a controller without Get
        self._stopping = False
        self.applied_seq = 0
        self.refused_seq = 0  # latest decision the controller refused as invalid (not retried)
        self.generation = 0  # the controller's generation for the latest decision it acknowledged
        self.last_error = ""
        self.attempts = 0  # Apply calls
        self.resends = 0  # decisions sent again because the controller no longer held them
        self._thread = threading.Thread(target=self._run, name="intent-sender", daemon=True)

    def start(self) -> IntentSender:
        self._thread.start()
        return self

    def submit(self, seq: int, intent: intent_pb2.Intent) -> None:
        with self._cv:
            if self._pending is None or seq >= self._pending[0]:
                self._pending = (seq, intent)
            if self._latest is None or seq >= self._latest[0]:
                self._latest = (seq, intent)
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
        self._client.close()

    def _run(self) -> None:
        backoff = self._b0
        while True:
            with self._cv:
                watch = self._checking and self._latest is not None
                self._cv.wait_for(lambda: self._stopping or self._pending is not None, self._check_s if watch else None)
                if self._stopping:
                    return
                pending = self._pending
            if pending is None:
                self._check()
                continue
            if self._apply(*pending):
                backoff = self._b0
                continue
            with self._cv:
                # A newer decision does not cut the backoff short: a down controller is not hammered.
                self._cv.wait_for(lambda: self._stopping, backoff * random.uniform(0.8, 1.2))
            backoff = min(backoff * 2, self._bmax)

    def _note_error(self, e: grpc.RpcError) -> grpc.StatusCode | None:
        code = e.code() if hasattr(e, "code") else None
        self.last_error = f"{getattr(code, 'name', code)}: {e.details() if hasattr(e, 'details') else e}"
        return code

    def _apply(self, seq: int, intent: intent_pb2.Intent) -> bool:
        """Send one decision; False if it should be retried after a backoff."""
        self.attempts += 1
        try:
            reply = self._client.apply(intent, timeout_s=self._timeout)
        except grpc.RpcError as e:
            was_ok = not self.last_error
            if self._note_error(e) == grpc.StatusCode.INVALID_ARGUMENT:
                # Re-sending the same intent cannot succeed; wait for the next decision.
                log.error("controller rejected decision %d: %s", seq, self.last_error)
                with self._cv:
                    self.refused_seq = max(self.refused_seq, seq)
                    if self._pending is not None and self._pending[0] == seq:
                        self._pending = None
                return True
            # Warn once per outage, not on every retry.
            log.log(
                logging.WARNING if was_ok else logging.DEBUG,
                "controller %s: %s; retrying with backoff up to %.1fs",
                self.target,
                self.last_error,
                self._bmax,
            )
            return False
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
        return True

    def _check(self) -> None:
        """Ask the controller what it holds; re-submit the latest decision if that is not it."""
        with self._cv:
            if self._latest is None or self._pending is not None:
                return
            seq, intent = self._latest
            if seq == self.refused_seq or seq > self.applied_seq:
                return  # refused: sending it again cannot succeed
        try:
            reply = self._client.get(timeout_s=self._timeout)
        except grpc.RpcError as e:
            was_ok = not self.last_error
            if self._note_error(e) == grpc.StatusCode.UNIMPLEMENTED:
                log.warning("controller %s has no Get: decisions are not watched after delivery", self.target)
                self._checking, self.last_error = False, ""
            elif was_ok:
                log.warning("controller %s: %s", self.target, self.last_error)
            return
        self.last_error = ""
        if reply.generation == self.generation:
            return  # it holds what our Apply gave it
        if _same_intent(reply.intent, intent):
            self.generation = reply.generation  # e.g. restored from its state file
            return
        log.warning(
            "controller %s holds generation %d (%d job(s), from %r), not decision %d (generation %d): re-sending",
            self.target,
            reply.generation,
            len(reply.intent.jobs),
            reply.intent.source,
            seq,
            self.generation,
        )
        self.resends += 1
        self.submit(seq, intent)
