"""The certificates of the TLS tests: made by the script behind `make certs` (scripts/make-certs.sh, Debian's
openssl), and the TlsConfigs of servers and clients of them."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from mlfc.tls import TlsConfig

ROOT = Path(__file__).resolve().parents[2]
MAKE_CERTS = ROOT / "scripts" / "make-certs.sh"
HOSTS = ("coord", "ctl", "sw1", "host1")


def make_certs(out: Path, *hosts: str, **env: str) -> str:
    done = subprocess.run(
        ["bash", str(MAKE_CERTS), str(out), *hosts],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@dataclass(frozen=True)
class Certs:
    dir: Path  # the development CA and its certificates
    other: Path  # another CA and its certificate "rogue"

    @property
    def ca(self) -> Path:
        return self.dir / "ca.crt"

    def server(self, host: str, client_auth: bool = False) -> TlsConfig:
        """A server's TlsConfig: ``host``'s certificate, the CA for client certificates."""
        return TlsConfig(self.ca, self.dir / f"{host}.crt", self.dir / f"{host}.key", client_auth=client_auth)

    def client(self, host: str | None = None, *, server_name: str = "", folder: Path | None = None) -> TlsConfig:
        """A client's TlsConfig trusting the CA, with ``host``'s certificate (mutual TLS) when given;
        ``folder``: take the certificate from another CA's folder (still trusting ours)."""
        d = folder or self.dir
        cert, key = (None, None) if host is None else (d / f"{host}.crt", d / f"{host}.key")
        return TlsConfig(self.ca, cert, key, server_name=server_name)

    def trusting_other_ca(self) -> TlsConfig:
        return TlsConfig(self.other / "ca.crt")
