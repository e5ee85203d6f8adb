"""The controller over TLS, in process against real servers: its P4Runtime connections to a TLS reference
switch (and back after the switch restarts), its intent API with mutual TLS, the coordinator's intent sender
reaching it, and each refusal naming its cause."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from tls_helpers import Certs

from mlfc import contract
from mlfc.controller import cli
from mlfc.controller.client import IntentClient
from mlfc.controller.config import DeploymentConfig, parse_config
from mlfc.controller.daemon import Daemon
from mlfc.controller.pipeline import Pipeline
from mlfc.controller.switch import SwitchClient, SwitchError
from mlfc.coordinator.intents import IntentSender
from mlfc.launch.process import free_port
from mlfc.proto import intent_pb2 as pb
from mlfc.refswitch.server import RefSwitchServer, SwitchOptions
from mlfc.tls import TlsConfig, TlsHandshakeError

pytestmark = pytest.mark.skipif(
    not (contract.P4INFO.is_file() and contract.BMV2_JSON.is_file()), reason="p4src/build not built (make p4)"
)
INTENT = pb.Intent(jobs=[pb.JobIntent(job_id=3, priority=4)], source="tls-test")


def refswitch(port: int, tls: TlsConfig | None) -> RefSwitchServer:
    return RefSwitchServer(SwitchOptions(grpc_addr=f"127.0.0.1:{port}", admin_port=0, tls=tls)).start()


def deployment(certs: Certs, switch_port: int, **tls: Any) -> DeploymentConfig:
    doc = {
        "pipeline": {"p4info": str(contract.P4INFO), "device_config": str(contract.BMV2_JSON)},
        "listen": {"intent": "127.0.0.1:0", "metrics": "127.0.0.1:0"},
        "controller": {"reconnect_min_s": 0.05, "reconnect_max_s": 0.2, "apply_timeout_s": 5.0},
        "tls": {"ca": "ca.crt", "cert": "ctl.crt", "key": "ctl.key", **tls},
        "switches": [{"name": "sw1", "grpc_addr": f"127.0.0.1:{switch_port}", "target": "none"}],
    }
    return parse_config(doc, base_dir=certs.dir)


@contextmanager
def running(config: DeploymentConfig) -> Iterator[Daemon]:
    """The daemon on its own event loop in a thread (built there: finsy's objects belong to that loop),
    so the test talks to it with the blocking clients, as the coordinator and the CLI do."""
    loop = asyncio.new_event_loop()
    made: list[Daemon] = []

    async def main() -> None:
        made.append(Daemon(config))
        await made[0].run()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not (made and made[0].intent_port):
        assert thread.is_alive() and time.monotonic() < deadline, "the daemon did not start"
        time.sleep(0.01)
    try:
        yield made[0]
    finally:
        loop.call_soon_threadsafe(made[0].request_stop)
        thread.join(10)
        loop.close()


def switch_status(ctl: IntentClient) -> pb.SwitchStatus:
    return ctl.status(timeout_s=2).switches[0]


def test_controller_serves_tls_and_follows_a_restarted_tls_switch(certs: Certs) -> None:
    port = free_port()
    sw = refswitch(port, certs.server("sw1", client_auth=True))  # the controller shows ctl's certificate
    try:
        with (
            running(deployment(certs, port)) as daemon,
            IntentClient(daemon.intent_address, 5, tls=certs.client("coord")) as ctl,
        ):
            reply = ctl.apply(INTENT)
            ctl.wait_synced(reply.generation, timeout_s=15)
            entries = sum(len(t) for t in sw.device.tables.by_name.values())
            assert entries > 0
            sw.stop()
            sw = refswitch(port, certs.server("sw1", client_auth=True))  # empty: no pipeline, no entries
            assert not sw.device.configured
            status = ctl.wait_synced(reply.generation, timeout_s=15)
            assert status.switches[0].connected and status.switches[0].pipeline
            assert sw.device.configured
            assert sum(len(t) for t in sw.device.tables.by_name.values()) == entries
    finally:
        sw.stop()


def test_controller_names_why_a_switch_refuses_it(certs: Certs) -> None:
    port = free_port()
    sw = refswitch(port, TlsConfig(certs.other / "ca.crt", certs.other / "rogue.crt", certs.other / "rogue.key"))
    try:
        with (
            running(deployment(certs, port)) as daemon,
            IntentClient(daemon.intent_address, 5, tls=certs.client()) as ctl,
        ):
            deadline = time.monotonic() + 10
            while "certificate verify failed" not in (error := switch_status(ctl).last_error):
                assert time.monotonic() < deadline, error
                time.sleep(0.05)
            assert error == (
                f"sw1: TLS handshake with 127.0.0.1:{port} failed: certificate verify failed "
                "(is --tls-ca the CA that signed the server's certificate?)"
            )
            assert not switch_status(ctl).connected
    finally:
        sw.stop()


def test_intent_api_with_mutual_tls(certs: Certs, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with running(deployment(certs, free_port(), client_auth=True)) as daemon:
        address = daemon.intent_address
        for tls, cause in (
            (None, "closed before any answer: is the server serving TLS?"),
            (certs.client(), "it requires a client certificate (mutual TLS)"),
            (certs.client("rogue", folder=certs.other), "the server refused our client certificate"),
            (certs.trusting_other_ca(), "certificate verify failed"),
        ):
            with IntentClient(address, 2, tls=tls) as ctl, pytest.raises(TlsHandshakeError) as err:
                ctl.status()
            assert cause in err.value.details()
        with IntentClient(address, 5, tls=certs.client("coord")) as ctl:
            assert ctl.apply(INTENT).generation == 1
        # the CLI: the same flags, the same message
        assert cli.main(["status", "--addr", address, "--tls-ca", str(certs.ca)]) == 1
        assert "requires a client certificate" in capsys.readouterr().err
        files = ["--tls-cert", str(certs.dir / "host1.crt"), "--tls-key", str(certs.dir / "host1.key")]
        assert cli.main(["get", "--addr", address, "--tls-ca", str(certs.ca), *files, "--json"]) == 0
        assert '"job_id": 3' in capsys.readouterr().out


def test_coordinator_intent_sender_reaches_a_tls_controller(certs: Certs) -> None:
    with running(deployment(certs, free_port(), client_auth=True)) as daemon:
        sender = IntentSender(daemon.intent_address, tls=certs.client("coord"), check_interval_s=0).start()
        try:
            sender.submit(1, INTENT)
            deadline = time.monotonic() + 10
            while sender.applied_seq < 1:
                assert time.monotonic() < deadline, sender.last_error
                time.sleep(0.02)
        finally:
            sender.stop()
        assert daemon.generation == 1 and daemon.intent.jobs[0].job_id == 3


def test_p4runtime_refusals_name_their_cause(certs: Certs, capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    address = f"127.0.0.1:{port}"
    sw = refswitch(port, certs.server("sw1", client_auth=True))

    async def connect(tls: TlsConfig | None) -> str:
        client = SwitchClient("sw1", address, Pipeline.load(), tls=tls)
        try:
            await client.connect(timeout_s=5)
            return "connected"
        except SwitchError as exc:
            assert exc.code == "UNAVAILABLE"
            return str(exc)
        finally:
            await client.close()

    try:
        assert "is the server serving TLS?" in asyncio.run(connect(None))
        assert "it requires a client certificate" in asyncio.run(connect(certs.client()))
        assert "not for 'host1'" in asyncio.run(connect(certs.client("ctl", server_name="host1")))
        assert asyncio.run(connect(certs.client("ctl", server_name="sw1"))) == "connected"
        # mlfc-controller pipeline: the switch has none (exit 1) once it is reached
        files = ["--tls-cert", str(certs.dir / "ctl.crt"), "--tls-key", str(certs.dir / "ctl.key")]
        assert cli.main(["pipeline", "--grpc-addr", address, "--tls-ca", str(certs.ca), *files]) == 1
        assert cli.main(["pipeline", "--grpc-addr", address]) == 2
        assert "is the server serving TLS?" in capsys.readouterr().err
    finally:
        sw.stop()


def test_a_plain_switch_beside_tls(certs: Certs) -> None:
    """tls: false on a switch (BMv2: mlfc runs it in plain text on loopback) while the intent API serves TLS."""
    port = free_port()
    sw = refswitch(port, None)
    config = deployment(certs, port)
    plain = parse_config(
        {
            "pipeline": {"p4info": str(contract.P4INFO), "device_config": str(contract.BMV2_JSON)},
            "listen": {"intent": "127.0.0.1:0", "metrics": "127.0.0.1:0"},
            "tls": {"ca": "ca.crt", "cert": "ctl.crt", "key": "ctl.key"},
            "switches": [{"name": "sw1", "grpc_addr": f"127.0.0.1:{port}", "target": "none", "tls": False}],
        },
        base_dir=certs.dir,
    )
    assert config.controller.switch_tls(config.switches[0]) is not None
    try:
        with running(plain) as daemon, IntentClient(daemon.intent_address, 5, tls=certs.client()) as ctl:
            ctl.wait_synced(ctl.apply(INTENT).generation, timeout_s=15)
            with pytest.raises(grpc.RpcError):
                IntentClient(daemon.intent_address, 1).status()  # the intent API itself is TLS only
    finally:
        sw.stop()
