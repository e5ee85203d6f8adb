"""scripts/debian-packages.sh (part of `make install` and .ci/run): installs only what dpkg-query says is
missing, as root; otherwise prints the one apt-get line. Run against fake dpkg-query/apt-get/id."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "debian-packages.sh"


def _fake_bin(tmp_path: Path, *, missing: set[str], uid: int, apt_fails: bool = False) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "apt.log"
    fakes = {
        "dpkg-query": f'pkg="${{@: -1}}"; case " {" ".join(sorted(missing))} " in *" $pkg "*) exit 1;; esac; '
        "printf installed",
        "apt-get": f'echo "$*" >> {log}; exit {1 if apt_fails else 0}',
        "id": f"echo {uid}",
    }
    for name, body in fakes.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/bash\n{body}\n")
        path.chmod(0o755)
    return bin_dir


def _run(tmp_path: Path, bin_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k != "MLFC_NO_APT"}
    full_env.update(PATH=f"{bin_dir}:/usr/bin:/bin", **env)
    return subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=full_env, check=False)


def _apt_calls(tmp_path: Path) -> list[str]:
    log = tmp_path / "apt.log"
    return log.read_text().splitlines() if log.exists() else []


def test_the_package_list_covers_what_make_run_and_the_tests_check_for() -> None:
    text = SCRIPT.read_text()
    block = text[text.index("PACKAGES=(") : text.index("\n)\n")]
    listed = {word for line in block.splitlines()[1:] for word in line.split("#")[0].split()}
    needed = {"mininet", "ethtool", "iputils-ping", "iperf3", "tcpdump", "iproute2", "clang", "llvm"}
    needed |= {"libbpf-dev", "bpftool", "util-linux", "python3-venv", "python3-dev", "make"}
    assert needed <= listed


def test_nothing_missing_is_silent_and_calls_no_apt(tmp_path: Path) -> None:
    res = _run(tmp_path, _fake_bin(tmp_path, missing=set(), uid=0))
    assert res.returncode == 0
    assert res.stdout == "" and res.stderr == ""
    assert _apt_calls(tmp_path) == []


def test_root_installs_only_the_missing_packages_once(tmp_path: Path) -> None:
    res = _run(tmp_path, _fake_bin(tmp_path, missing={"iperf3", "bpftool"}, uid=0))
    assert res.returncode == 0, res.stderr
    calls = _apt_calls(tmp_path)
    assert calls[0] == "update -qq"
    assert len(calls) == 2 and calls[1].startswith("install ")
    assert calls[1].split()[-2:] == ["iperf3", "bpftool"]
    assert "installed iperf3 bpftool" in res.stdout


@pytest.mark.parametrize("how", ["not root", "MLFC_NO_APT"])
def test_without_root_it_prints_the_apt_get_line_and_goes_on(tmp_path: Path, how: str) -> None:
    bin_dir = _fake_bin(tmp_path, missing={"mininet", "ethtool"}, uid=1000 if how == "not root" else 0)
    res = _run(tmp_path, bin_dir, **({"MLFC_NO_APT": "1"} if how == "MLFC_NO_APT" else {}))
    assert res.returncode == 0
    assert "apt-get install -y --no-install-recommends mininet ethtool" in res.stdout
    assert _apt_calls(tmp_path) == []


def test_a_failing_apt_get_says_so_and_goes_on(tmp_path: Path) -> None:
    res = _run(tmp_path, _fake_bin(tmp_path, missing={"iperf3"}, uid=0, apt_fails=True))
    assert res.returncode == 0
    assert "apt-get failed" in res.stderr and "apt-get install -y --no-install-recommends iperf3" in res.stderr
