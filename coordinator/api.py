"""The coordinator's API contract beyond the proto types: the token header, the default address and the
limits a request must respect. Agents (mlfc.hosts.agent) and clients import these; nothing else defines them."""

from __future__ import annotations

from pathlib import Path

TOKEN_HEADER = "x-mlfc-token"  # metadata header carrying the shared token on every call
DEFAULT_ADDRESS = "127.0.0.1:50061"

MAX_BATCH = 4096  # reports per Report call
MAX_MESSAGE_BYTES = 4 * 1024 * 1024  # gRPC receive limit: larger payloads get RESOURCE_EXHAUSTED
MAX_WORKERS = 1024
MAX_FLOWS_PER_WORKER = 64
MAX_NAME = 256
MAX_REASON = 256  # characters of a Finish reason
MAX_INSTANCE = 128
# Iterations a report may carry. From 2**31 up a value is almost surely a negative number written as unsigned
# 32-bit (-1 is 4294967295): refused. A report may lead its worker's latest one by at most MAX_ITERATION_JUMP
# (e.g. an agent whose buffer dropped the oldest reports during a long outage jumps by what it dropped; a
# million iterations is days of training): a larger jump is a corrupted counter, refused.
MAX_REPORT_ITERATION = (1 << 31) - 1
MAX_ITERATION_JUMP = 1_000_000


def read_token(path: str | Path) -> str:
    """The token in a token file: its content, surrounding whitespace stripped."""
    token = Path(path).read_text().strip()
    if not token:
        raise ValueError(f"token file {path} is empty")
    return token


def resolve_token(token: str | None, token_file: str | Path | None) -> str:
    """The token given, else the one in ``token_file``; ValueError if there is none."""
    if token is None and token_file is not None:
        token = read_token(token_file)
    if not token:
        raise ValueError("a token (or token_file) is required")
    return token
