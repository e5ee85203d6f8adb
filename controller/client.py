"""The client of the controller's intent API (mlfc/proto/intent.proto): the one way mlfc code talks to a
running controller (the CLI, the coordinator's decision sender, the lab, the tests). The only module that
builds an IntentServiceStub (tests/unit/test_one_client_per_api.py keeps it so).

    with IntentClient("127.0.0.1:50090") as ctl:
        reply = ctl.apply(intent)            # raises grpc.RpcError (INVALID_ARGUMENT: nothing changed)
        ctl.wait_synced(reply.generation)    # every switch connected, primary and holding it
"""

from __future__ import annotations

import time

import grpc

from mlfc.controller.config import DEFAULT_INTENT_ADDR
from mlfc.grpc_client import GrpcClient
from mlfc.proto import intent_pb2 as pb
from mlfc.proto import intent_pb2_grpc as pb_grpc
from mlfc.tls import TlsConfig, TlsHandshakeError


class IntentClient(GrpcClient):
    def __init__(
        self,
        addr: str = DEFAULT_INTENT_ADDR,
        timeout_s: float = 30.0,
        *,
        tls: TlsConfig | None = None,
        reconnect_backoff_s: tuple[float, float] | None = None,
    ) -> None:
        """``reconnect_backoff_s`` = (initial, max) bounds gRPC's own reconnect backoff, which would
        otherwise grow to minutes while the controller is down. ``tls``: the controller serves TLS."""
        super().__init__(addr, timeout_s=timeout_s, tls=tls, reconnect_backoff_s=reconnect_backoff_s)
        self._stub = pb_grpc.IntentServiceStub(self._channel)

    @property
    def addr(self) -> str:
        return self.address

    def apply(self, intent: pb.Intent, timeout_s: float | None = None) -> pb.ApplyReply:
        """Replace the desired state; the reply says which switches did not confirm it in time."""
        return self._call(self._stub.Apply, intent, timeout_s)

    def get(self, timeout_s: float | None = None) -> pb.GetReply:
        return self._call(self._stub.Get, pb.GetRequest(), timeout_s)

    def status(self, timeout_s: float | None = None) -> pb.StatusReply:
        return self._call(self._stub.Status, pb.StatusRequest(), timeout_s)

    def wait_ready(self, timeout_s: float = 20.0) -> pb.StatusReply:
        """Until the controller answers Status."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return self.status(timeout_s=0.5)
            except TlsHandshakeError:
                if self.tls is not None:
                    raise  # certificates do not change by waiting
                if time.monotonic() > deadline:
                    raise
            except grpc.RpcError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def wait_synced(
        self, generation: int | None = None, timeout_s: float = 20.0, switches: set[str] | None = None
    ) -> pb.StatusReply:
        """Until every switch (or every one named) is connected, primary, runs our pipeline and holds
        ``generation`` (default: the current one); raises TimeoutError naming what is missing."""
        deadline = time.monotonic() + timeout_s
        last = ""
        while True:
            try:
                st = self.status(timeout_s=2.0)
                want = st.generation if generation is None else generation
                shown = [s for s in st.switches if switches is None or s.name in switches]
                late = [s for s in shown if not (s.connected and s.primary and s.pipeline)]
                late += [s for s in shown if (not s.applied or s.applied_generation < want) and s not in late]
                if not late and (switches is None or switches <= {s.name for s in shown}):
                    return st
                last = "; ".join(
                    f"{s.name}: connected={s.connected} primary={s.primary} "
                    f"generation={s.applied_generation if s.applied else '-'}/{want}"
                    + (f" ({s.last_error})" if s.last_error else "")
                    for s in late
                )
            except grpc.RpcError as exc:
                last = f"{exc.code().name}: {exc.details()}"  # type: ignore[attr-defined]
            if time.monotonic() > deadline:
                raise TimeoutError(f"switches not in sync after {timeout_s:g} s: {last}")
            time.sleep(0.05)
