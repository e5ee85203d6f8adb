"""gRPC channel options shared by the API clients (mlfc.coordinator.client, mlfc.controller.client)."""

from __future__ import annotations


def reconnect_backoff(initial_s: float, max_s: float) -> list[tuple[str, int]]:
    """Bound gRPC's own reconnect backoff to (initial_s, max_s): by default it grows to minutes while the
    server is down, so a caller retrying with its own shorter backoff would find the channel still waiting."""
    lo, hi = (max(1, int(s * 1000)) for s in (initial_s, max_s))
    return [
        ("grpc.initial_reconnect_backoff_ms", lo),
        ("grpc.min_reconnect_backoff_ms", lo),
        ("grpc.max_reconnect_backoff_ms", hi),
    ]
