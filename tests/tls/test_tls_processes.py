"""The daemons' TLS flags end to end, as processes: mlfc-refswitch and mlfc-coordinator started with
--allow-remote on every address and --tls-*, reached over loopback with TLS (and refused without it)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from tls_helpers import Certs

from mlfc import contract
from mlfc.controller.switch import SwitchError
from mlfc.controller.sync import SwitchConnection
from mlfc.coordinator.client import CoordinatorClient
from mlfc.launch.process import free_port
from mlfc.tls import TlsHandshakeError


def _tls_flags(certs: Certs, host: str) -> list[str]:
    d = certs.dir
    return ["--tls-ca", str(certs.ca), "--tls-cert", str(d / f"{host}.crt"), "--tls-key", str(d / f"{host}.key")]


@contextmanager
def _process(argv: list[str], ready: str) -> Iterator[str]:
    """Run ``python -m ...`` until its first stdout line (containing ``ready``); yields that line."""
    proc = subprocess.Popen([sys.executable, "-m", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if ready not in line:
            proc.kill()
            _, err = proc.communicate(timeout=10)
            pytest.fail(f"{argv[0]} did not start: {line!r} {err[-2000:]}")
        yield line
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.skipif(not contract.P4INFO.is_file(), reason="p4src/build not built (make p4)")
def test_refswitch_process_serves_tls_on_every_address(certs: Certs) -> None:
    port = free_port()
    argv = ["mlfc.refswitch.cli", "--grpc-addr", f"0.0.0.0:{port}", "--allow-remote", "--admin-port", "0"]
    with _process([*argv, *_tls_flags(certs, "sw1"), "--tls-client-auth"], "P4Runtime"):
        mine = certs.client("ctl")
        with SwitchConnection(f"127.0.0.1:{port}", 1, tls=mine, timeout_s=10) as conn:
            assert conn.pipeline_cookie() is None  # reached, primary, empty
        refused = SwitchConnection(f"127.0.0.1:{port}", 1, tls=certs.client(), timeout_s=10)
        try:
            with pytest.raises(SwitchError, match="it requires a client certificate"):
                refused.connect()
        finally:
            refused.close()


def test_coordinator_process_serves_tls_on_every_address(certs: Certs, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("process-token")
    argv = ["mlfc.coordinator.cli", "run", "--db", str(tmp_path / "c.sqlite"), "--token-file", str(token)]
    argv += ["--listen", "0.0.0.0:0", "--allow-remote", *_tls_flags(certs, "coord")]
    with _process(argv, "listening on") as line:
        port = int(line.rsplit(":", 1)[1])
        address = f"127.0.0.1:{port}"
        with CoordinatorClient(address, token_file=token, tls=certs.client(server_name="coord")) as client:
            assert client.wait_ready(10)
            assert client.jobs() == []
        with CoordinatorClient(address, token_file=token) as plain, pytest.raises(TlsHandshakeError):
            plain.jobs()
