"""The committed compiler outputs are what p4c makes of the current sources.

They must be identical except for one volatile field: the BMv2 JSON's top-level "program", which
p4c fills with the path of its preprocessed output and so names the output folder."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from mlfc import wire

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "p4src" / "build"
PROGRAMS = ("mlfc", "l3fwd")


def test_artifacts_are_committed() -> None:
    for prog in PROGRAMS:
        assert (BUILD / f"{prog}.json").is_file(), f"p4src/build/{prog}.json missing: run make p4"
        assert (BUILD / f"{prog}.p4info.txtpb").is_file(), f"p4src/build/{prog}.p4info.txtpb missing: run make p4"


def test_compiled_shim_header_matches_wire() -> None:
    bmv2 = json.loads((BUILD / "mlfc.json").read_text())
    types = {t["name"]: t for t in bmv2["header_types"]}
    fields = [(name, width) for name, width, *_ in types["mlfc_h"]["fields"]]
    assert fields == list(wire.SHIM_FIELDS)


@pytest.mark.p4c
@pytest.mark.parametrize("prog", PROGRAMS)
def test_artifacts_are_current(prog: str, tmp_path: Path) -> None:
    # Same relative paths as `make p4`, so source_info file names match.
    out = tmp_path / "build"
    subprocess.run(
        [
            "p4c",
            "--target",
            "bmv2",
            "--arch",
            "v1model",
            "--std",
            "p4-16",
            "--p4runtime-files",
            str(out / f"{prog}.p4info.txtpb"),
            "-o",
            str(out),
            f"p4src/v1model/{prog}.p4",
        ],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    fresh_info = (out / f"{prog}.p4info.txtpb").read_text()
    assert fresh_info == (BUILD / f"{prog}.p4info.txtpb").read_text(), f"{prog}.p4info.txtpb is stale: run make p4"
    fresh_json, committed_json = (json.loads((d / f"{prog}.json").read_text()) for d in (out, BUILD))
    for doc in (fresh_json, committed_json):
        doc.pop("program", None)
    assert fresh_json == committed_json, f"p4src/build/{prog}.json is stale: run make p4 and commit"
