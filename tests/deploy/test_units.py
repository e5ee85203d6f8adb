"""The deploy test reads the shipped systemd units as systemd would: these pin that reading, and that the
shipped files agree with the cluster's layout (a unit asking for a variable no file sets fails here)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import yaml

from mlfc.lab.deploy.run import DEPLOY, binaries
from mlfc.lab.deploy.units import UnitError, command_line, read_environment_file, read_unit
from mlfc.topologies.cluster import cluster


def _unit(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "x.service"
    path.write_text(text)
    return path


def test_expansions_as_systemd(tmp_path: Path) -> None:
    env = tmp_path / "etc/mlfc/x.env"
    env.parent.mkdir(parents=True)
    env.write_text('# comment\nA=one two\nB="quoted value"\n')
    unit = _unit(
        tmp_path,
        "[Unit]\nDescription=x\n[Service]\nEnvironmentFile=/etc/mlfc/x.env\nEnvironmentFile=-/etc/mlfc/none.env\n"
        "Environment=C=3\nExecStart=/usr/local/bin/prog --a ${A} $A --b=${B} --c $C \\\n  --f /etc/mlfc/%i.yaml\n",
    )
    argv, _ = command_line(read_unit(unit), instance="7", root=tmp_path, binaries={"prog": "/venv/prog"})
    assert argv == [
        "/venv/prog", "--a", "one two", "one", "two", "--b=quoted value", "--c", "3",
        "--f", str(tmp_path / "etc/mlfc/7.yaml"),
    ]  # fmt: skip


def test_unset_variable_and_missing_file_are_named(tmp_path: Path) -> None:
    unit = _unit(tmp_path, "[Service]\nExecStart=/bin/prog ${NOPE}\n")
    with pytest.raises(UnitError, match=r"\$\{NOPE\}"):
        command_line(read_unit(unit))
    unit = _unit(tmp_path, "[Service]\nEnvironmentFile=/etc/mlfc/gone.env\nExecStart=/bin/prog\n")
    with pytest.raises(UnitError, match=r"gone\.env does not exist"):
        command_line(read_unit(unit), root=tmp_path)
    with pytest.raises(UnitError, match="no ExecStart"):
        read_unit(_unit(tmp_path, "[Service]\nType=simple\n"))


@pytest.mark.parametrize(
    ("node", "unit", "instance"),
    [
        ("s1", "mlfc-refswitch.service", ""),
        ("ctl", "mlfc-controller.service", ""),
        ("ctl", "mlfc-coordinator.service", ""),
        ("j1ps", "mlfc-ps@.service", "1"),
        ("j1w0", "mlfc-worker@.service", "1"),
        ("j1w1", "mlfc-worker@.service", "1"),
    ],
)
def test_shipped_units_parse_with_their_host_files(node: str, unit: str, instance: str) -> None:
    """Every unit's command line expands with the files deploy/cluster gives its host, and its program's
    parser accepts it (the same argparse the daemon runs)."""
    argv, _ = command_line(
        read_unit(DEPLOY / "systemd" / unit), instance=instance, root=DEPLOY / "cluster" / node, binaries=binaries()
    )
    program = Path(argv[0]).name
    assert program.startswith("mlfc-")
    assert not any("$" in word for word in argv), argv
    parser = PARSERS.get(program)
    if parser is not None:  # mlfc-controller's one flag is its file, checked below
        parser().parse_args(argv[1:])


def _refswitch_parser() -> argparse.ArgumentParser:
    from mlfc.refswitch.cli import switch_parser

    return switch_parser()


def _coordinator_parser() -> argparse.ArgumentParser:
    from mlfc.coordinator.cli import build_parser

    return build_parser()


def _train_parser() -> argparse.ArgumentParser:
    from mlfc.hosts.training.cli import build_parser

    return build_parser()


PARSERS = {"mlfc-refswitch": _refswitch_parser, "mlfc-coordinator": _coordinator_parser, "mlfc-train": _train_parser}


def test_controller_yaml_routes_follow_the_cluster() -> None:
    """The shipped controller.yaml routes what the cluster's topology says (one source for the layout)."""
    cl = cluster()
    cfg = yaml.safe_load((DEPLOY / "cluster/ctl/etc/mlfc/controller.yaml").read_text())
    (s1,) = [sw for sw in cfg["switches"] if sw["name"] == "s1"]
    want = [
        {"prefix": r.prefix, "port": r.port, "src_mac": r.src_mac, "dst_mac": r.dst_mac}
        for r in cl.topology.routes("s1")
    ]
    assert s1["routes_v4"] == want
    assert s1["grpc_addr"] == "s1:9559"
    assert read_environment_file(DEPLOY / "cluster/s1/etc/mlfc/refswitch.env")["GRPC_ADDR"].startswith(
        cl.management["s1"] + ":"
    )
