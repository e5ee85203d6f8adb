"""TLS settings before any connection: make certs' certificates, files read and checked in one place
(mlfc.tls) with errors naming the file, the loopback rule of every mlfc server, the controller's deployment
file keys, and the daemons' refusal to serve a non-loopback address in plain text."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from tls_helpers import MAKE_CERTS, Certs, make_certs

from mlfc import contract
from mlfc.controller.config import config_document, parse_config
from mlfc.controller.errors import ValidationError
from mlfc.coordinator import cli as coordinator_cli
from mlfc.coordinator.service import Coordinator
from mlfc.refswitch import cli as refswitch_cli
from mlfc.tls import TlsConfig, TlsError, check_listen, load, tls_failure, tls_from_args


def _openssl(*args: str) -> str:
    return subprocess.run(["openssl", *args], capture_output=True, text=True, check=True).stdout


def test_make_certs_names_the_host_and_loopback_and_reuses_its_ca(certs: Certs, tmp_path: Path) -> None:
    text = _openssl("x509", "-in", str(certs.dir / "sw1.crt"), "-noout", "-ext", "subjectAltName,extendedKeyUsage")
    for name in ("DNS:sw1", "DNS:localhost", "IP Address:127.0.0.1", "TLS Web Server Authentication",
                 "TLS Web Client Authentication"):  # fmt: skip
        assert name in text
    _openssl("verify", "-CAfile", str(certs.ca), str(certs.dir / "sw1.crt"))
    # a host added later is signed by the same CA, which is not made again
    make_certs(tmp_path, "a")
    ca = (tmp_path / "ca.crt").read_bytes()
    make_certs(tmp_path, "b")
    assert (tmp_path / "ca.crt").read_bytes() == ca
    _openssl("verify", "-CAfile", str(tmp_path / "ca.crt"), str(tmp_path / "b.crt"))
    assert (tmp_path / "b.key").stat().st_mode & 0o077 == 0  # private keys readable by their owner only


def test_make_certs_refuses_a_bad_host_name(tmp_path: Path) -> None:
    done = subprocess.run(["bash", str(MAKE_CERTS), str(tmp_path), "a b"], capture_output=True, text=True)
    assert done.returncode == 2 and "letters, digits" in done.stderr


def test_expired_certificate_is_expired(certs: Certs) -> None:
    done = subprocess.run(
        ["openssl", "verify", "-CAfile", str(certs.ca), str(certs.dir / "expired.crt")], capture_output=True, text=True
    )
    assert done.returncode != 0 and "expired" in done.stdout + done.stderr


def test_files_are_checked_with_errors_naming_them(certs: Certs, tmp_path: Path) -> None:
    good = certs.server("sw1")
    assert load(good, "server").cert.startswith(b"-----BEGIN CERTIFICATE-----")  # type: ignore[union-attr]
    with pytest.raises(TlsError, match=r"TLS CA certificate .*/nope\.crt: no such file"):
        load(TlsConfig(ca=tmp_path / "nope.crt"), "client")
    with pytest.raises(TlsError, match="is a folder"):
        load(TlsConfig(ca=tmp_path), "client")
    text = tmp_path / "not.pem"
    text.write_text("hello\n")
    with pytest.raises(TlsError, match=r"TLS certificate .*not\.pem: not a PEM certificate"):
        load(TlsConfig(cert=text, key=certs.dir / "sw1.key"), "server")
    with pytest.raises(TlsError, match=r"TLS private key .*: not a PEM private key"):
        load(TlsConfig(cert=certs.dir / "sw1.crt", key=certs.dir / "sw1.crt"), "server")
    with pytest.raises(TlsError, match="go together"):
        load(TlsConfig(ca=certs.ca, cert=certs.dir / "sw1.crt"), "client")
    with pytest.raises(TlsError, match="a TLS server needs --tls-cert"):
        load(TlsConfig(ca=certs.ca), "server")
    with pytest.raises(TlsError, match="--tls-client-auth needs --tls-ca"):
        load(TlsConfig(cert=certs.dir / "sw1.crt", key=certs.dir / "sw1.key", client_auth=True), "server")
    with pytest.raises(TlsError, match="a TLS client needs --tls-ca"):
        load(TlsConfig(), "client")


def test_flags_without_files_are_refused() -> None:
    class Args:
        tls_ca = tls_cert = tls_key = None
        tls_client_auth = True

    with pytest.raises(TlsError, match="need TLS files"):
        tls_from_args(Args())  # type: ignore[arg-type]
    Args.tls_client_auth = False
    assert tls_from_args(Args()) is None  # type: ignore[arg-type]


def test_remote_listening_needs_allow_remote_and_tls() -> None:
    tls = TlsConfig(cert=Path("c.crt"), key=Path("c.key"))
    for loopback in ("127.0.0.1:1", "[::1]:1", "localhost:1", "127.0.0.2:0"):
        assert check_listen(loopback)[1] in (0, 1)
    with pytest.raises(ValueError, match="not a loopback address"):
        check_listen("0.0.0.0:1", tls=tls)
    with pytest.raises(ValueError, match=r"refusing to listen on 10\.1\.2\.3 without TLS"):
        check_listen("10.1.2.3:1", allow_remote=True)
    assert check_listen("[::]:5", allow_remote=True, tls=tls) == ("::", 5)


def test_daemons_refuse_remote_plain_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    token = tmp_path / "token"
    token.write_text("t0ken\n")
    argv = ["run", "--db", str(tmp_path / "c.sqlite"), "--token-file", str(token), "--listen", "0.0.0.0:0"]
    assert coordinator_cli.main([*argv, "--allow-remote"]) == 1
    assert "refusing to listen on 0.0.0.0 without TLS" in capsys.readouterr().err
    assert refswitch_cli.main(["--grpc-addr", "0.0.0.0:0", "--allow-remote", "--admin-port", "0"]) == 1
    assert "refusing to listen on 0.0.0.0 without TLS" in capsys.readouterr().err
    assert refswitch_cli.main(["--grpc-addr", "0.0.0.0:0", "--admin-port", "0"]) == 1
    assert "not a loopback address (pass --allow-remote" in capsys.readouterr().err
    missing = ["--tls-cert", str(tmp_path / "x.crt"), "--tls-key", str(tmp_path / "x.key")]
    assert refswitch_cli.main(["--grpc-addr", "127.0.0.1:0", "--admin-port", "0", *missing]) == 1
    assert "x.crt: no such file" in capsys.readouterr().err


def _doc(**extra: object) -> dict[str, object]:
    return {
        "pipeline": {"p4info": str(contract.P4INFO), "device_config": str(contract.BMV2_JSON)},
        "switches": [{"name": "sw1", "grpc_addr": "127.0.0.1:9559", "target": "refswitch"}],
        **extra,
    }


def test_controller_deployment_file_tls_keys(certs: Certs, tmp_path: Path) -> None:
    rel = {"ca": "ca.crt", "cert": "ctl.crt", "key": "ctl.key", "client_auth": True}
    cfg = parse_config(_doc(tls=rel, listen={"intent": "0.0.0.0:0", "allow_remote": True}), base_dir=certs.dir)
    c = cfg.controller
    assert c.tls == TlsConfig(certs.ca, certs.dir / "ctl.crt", certs.dir / "ctl.key", client_auth=True)
    # switches are reached over TLS with the controller's own certificate, unless one says tls: false
    assert cfg.controller.switch_tls(cfg.switches[0]) == TlsConfig(
        certs.ca, certs.dir / "ctl.crt", certs.dir / "ctl.key"
    )
    again = parse_config(config_document(cfg))
    assert again.controller == cfg.controller and again.switches == cfg.switches
    plain_switch = _doc(tls=rel)
    plain_switch["switches"] = [{"name": "sw1", "grpc_addr": "127.0.0.1:9559", "tls": False, "target": "bmv2"}]
    cfg = parse_config(plain_switch, base_dir=certs.dir)
    assert cfg.controller.switch_tls(cfg.switches[0]) is None


@pytest.mark.parametrize(
    ("doc", "where", "message"),
    [
        (_doc(listen={"intent": "0.0.0.0:0", "allow_remote": True}), "listen.intent", "without TLS"),
        (_doc(listen={"intent": "0.0.0.0:0"}), "listen.intent", "pass listen.allow_remote"),
        (_doc(tls={"ca": "missing.crt", "cert": "ctl.crt", "key": "ctl.key"}), "tls", "missing.crt: no such file"),
        (_doc(tls={"ca": "ca.crt", "cert": "ctl.crt"}), "tls", "go together"),
        (_doc(tls={"cert": "ctl.crt", "key": "ctl.key"}), "tls", "a TLS client needs --tls-ca"),
        (_doc(tls={"ca": "ca.crt", "cert": "ctl.crt", "key": "ctl.key", "bogus": 1}), "tls.bogus", "unknown field"),
    ],
)
def test_controller_deployment_file_tls_errors(certs: Certs, doc: dict, where: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message) as err:
        parse_config(doc, base_dir=certs.dir)
    assert str(err.value).startswith(where)


def test_a_switch_asking_for_tls_needs_the_tls_section() -> None:
    doc = _doc()
    doc["switches"] = [{"name": "sw1", "grpc_addr": "127.0.0.1:9559", "tls": True}]
    with pytest.raises(ValidationError, match=r"switches\[0\]\.tls: needs the deployment's tls section"):
        parse_config(doc)


def test_coordinator_checks_its_tls_files_before_opening_anything(certs: Certs, tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite"
    no_ca = TlsConfig(cert=certs.dir / "coord.crt", key=certs.dir / "coord.key")
    with pytest.raises(TlsError, match="a TLS client needs --tls-ca"):  # it would reach --controller over TLS
        Coordinator(db, token="t", controller="127.0.0.1:1", tls=no_ca)
    with pytest.raises(TlsError, match=r"coord\.nope: no such file"):
        Coordinator(db, token="t", tls=TlsConfig(cert=certs.dir / "coord.nope", key=certs.dir / "coord.key"))
    assert not db.exists()
    Coordinator(db, token="t", tls=no_ca).stop(0)  # without a controller it needs no CA


def test_a_call_broken_by_a_server_going_away_is_not_called_tls() -> None:
    tls = TlsConfig(ca=Path("ca.crt"))
    connect = "failed to connect to all addresses; last error: UNAVAILABLE: ipv4:127.0.0.1:1: Socket closed"
    assert tls_failure(connect, "127.0.0.1:1", None) is not None
    assert tls_failure(connect, "127.0.0.1:1", tls) is not None
    for details in ("Socket closed", "failed to connect to all addresses; last error: Connection refused"):
        assert tls_failure(details, "127.0.0.1:1", None) is None
        assert tls_failure(details, "127.0.0.1:1", tls) is None
