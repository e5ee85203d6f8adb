"""The intent API over real gRPC, with no switch reachable: validation, generations, Get, Status, metrics."""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import Awaitable, Callable

import grpc
import pytest
from controller_helpers import config_doc, needs_artifacts, switch_doc

from mlfc import contract
from mlfc.controller.config import parse_config
from mlfc.controller.daemon import Daemon
from mlfc.launch.process import free_port
from mlfc.proto import intent_pb2 as pb
from mlfc.proto import intent_pb2_grpc as pb_grpc

pytestmark = needs_artifacts


def with_daemon(body: Callable[[Daemon, pb_grpc.IntentServiceStub], Awaitable[None]]) -> None:
    """Run ``body`` against a started daemon and its intent API; always stop the daemon."""
    doc = config_doc(
        switch_doc("s1", free_port(), 1),  # nothing listens there: the switch stays disconnected
        pipeline={"p4info": str(contract.P4INFO), "device_config": str(contract.BMV2_JSON)},
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
    # Wait for a failed connection attempt (a fixed sleep may end before the first one on a loaded machine).
    deadline = asyncio.get_running_loop().time() + 15
    while not (status := await stub.Status(pb.StatusRequest(), timeout=5)).switches[0].last_error:
        assert asyncio.get_running_loop().time() < deadline, "no connection attempt failed within 15 s"
        await asyncio.sleep(0.05)
    (s1,) = status.switches
    assert (s1.name, s1.connected, s1.primary, s1.pipeline) == ("s1", False, False, "")
    assert "UNAVAILABLE" in s1.last_error or "no P4Runtime answer" in s1.last_error
    body = await asyncio.to_thread(lambda: urllib.request.urlopen(f"http://{daemon.metrics_address}/metrics").read())
    text = body.decode()
    assert 'mlfc_switch_connected{switch="s1"} 0.0' in text
    assert "mlfc_intent_generation 0.0" in text


def _state_doc(state_file) -> dict:
    return config_doc(
        switch_doc("s1", free_port(), 1),
        pipeline={"p4info": str(contract.P4INFO), "device_config": str(contract.BMV2_JSON)},
        listen={"intent": "127.0.0.1:0", "metrics": "127.0.0.1:0"},
        controller={"reconnect_min_s": 0.05, "reconnect_max_s": 0.2, "state_file": str(state_file)},
    )


def test_a_restarted_controller_serves_the_intent_it_accepted(tmp_path) -> None:
    import json
    import shutil

    state = tmp_path / "state" / "controller.json"
    state.parent.mkdir()
    doc = _state_doc(state)

    async def main() -> None:
        first = Daemon(parse_config(doc))
        assert first.generation == 0  # no file yet: the deployment file's defaults
        await first.start()
        try:
            async with grpc.aio.insecure_channel(first.intent_address) as channel:
                assert (await pb_grpc.IntentServiceStub(channel).Apply(GOOD, timeout=5)).generation == 1
        finally:
            await first.stop()
        assert json.loads(state.read_text())["generation"] == 1

        second = Daemon(parse_config(doc))  # the restart
        assert (second.generation, second.intent) == (1, GOOD)
        assert second.compiled.entries == first.compiled.entries
        await second.start()
        try:
            async with grpc.aio.insecure_channel(second.intent_address) as channel:
                stub = pb_grpc.IntentServiceStub(channel)
                got = await stub.Get(pb.GetRequest(), timeout=5)
                assert (got.generation, got.intent) == (1, GOOD)
                # A state file that cannot be written: the intent is not accepted, nothing changes.
                shutil.rmtree(state.parent)
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await stub.Apply(pb.Intent(jobs=[pb.JobIntent(job_id=4, priority=2)]), timeout=5)
                assert err.value.code() == grpc.StatusCode.UNAVAILABLE and "cannot save" in err.value.details()
                assert (await stub.Get(pb.GetRequest(), timeout=5)).generation == 1
        finally:
            await second.stop()

    asyncio.run(main())


def test_a_state_file_that_does_not_load_is_moved_aside(tmp_path) -> None:
    state = tmp_path / "controller.json"
    state.write_text('{"generation": 3, "intent": {"jobs": [{"job_id": 3, "priority": 99}]}}')  # priority > 6
    d = Daemon(parse_config(_state_doc(state)))
    assert d.generation == 0 and not d.intent.jobs
    assert not state.exists() and (tmp_path / "controller.json.rejected").exists()
    state.write_text("not json")
    assert Daemon(parse_config(_state_doc(state))).generation == 0


def test_state_file_folder_must_exist(tmp_path) -> None:
    from mlfc.controller.errors import ValidationError

    with pytest.raises(ValidationError, match=r"controller\.state_file"):
        parse_config(_state_doc(tmp_path / "missing" / "controller.json"))
