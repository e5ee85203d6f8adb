"""The coordinator's API over TLS, against a real coordinator: each refused connection says why (plain text,
another CA, an expired certificate, a wrong host name, a missing or foreign client certificate), and the
token is still required inside TLS."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from tls_helpers import Certs

from mlfc.coordinator import cli
from mlfc.coordinator.client import CoordinatorClient
from mlfc.coordinator.service import Coordinator
from mlfc.tls import TlsConfig, TlsHandshakeError

TOKEN = "tls-test-token"


@pytest.fixture
def coordinator(tmp_path: Path) -> Iterator[Callable[[TlsConfig], Coordinator]]:
    started: list[Coordinator] = []

    def start(tls: TlsConfig) -> Coordinator:
        c = Coordinator(tmp_path / f"c{len(started)}.sqlite", token=TOKEN, tls=tls).start()
        started.append(c)
        return c

    yield start
    for c in started:
        c.stop(0)


def _refusal(address: str, tls: TlsConfig | None, token: str = TOKEN) -> str:
    with CoordinatorClient(address, token=token, tls=tls, timeout_s=3) as client:
        with pytest.raises(TlsHandshakeError) as err:
            client.wait_ready(3)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE  # still what callers retry on
        return err.value.details()


def test_tls_client_with_the_ca_and_token_is_served(coordinator, certs: Certs) -> None:  # type: ignore[no-untyped-def]
    c = coordinator(certs.server("coord"))
    for address in (c.address, f"localhost:{c.port}"):  # both names are in the certificate
        with CoordinatorClient(address, token=TOKEN, tls=certs.client(), timeout_s=3) as client:
            assert client.wait_ready(3)
            assert client.jobs() == []
    # by the host's own name, as a remote client would (the name is checked, the address is loopback)
    with CoordinatorClient(c.address, token=TOKEN, tls=certs.client(server_name="coord"), timeout_s=3) as client:
        assert client.wait_ready(3)


def test_plain_text_client_is_refused_and_told_why(coordinator, certs: Certs) -> None:  # type: ignore[no-untyped-def]
    c = coordinator(certs.server("coord"))
    message = _refusal(c.address, None)
    assert message.startswith(f"connection to {c.address} closed before any answer: is the server serving TLS?")
    assert "--tls-ca" in message


def test_certificate_of_another_ca_is_refused(coordinator, certs: Certs) -> None:  # type: ignore[no-untyped-def]
    c = coordinator(certs.server("coord"))
    message = _refusal(c.address, certs.trusting_other_ca())
    assert message == (
        f"TLS handshake with {c.address} failed: certificate verify failed "
        "(is --tls-ca the CA that signed the server's certificate?)"
    )


def test_expired_server_certificate_is_refused(coordinator, certs: Certs) -> None:  # type: ignore[no-untyped-def]
    c = coordinator(certs.server("expired"))
    message = _refusal(c.address, certs.client())
    assert message.startswith(f"TLS handshake with {c.address} failed: the server's certificate has expired")


def test_wrong_host_name_is_refused(coordinator, certs: Certs) -> None:  # type: ignore[no-untyped-def]
    c = coordinator(certs.server("coord"))
    message = _refusal(c.address, certs.client(server_name="ctl"))  # a real certificate, but for coord
    assert message.startswith(f"TLS handshake with {c.address} failed: the server's certificate is not for 'ctl'")


def test_token_is_still_required_inside_tls(coordinator, certs: Certs) -> None:  # type: ignore[no-untyped-def]
    c = coordinator(certs.server("coord"))
    with CoordinatorClient(c.address, token="wrong", tls=certs.client(), timeout_s=3) as client:
        with pytest.raises(grpc.RpcError) as err:
            client.wait_ready(3)
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "wrong token" in err.value.details()


def test_mutual_tls_refuses_clients_without_a_good_certificate(coordinator, certs: Certs) -> None:  # type: ignore[no-untyped-def]
    c = coordinator(certs.server("coord", client_auth=True))
    message = _refusal(c.address, certs.client())
    assert message.startswith(f"TLS handshake with {c.address} failed: the server closed the connection: it requires")
    assert "--tls-cert" in message
    for refused in (certs.client("rogue", folder=certs.other), certs.client("expired")):
        message = _refusal(c.address, refused)
        assert message.startswith(f"TLS handshake with {c.address} failed: the server refused our client certificate")
    with CoordinatorClient(c.address, token=TOKEN, tls=certs.client("host1"), timeout_s=3) as client:
        assert client.wait_ready(3)


def test_query_cli_over_tls(coordinator, certs: Certs, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    c = coordinator(certs.server("coord"))
    token = tmp_path / "token"
    token.write_text(TOKEN)
    argv = ["jobs", "--coordinator", c.address, "--token-file", str(token)]
    assert cli.main(argv) == 1
    assert "is the server serving TLS? (then pass --tls-ca" in capsys.readouterr().err
    assert cli.main([*argv, "--tls-ca", str(certs.ca)]) == 0
    assert cli.main([*argv, "--tls-ca", str(tmp_path / "none.crt")]) == 1
    assert "none.crt: no such file" in capsys.readouterr().err
