"""Errors that name the offending field, shared by config loading and intent compilation."""

from __future__ import annotations


class ValidationError(ValueError):
    """A deployment file or an intent is invalid; ``field`` is a path like ``switches[1].grpc_addr``."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message


def join(parent: str, child: str | int) -> str:
    """``join("jobs", 2) == "jobs[2]"``, ``join("jobs[2]", "windows") == "jobs[2].windows"``."""
    if isinstance(child, int):
        return f"{parent}[{child}]"
    return f"{parent}.{child}" if parent else child
