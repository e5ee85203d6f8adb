"""The intent API over real gRPC, with no switch reachable: validation, generations, Get, Status, metrics."""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import Awaitable, Callable

import grpc
import pytest
from controller_helpers import BMV2_JSON, P4INFO, config_doc, needs_artifacts, switch_doc

from mlfc.controller.bmv2 import free_port
from mlfc.controller.config import parse_config
from mlfc.controller.daemon import Daemon
from mlfc.proto import intent_pb2 as pb
from mlfc.proto import intent_pb2_grpc as pb_grpc

pytestmark = needs_artifacts


def with_daemon(body: Callable[[Daemon, pb_grpc.IntentServiceStub], Awaitable[None]]) -> None:
    """Run ``body`` against a started daemon and its intent API; always stop the daemon."""
    doc = config_doc(
        switch_doc("s1", free_port(), 1),  # nothing listens there: the switch stays disconnected
        pipeline={"p4info": str(P4INFO), "device_config": str(BMV2_JSON)},
        listen={"intent": "127.0.0.1:0", "metrics": "127.0.0.1:0"},
        controller={"reconnect_min_s": 0.05, "reconnect_max_s": 0.2},
    )

    async def main() -> None:
        d = Daemon(parse_config(doc))
        await d.start()
        try:
            async with grpc.aio.insecure_channel(d.intent_address) as channel:
                await body(d, pb_grpc.IntentServiceStub(channel))
        finally:
            await d.stop()

    asyncio.run(main())


GOOD = pb.Intent(jobs=[pb.JobIntent(job_id=3, priority=4)], source="test")


def test_apply_get_and_rejections() -> None:
    with_daemon(_apply_get_and_rejections)


async def _apply_get_and_rejections(daemon: Daemon, stub: pb_grpc.IntentServiceStub) -> None:
    reply = await stub.Apply(GOOD, timeout=5)
    assert reply.generation == 1
    assert reply.entries == len(daemon.compiled.entries["s1"])
    bad = pb.Intent(jobs=[pb.JobIntent(job_id=3, priority=4), pb.JobIntent(job_id=3, priority=7)])
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Apply(bad, timeout=5)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details().startswith("jobs[1].priority: ")
    # The rejected intent changed nothing.
    got = await stub.Get(pb.GetRequest(), timeout=5)
    assert got.generation == 1
    assert got.intent == GOOD
    assert daemon.agents["s1"].desired.generation == 1


def test_status_and_metrics_without_switches() -> None:
    with_daemon(_status_and_metrics_without_switches)


async def _status_and_metrics_without_switches(daemon: Daemon, stub: pb_grpc.IntentServiceStub) -> None:
    await asyncio.sleep(0.3)  # a few failed connection attempts
    status = await stub.Status(pb.StatusRequest(), timeout=5)
    (s1,) = status.switches
    assert (s1.name, s1.connected, s1.primary, s1.pipeline) == ("s1", False, False, "")
    assert "UNAVAILABLE" in s1.last_error or "no P4Runtime answer" in s1.last_error
    body = await asyncio.to_thread(lambda: urllib.request.urlopen(f"http://{daemon.metrics_address}/metrics").read())
    text = body.decode()
    assert 'mlfc_switch_connected{switch="s1"} 0.0' in text
    assert "mlfc_intent_generation 0.0" in text
