"""The intent API (mlfc/proto/intent.proto) served with grpc.aio on the daemon's event loop."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import grpc

from mlfc.controller.errors import ValidationError
from mlfc.controller.state import StateError
from mlfc.proto import intent_pb2 as pb
from mlfc.proto import intent_pb2_grpc as pb_grpc
from mlfc.tls import TlsConfig, add_port, check_listen

if TYPE_CHECKING:
    from mlfc.controller.daemon import Daemon

LOG = logging.getLogger(__name__)


class IntentServicer(pb_grpc.IntentServiceServicer):
    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon

    async def Apply(self, request: pb.Intent, context: grpc.aio.ServicerContext) -> pb.ApplyReply:
        timeout_s = self.daemon.config.controller.apply_timeout_s
        remaining = context.time_remaining()
        if remaining is not None:
            timeout_s = max(0.0, min(timeout_s, remaining - 0.05))  # answer before the caller gives up
        try:
            result = await self.daemon.apply(request, timeout_s)
        except ValidationError as exc:
            LOG.warning("intent from %r rejected: %s", request.source, exc)
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except StateError as exc:  # valid, but not kept: the caller may retry
            LOG.error("intent from %r not accepted: %s", request.source, exc)
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        return pb.ApplyReply(generation=result.generation, entries=result.entries, unconverged=result.unconverged)

    async def Get(self, request: pb.GetRequest, context: grpc.aio.ServicerContext) -> pb.GetReply:
        return pb.GetReply(intent=self.daemon.intent, generation=self.daemon.generation)

    async def Status(self, request: pb.StatusRequest, context: grpc.aio.ServicerContext) -> pb.StatusReply:
        return self.daemon.status()


async def start_intent_server(
    daemon: Daemon, addr: str, tls: TlsConfig | None = None, allow_remote: bool = False
) -> tuple[grpc.aio.Server, int]:
    """Bind ``addr`` (host:port; port 0 picks a free one) and start serving, with TLS when ``tls`` is given;
    returns (server, port). A non-loopback ``addr`` needs ``allow_remote`` and TLS (mlfc.tls.check_listen)."""
    check_listen(addr, allow_remote, tls)
    server = grpc.aio.server()
    pb_grpc.add_IntentServiceServicer_to_server(IntentServicer(daemon), server)
    port = add_port(server, addr, tls)
    if port == 0:
        raise OSError(f"cannot listen on {addr}")
    await server.start()
    return server, port
