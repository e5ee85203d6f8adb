"""One client per gRPC API (issue 27 part 4): only coordinator/client.py builds the coordinator API's stub,
only controller/client.py the intent API's, and both on the one channel code, mlfc/grpc_client.py (plain text
or TLS, issue 48). Servers, tests and the lab's raw-P4Runtime helpers are not clients of these APIs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OWNERS = {"CoordinatorStub(": "coordinator/client.py", "IntentServiceStub(": "controller/client.py"}
CHANNEL = re.compile(r"\b(insecure|secure)_channel\(")
CHANNEL_OWNER = "mlfc/grpc_client.py"
SKIP_DIRS = {".venv", "tests", "ptf-tests", ".git", "build", "node_modules"}


def _sources() -> list[Path]:
    return [
        p
        for p in ROOT.rglob("*.py")
        if not SKIP_DIRS.intersection(parts := p.relative_to(ROOT).parts)
        and not any(part.startswith(".") for part in parts)  # venvs (.venv-shell), caches
        and not p.name.endswith("_pb2_grpc.py")
    ]


def test_each_api_has_one_client() -> None:
    offenders = []
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text(encoding="utf-8")
        for stub, owner in OWNERS.items():
            if stub in text and rel != owner:
                offenders.append(f"{rel}: builds {stub.rstrip('(')} (use {owner})")
        if CHANNEL.search(text) and rel != CHANNEL_OWNER:
            offenders.append(f"{rel}: opens a gRPC channel of its own (use {CHANNEL_OWNER})")
    assert not offenders, "\n".join(offenders)


def test_the_guard_sees_the_clients() -> None:
    # the owners themselves must match, or the guard above checks nothing
    for stub, owner in OWNERS.items():
        text = (ROOT / owner).read_text(encoding="utf-8")
        assert stub in text and "GrpcClient" in text
    channel_code = (ROOT / CHANNEL_OWNER).read_text(encoding="utf-8")
    assert "grpc.insecure_channel(" in channel_code and "grpc.secure_channel(" in channel_code
