"""Certificates for the TLS tests, made once per session by the script behind `make certs`
(scripts/make-certs.sh, Debian's openssl): a CA with certificates for coord, ctl, sw1 and host1, an
expired certificate (expired) signed by the same CA, and a second CA with one certificate (rogue)."""

from __future__ import annotations

import pytest
from tls_helpers import HOSTS, Certs, make_certs


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    base = tmp_path_factory.mktemp("certs")
    make_certs(base / "dev", *HOSTS)
    make_certs(base / "dev", "expired", VALID_FROM="20200101000000Z", VALID_UNTIL="20200201000000Z")
    make_certs(base / "other", "rogue", CA_NAME="another CA")
    return Certs(base / "dev", base / "other")
