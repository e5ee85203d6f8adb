"""What the coordinator refuses, as domain errors. A refused request changes nothing. The service edge
(coordinator/service.py) maps each kind to a gRPC status; nothing below it knows about gRPC."""

from __future__ import annotations


class RequestError(Exception):
    """A request the coordinator refuses; ``message`` names the offending field and value."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidRequest(RequestError):
    """Malformed or out-of-range values (gRPC INVALID_ARGUMENT)."""


class UnknownJob(RequestError):
    """The job was never registered (NOT_FOUND)."""


class AlreadyRegistered(RequestError):
    """The job id is taken by another agent instance, or by a finished job (ALREADY_EXISTS)."""


class JobFinished(RequestError):
    """A report for a job that has finished (FAILED_PRECONDITION)."""
