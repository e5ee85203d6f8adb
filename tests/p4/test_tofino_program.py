"""p4src/tna/mlfc.p4: front-end checked by p4test against tna.p4 wherever both exist, and its committed
Tofino outputs (p4src/build/tofino/) are what the Tofino compiler makes of the current sources wherever
that compiler exists (as tests/p4/test_artifacts.py does for BMv2)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from mlfc import contract
from mlfc.lab import tofino_resources
from mlfc.testing.tofino import P4C_TOFINO, TNA_INCLUDES, tna_include

REPO = Path(__file__).resolve().parents[2]


def compile_command(out: Path) -> list[str]:
    """What `make p4-tofino` runs (same relative source path, so source references match)."""
    return [
        P4C_TOFINO,
        "--target",
        "tofino",
        "--arch",
        "tna",
        "--std",
        "p4-16",
        "--p4runtime-force-std-externs",
        "-g",
        "--p4runtime-files",
        str(out / contract.TOFINO_P4INFO.name),
        "--bf-rt-schema",
        str(out / contract.TOFINO_BFRT.name),
        "-o",
        str(out),
        "p4src/tna/mlfc.p4",
    ]


def _program_part(doc: dict) -> dict:
    """bfrt.json without the snapshot tables (a debug facility the compiler adds per gress): their
    order, and so their ids, change from run to run."""
    return {**doc, "tables": [t for t in doc["tables"] if ".snapshot." not in t["name"]]}


@pytest.mark.p4c
def test_tna_program_passes_the_front_end() -> None:
    include = tna_include()
    if include is None or not shutil.which("p4test"):
        pytest.skip(f"p4test or tna.p4 missing (looked in {', '.join(map(str, TNA_INCLUDES))}; MLFC_TNA_INCLUDE)")
    res = subprocess.run(
        ["p4test", "--std", "p4-16", "-I", str(include), "-D__TARGET_TOFINO__=1", "p4src/tna/mlfc.p4"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0 and "error" not in res.stderr, res.stderr


@pytest.mark.tofino
def test_tofino_outputs_are_current(tmp_path: Path) -> None:
    if not contract.TOFINO_P4INFO.is_file():
        pytest.fail(f"{contract.TOFINO_P4INFO} missing: run make p4-tofino and commit p4src/build/tofino/")
    out = tmp_path / "tofino"
    subprocess.run(compile_command(out), cwd=REPO, check=True, capture_output=True)
    fresh = (out / contract.TOFINO_P4INFO.name).read_text()
    assert fresh == contract.TOFINO_P4INFO.read_text(), "tofino P4Info is stale: run make p4-tofino and commit"
    for name in (contract.TOFINO_BFRT.name,):
        fresh_doc, committed = (_program_part(json.loads((d / name).read_text())) for d in (out, contract.TOFINO_BUILD))
        assert fresh_doc == committed, f"p4src/build/tofino/{name} is stale: run make p4-tofino and commit"
    # The resources the committed summary states are what the compiler allocates today.
    summary = tofino_resources.render(tofino_resources.summarize(out))
    assert summary == (contract.TOFINO_BUILD / "resources.md").read_text(), "resources.md is stale: make p4-tofino"
