"""TLS for every gRPC API mlfc serves or calls (docs/tls.md): the one module that reads certificate files,
builds gRPC credentials, decides which addresses may be served in plain text, and names a failed handshake.

    tls = TlsConfig(ca="certs/ca.crt", cert="certs/ctl.crt", key="certs/ctl.key", client_auth=True)
    server.add_secure_port(addr, server_credentials(tls))          # or add_port(server, addr, tls)
    mlfc.grpc_client.open_channel(addr, tls)                      # a client: the one channel code

A server needs ``cert`` and ``key`` (and ``ca`` when ``client_auth`` requires client certificates signed by
it); a client needs ``ca`` (the CA that signed the server's certificate) and, for mutual TLS, its own
``cert`` and ``key``. Daemons take the same four flags (``add_tls_arguments``): --tls-ca, --tls-cert,
--tls-key, --tls-client-auth; clients also --tls-server-name.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

import grpc

Role = Literal["server", "client"]


class TlsError(ValueError):
    """A TLS setting that cannot work: a missing or unreadable file, a certificate without its key, ..."""


@dataclass(frozen=True, slots=True)
class TlsConfig:
    ca: Path | None = None  # verifies the peer: a client's server, a server's clients (with client_auth)
    cert: Path | None = None  # this side's certificate: a server's (required), a client's (mutual TLS)
    key: Path | None = None  # the private key of ``cert``
    client_auth: bool = False  # a server's: require a client certificate signed by ``ca`` (mutual TLS)
    server_name: str = ""  # a client's: the name the server's certificate must carry ("": the address's host)

    def __post_init__(self) -> None:
        for name in ("ca", "cert", "key"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Path):
                object.__setattr__(self, name, Path(value))


@dataclass(frozen=True, slots=True)
class TlsMaterial:
    """The PEM bytes of a ``TlsConfig``'s files, read and checked."""

    ca: bytes | None
    cert: bytes | None
    key: bytes | None


_PEM = {"ca": b"CERTIFICATE", "cert": b"CERTIFICATE", "key": b"PRIVATE KEY"}
_WHAT = {"ca": "TLS CA certificate", "cert": "TLS certificate", "key": "TLS private key"}


def _read(kind: str, path: Path) -> bytes:
    what = _WHAT[kind]
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise TlsError(f"{what} {path}: no such file") from None
    except IsADirectoryError:
        raise TlsError(f"{what} {path}: is a folder, not a file") from None
    except PermissionError:
        raise TlsError(f"{what} {path}: not readable by this user (uid {os.getuid()})") from None
    except OSError as exc:
        raise TlsError(f"{what} {path}: cannot read: {exc.strerror}") from None
    if not re.search(rb"-----BEGIN [A-Z ]*" + _PEM[kind] + rb"-----", data):
        raise TlsError(f"{what} {path}: not a PEM {_PEM[kind].decode().lower()} (-----BEGIN ... -----)")
    return data


def load(tls: TlsConfig, role: Role) -> TlsMaterial:
    """Read and check ``tls``'s files for a server or a client; TlsError names what is missing or wrong."""
    if (tls.cert is None) != (tls.key is None):
        raise TlsError("--tls-cert and --tls-key go together: a certificate needs its private key")
    if role == "server":
        if tls.cert is None:
            raise TlsError("a TLS server needs --tls-cert and --tls-key")
        if tls.client_auth and tls.ca is None:
            raise TlsError("--tls-client-auth needs --tls-ca: the CA whose client certificates are accepted")
    elif tls.ca is None:
        raise TlsError("a TLS client needs --tls-ca: the CA that signed the server's certificate")
    return TlsMaterial(
        ca=None if tls.ca is None else _read("ca", tls.ca),
        cert=None if tls.cert is None else _read("cert", tls.cert),
        key=None if tls.key is None else _read("key", tls.key),
    )


def server_credentials(tls: TlsConfig) -> grpc.ServerCredentials:
    m = load(tls, "server")
    assert m.cert is not None and m.key is not None
    return grpc.ssl_server_credentials(
        [(m.key, m.cert)],
        root_certificates=m.ca if tls.client_auth else None,
        require_client_auth=tls.client_auth,
    )


def channel_credentials(tls: TlsConfig) -> grpc.ChannelCredentials:
    m = load(tls, "client")
    return grpc.ssl_channel_credentials(root_certificates=m.ca, private_key=m.key, certificate_chain=m.cert)


def channel_options(tls: TlsConfig | None) -> list[tuple[str, str]]:
    """The channel option that checks the server's certificate for ``server_name`` instead of the address."""
    return [("grpc.ssl_target_name_override", tls.server_name)] if tls and tls.server_name else []


class _Server(Protocol):
    def add_insecure_port(self, address: str) -> int: ...
    def add_secure_port(self, address: str, server_credentials: grpc.ServerCredentials) -> int: ...


def add_port(server: _Server, address: str, tls: TlsConfig | None) -> int:
    """Bind ``address`` on a grpc or grpc.aio server, with TLS when ``tls`` is given; returns the port (0: failed)."""
    if tls is None:
        return server.add_insecure_port(address)
    return server.add_secure_port(address, server_credentials(tls))


# ---- which addresses may be served --------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    host = host.strip("[]")
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def check_listen(listen: str, allow_remote: bool = False, tls: TlsConfig | None = None) -> tuple[str, int]:
    """(host, port) of a HOST:PORT an mlfc gRPC server may listen on: loopback, or with ``allow_remote`` any
    address but then only with TLS (a token or an intent must not cross a network in plain text)."""
    host, port = check_metrics_listen(listen, allow_remote)
    if not is_loopback(host) and tls is None:
        raise ValueError(
            f"refusing to listen on {host} without TLS: --allow-remote needs --tls-cert and --tls-key "
            "(docs/tls.md; make certs makes a development CA)"
        )
    return host, port


def check_metrics_listen(listen: str, allow_remote: bool = False) -> tuple[str, int]:
    """(host, port) of a HOST:PORT a Prometheus endpoint may listen on: loopback unless ``allow_remote``.
    Metrics are plain HTTP as Prometheus scrapes them and carry no secret, so TLS is not asked for."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"listen address {listen!r} must be HOST:PORT")
    host = host.strip("[]")
    if not is_loopback(host) and not allow_remote:
        raise ValueError(f"refusing to listen on {host}: not a loopback address (pass --allow-remote to do it)")
    return host, int(port)


# ---- naming a failed handshake ----------------------------------------------------------------------------

_CLOSED = ("socket closed", "connection reset", "end of tcp stream")
_CA_HINT = "is --tls-ca the CA that signed the server's certificate?"


def tls_failure(details: str, address: str, tls: TlsConfig | None) -> str | None:
    """A sentence naming why a connection to ``address`` failed at TLS, or None if it was not TLS.
    ``details``: gRPC's (or finsy's) text of an UNAVAILABLE call, which carries BoringSSL's reason."""
    low = details.lower()
    # closed while connecting (not a call broken by a server going away): TLS refused, or was not expected
    closed = "failed to connect" in low and any(s in low for s in _CLOSED)
    if tls is None:
        # A plain-text client of a TLS server sees its connection closed during the HTTP/2 preface.
        if closed:
            return (
                f"connection to {address} closed before any answer: is the server serving TLS? "
                "(then pass --tls-ca, the CA that signed its certificate)"
            )
        return None
    if "certificate has expired" in low:
        cause = "the server's certificate has expired (renew it, e.g. make certs)"
    elif "certificate_verify_failed" in low or "certificate verify failed" in low:
        cause = f"certificate verify failed ({_CA_HINT})"
    elif "hostname verification" in low or "peer name" in low:
        name = tls.server_name or address.rpartition(":")[0]
        cause = (
            f"the server's certificate is not for {name!r} (connect by a name in its subject alternative "
            "names, or set --tls-server-name)"
        )
    elif "wrong_version_number" in low:
        cause = "the server does not speak TLS (it serves plain text: drop --tls-ca, or give it --tls-cert/--tls-key)"
    elif closed and tls.cert is None:
        # TLS 1.3: a server that wants a client certificate closes the connection after the client's flight
        cause = "the server closed the connection: it requires a client certificate (mutual TLS): pass --tls-cert "
        cause += "and --tls-key signed by its CA"
    elif closed:
        cause = "the server refused our client certificate (is --tls-cert signed by the server's CA, and not expired?)"
    elif "handshake" in low or "ssl_error" in low:
        cause = f"handshake error ({_CA_HINT})"
    else:
        return None
    return f"TLS handshake with {address} failed: {cause}"


class TlsHandshakeError(grpc.RpcError):
    """An UNAVAILABLE call whose connection failed at TLS; ``details()`` names the cause. Still a
    grpc.RpcError with code UNAVAILABLE, so callers that retry on UNAVAILABLE keep doing so."""

    def __init__(self, message: str, cause: grpc.RpcError) -> None:
        super().__init__(message)
        self._message = message
        self.cause = cause

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return self._message

    def __str__(self) -> str:
        return self._message


def explain(exc: grpc.RpcError, address: str, tls: TlsConfig | None) -> grpc.RpcError:
    """``exc``, or a TlsHandshakeError naming the cause when the call failed at TLS."""
    if not hasattr(exc, "code") or exc.code() != grpc.StatusCode.UNAVAILABLE:
        return exc
    message = tls_failure(exc.details() or "", address, tls)
    return exc if message is None else TlsHandshakeError(message, exc)


# ---- command lines ------------------------------------------------------------------------------------------


def add_tls_arguments(parser: argparse.ArgumentParser, role: Role) -> None:
    """The TLS flags, the same on every mlfc daemon and client (docs/tls.md)."""
    g = parser.add_argument_group("TLS (docs/tls.md; make certs makes a development CA)")
    if role == "server":
        g.add_argument("--tls-cert", type=Path, help="serve TLS with this certificate (PEM)")
        g.add_argument("--tls-key", type=Path, help="the private key of --tls-cert (PEM)")
        g.add_argument("--tls-ca", type=Path, help="CA certificate: checks clients (--tls-client-auth) and servers")
        g.add_argument(
            "--tls-client-auth", action="store_true", help="mutual TLS: require client certificates signed by --tls-ca"
        )
    else:
        g.add_argument("--tls-ca", type=Path, help="connect with TLS, trusting servers signed by this CA (PEM)")
        g.add_argument("--tls-cert", type=Path, help="client certificate for mutual TLS (PEM)")
        g.add_argument("--tls-key", type=Path, help="the private key of --tls-cert (PEM)")
        g.add_argument("--tls-server-name", default="", help="the name the server's certificate must carry")


def tls_from_args(args: argparse.Namespace) -> TlsConfig | None:
    """The TlsConfig the flags of ``add_tls_arguments`` ask for; None when none is given (plain text)."""
    ca, cert, key = getattr(args, "tls_ca", None), getattr(args, "tls_cert", None), getattr(args, "tls_key", None)
    client_auth = getattr(args, "tls_client_auth", False)
    server_name = getattr(args, "tls_server_name", "") or ""
    if ca is None and cert is None and key is None:
        if client_auth or server_name:
            raise TlsError("--tls-client-auth and --tls-server-name need TLS files (--tls-ca, --tls-cert, --tls-key)")
        return None
    return TlsConfig(ca=ca, cert=cert, key=key, client_auth=client_auth, server_name=server_name)


def as_client(tls: TlsConfig) -> TlsConfig:
    """A server's TLS identity used to call another mlfc server: trust its CA, show its certificate (which
    ``make certs`` issues for both roles) to a server that requires client certificates."""
    return TlsConfig(ca=tls.ca, cert=tls.cert, key=tls.key)
