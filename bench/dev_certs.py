"""Certificates for the benchmarks' TLS variants: the ones `make certs` makes (scripts/make-certs.sh), in a
temporary folder, and the TlsConfigs of a server and a client of them."""

from __future__ import annotations

import subprocess
from pathlib import Path

from mlfc.tls import TlsConfig

REPO = Path(__file__).resolve().parents[1]


def make_dev_certs(folder: Path, *hosts: str) -> Path:
    subprocess.run(["bash", str(REPO / "scripts" / "make-certs.sh"), str(folder), *hosts], check=True,
                   capture_output=True)  # fmt: skip
    return folder


def server_tls(folder: Path, host: str) -> TlsConfig:
    return TlsConfig(folder / "ca.crt", folder / f"{host}.crt", folder / f"{host}.key")


def client_tls(folder: Path) -> TlsConfig:
    return TlsConfig(folder / "ca.crt")


def server_flags(folder: Path, host: str) -> list[str]:
    """A daemon's command-line flags serving TLS as ``host`` (and trusting the CA as a client)."""
    return ["--tls-ca", str(folder / "ca.crt"), "--tls-cert", str(folder / f"{host}.crt"),
            "--tls-key", str(folder / f"{host}.key")]  # fmt: skip
