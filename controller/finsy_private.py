"""The three places mlfc reaches past finsy's public API, in one version-guarded module.

finsy has no public call for (1) reading the loaded pipeline's cookie without loading one,
(2) pushing a pipeline on demand (it only loads one on connect, and the controller must know
whether a switch came up empty), or (3) a Read RPC that returns raw protobufs (finsy's entity
decoding is several times slower than ``Pipeline.decode`` on every read-back). These helpers use
finsy's private members for that. ``check()`` runs at import: if a finsy release renames or
reshapes them, the controller fails at start-up naming what changed, and
tests/controller/test_finsy_private.py fails in CI, instead of a switch erroring at run time.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from importlib.metadata import version

import finsy as fy
from finsy.p4client import P4Client
from finsy.p4schema import P4ConfigResponseType
from finsy.proto import p4r

TESTED_VERSION = "0.30.0"  # pyproject pins it; bump both together after re-running the test


class FinsyChanged(RuntimeError):
    """finsy's private members are not what this module was written against."""


def check() -> None:
    problems = []
    for owner, name, params in (
        (fy.Switch, "_get_pipeline_config_request", {"response_type"}),
        (fy.Switch, "_set_pipeline_config_request", {"config"}),
        (P4Client, "request_iter", {"msg"}),
    ):
        member = getattr(owner, name, None)
        if member is None:
            problems.append(f"{owner.__name__}.{name} is gone")
            continue
        have = set(inspect.signature(member).parameters)
        if not params <= have:
            problems.append(f"{owner.__name__}.{name} takes {sorted(have)}, expected {sorted(params)}")
    if problems:
        raise FinsyChanged(f"finsy {version('finsy')} (mlfc was tested with {TESTED_VERSION}): " + "; ".join(problems))


check()


async def pipeline_cookie_reply(sw: fy.Switch) -> p4r.GetForwardingPipelineConfigResponse:
    """GetForwardingPipelineConfig(COOKIE_ONLY); raises finsy's P4ClientError."""
    return await sw._get_pipeline_config_request(response_type=P4ConfigResponseType.COOKIE_ONLY)


async def set_pipeline(sw: fy.Switch, config: p4r.ForwardingPipelineConfig) -> None:
    """SetForwardingPipelineConfig(VERIFY_AND_COMMIT); raises finsy's P4ClientError."""
    await sw._set_pipeline_config_request(config=config)


async def read_raw(sw: fy.Switch, request: p4r.ReadRequest) -> AsyncIterator[p4r.ReadResponse]:
    """The Read RPC's replies as protobufs; raises finsy's P4ClientError."""
    client = sw._p4client
    if client is None:
        raise FinsyChanged("finsy Switch has no P4 client: read_raw called before connecting")
    async for reply in client.request_iter(request):
        yield reply
