"""The coordinator's gRPC server: token check, request handlers, the mapping of domain errors to gRPC
statuses (the only place that knows both), and the process wiring: SQLite store -> engine <- decision loop,
engine -> intent sender -> controller."""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import Callable
from concurrent import futures
from pathlib import Path

import grpc

from mlfc.proto import coordinator_pb2 as pb
from mlfc.proto import coordinator_pb2_grpc
from mlfc.tls import TlsConfig, add_port, as_client, check_listen, load

from .api import DEFAULT_ADDRESS, MAX_MESSAGE_BYTES, TOKEN_HEADER
from .engine import Engine, EngineConfig
from .errors import AlreadyRegistered, InvalidRequest, JobFinished, RequestError, UnknownJob
from .intents import IntentSender
from .loop import DecisionLoop
from .store import Store

log = logging.getLogger(__name__)

DEFAULT_LISTEN = DEFAULT_ADDRESS
_STATUS = {
    InvalidRequest: grpc.StatusCode.INVALID_ARGUMENT,
    UnknownJob: grpc.StatusCode.NOT_FOUND,
    AlreadyRegistered: grpc.StatusCode.ALREADY_EXISTS,
    JobFinished: grpc.StatusCode.FAILED_PRECONDITION,
}


def status_of(error: RequestError) -> grpc.StatusCode:
    return next((code for kind, code in _STATUS.items() if isinstance(error, kind)), grpc.StatusCode.INVALID_ARGUMENT)


class _TokenAuth(grpc.ServerInterceptor):
    """Rejects calls whose metadata lacks the shared token (UNAUTHENTICATED, before any handler runs)."""

    def __init__(self, token: str) -> None:
        self._token = token.encode()

    def intercept_service(self, continuation, handler_call_details):  # type: ignore[no-untyped-def]
        given = None
        for key, value in handler_call_details.invocation_metadata or ():
            if key == TOKEN_HEADER:
                given = value.encode() if isinstance(value, str) else value
        if given is None:
            return _deny(f"missing token: send metadata header {TOKEN_HEADER!r}")
        if not hmac.compare_digest(given, self._token):
            return _deny(f"wrong token in metadata header {TOKEN_HEADER!r}")
        return continuation(handler_call_details)


def _deny(message: str) -> grpc.RpcMethodHandler:
    def handler(request, context):  # type: ignore[no-untyped-def]
        context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    return grpc.unary_unary_rpc_method_handler(handler)


class CoordinatorServicer(coordinator_pb2_grpc.CoordinatorServicer):
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def _call(self, fn, request, context):  # type: ignore[no-untyped-def]
        try:
            return fn(request)
        except RequestError as e:
            context.abort(status_of(e), e.message)

    def Register(self, request, context):  # type: ignore[no-untyped-def]
        return self._call(self._engine.register, request, context)

    def Report(self, request, context):  # type: ignore[no-untyped-def]
        return self._call(self._engine.report, request, context)

    def Finish(self, request, context):  # type: ignore[no-untyped-def]
        return self._call(self._engine.finish, request, context)

    def Explain(self, request, context):  # type: ignore[no-untyped-def]
        return self._call(lambda r: self._engine.explain(r.job_id), request, context)

    def Status(self, request, context):  # type: ignore[no-untyped-def]
        return self._call(lambda r: self._engine.status(), request, context)

    def ListJobs(self, request, context):  # type: ignore[no-untyped-def]
        return self._call(lambda r: pb.ListJobsReply(jobs=self._engine.jobs()), request, context)

    def ListDecisions(self, request, context):  # type: ignore[no-untyped-def]
        return self._call(self._list_decisions, request, context)

    def _list_decisions(self, r: pb.ListDecisionsRequest) -> pb.ListDecisionsReply:
        e = self._engine
        found = e.decisions(r.after, r.limit or 1000)
        return pb.ListDecisionsReply(decisions=found, latest=e.latest_seq, applied=e.applied_seq)


class Coordinator:
    """A running coordinator: ``Coordinator(db, token=...).start()``; ``.port`` is the bound port."""

    def __init__(
        self,
        db_path: str | Path,
        token: str,
        listen: str = "127.0.0.1:0",
        controller: str | None = None,
        config: EngineConfig | None = None,
        synchronous: str = "FULL",
        allow_remote: bool = False,
        tls: TlsConfig | None = None,
        max_workers: int = 8,
        controller_backoff_max_s: float = 0.25,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``tls``: serve TLS (and, with ``client_auth``, only to clients with a certificate of its CA); the
        coordinator then also reaches the controller over TLS, trusting ``tls.ca`` and showing its own
        certificate (for a controller that requires client certificates). None: plain text, loopback only."""
        if not token:
            raise ValueError("a token is required")
        self._host, self._want_port = check_listen(listen, allow_remote, tls)
        if tls is not None:  # read and check the files before anything is opened: a bad path fails here
            load(tls, "server")
            if controller:
                load(as_client(tls), "client")
        self.store = Store(db_path, synchronous)
        self.engine = Engine(self.store, config, clock=clock)
        self.loop = DecisionLoop(self.engine.decide, self.engine.config.tick_s, self.engine.config.min_gap_s)
        self.engine.on_commit = self.loop.poke
        self.sender: IntentSender | None = None
        if controller:
            self.sender = IntentSender(
                controller,
                self.engine.on_applied,
                backoff_max_s=controller_backoff_max_s,
                tls=None if tls is None else as_client(tls),
            )
            self.engine.sink = self.sender.submit
            sender = self.sender
            self.engine.controller_error = lambda: sender.last_error
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="coord-rpc"),
            interceptors=[_TokenAuth(token)],
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.so_reuseport", 0),  # a second coordinator on the same port must fail, not share it
            ],
        )
        coordinator_pb2_grpc.add_CoordinatorServicer_to_server(CoordinatorServicer(self.engine), self._server)
        host = f"[{self._host}]" if ":" in self._host else self._host
        self.port = add_port(self._server, f"{host}:{self._want_port}", tls)
        if not self.port:
            raise OSError(f"cannot listen on {listen}")
        self.address = f"{host}:{self.port}"

    def start(self) -> Coordinator:
        if self.sender is not None:
            self.sender.start()
            latest = self.engine.latest_decision()
            if latest is not None:
                # The controller may have lost or missed it while we were down; Apply is idempotent.
                self.sender.submit(*latest)
        self.loop.start()
        self._server.start()
        log.info("coordinator listening on %s (db %s)", self.address, self.store.path)
        return self

    def wait(self) -> None:
        self._server.wait_for_termination()

    def stop(self, grace: float = 1.0) -> None:
        self._server.stop(grace).wait()
        self.loop.stop()
        if self.sender is not None:
            self.sender.stop()
        self.store.close()

    def __enter__(self) -> Coordinator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop(0)
