"""The channel under mlfc's API clients (mlfc.coordinator.client, mlfc.controller.client): the one place that
opens a gRPC channel to an mlfc API (tests/unit/test_one_client_per_api.py keeps it so), plain text or TLS
(mlfc.tls), with a bounded reconnect backoff, metadata sent on every call (the coordinator's token) and each
call's deadline. A call that fails at TLS raises mlfc.tls.TlsHandshakeError naming the cause."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import grpc

from mlfc.grpc_options import reconnect_backoff
from mlfc.tls import TlsConfig, channel_credentials, channel_options, explain

_Self = TypeVar("_Self", bound="GrpcClient")


def open_channel(
    address: str, tls: TlsConfig | None = None, reconnect_backoff_s: tuple[float, float] | None = None
) -> grpc.Channel:
    options: list[tuple[str, Any]] = [] if reconnect_backoff_s is None else [*reconnect_backoff(*reconnect_backoff_s)]
    if tls is None:
        return grpc.insecure_channel(address, options=options)
    return grpc.secure_channel(address, channel_credentials(tls), options=options + channel_options(tls))


class GrpcClient:
    def __init__(
        self,
        address: str,
        *,
        timeout_s: float,
        tls: TlsConfig | None = None,
        metadata: Sequence[tuple[str, str]] = (),
        reconnect_backoff_s: tuple[float, float] | None = None,
    ) -> None:
        """``timeout_s`` is every call's deadline unless the call names its own. ``reconnect_backoff_s`` =
        (initial, max) bounds gRPC's own reconnect backoff, which would otherwise grow to minutes while the
        server is down. ``tls`` None: plain text."""
        self.address = address
        self.timeout_s = timeout_s
        self.tls = tls
        self._metadata = tuple(metadata) or None
        self._channel = open_channel(address, tls, reconnect_backoff_s)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _deadline(self, timeout_s: float | None) -> float:
        # None: the client's default; 0 stays 0 (an explicit --timeout 0 fails at once)
        return self.timeout_s if timeout_s is None else timeout_s

    def _call(self, method: Callable[..., Any], request: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
        try:
            return method(request, metadata=self._metadata, timeout=self._deadline(timeout_s), **kwargs)
        except grpc.RpcError as exc:
            named = explain(exc, self.address, self.tls)
            if named is exc:
                raise
            raise named from None
