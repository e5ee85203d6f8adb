"""Polling a running coordinator's Status while the jobs run: one thread, one client (the coordinator's own
``CoordinatorClient``), each reply handed to a callback. The decision timeline (lab/decisions.py) and the
fallback's switches (lab/fallback_watch.py) are two such callbacks."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import grpc

from mlfc.coordinator.client import CoordinatorClient
from mlfc.proto import coordinator_pb2 as pb


class StatusPoller:
    """Calls ``on_status(reply)`` every ``interval_s`` from ``start`` to ``stop``; failed polls are counted in
    ``errors`` (the coordinator stops at the end of a run, so the last polls fail)."""

    def __init__(
        self,
        address: str,
        token_file: Path | str,
        on_status: Callable[[pb.StatusReply], None],
        interval_s: float = 0.25,
        name: str = "status-poll",
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s={interval_s} must be > 0")
        self._client = CoordinatorClient(address, token_file=token_file, timeout_s=2.0)
        self._on_status = on_status
        self.interval_s = interval_s
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=name)

    def start(self) -> StatusPoller:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self._client.close()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                reply = self._client.status()
            except grpc.RpcError:
                self.errors += 1
                continue
            self._on_status(reply)
