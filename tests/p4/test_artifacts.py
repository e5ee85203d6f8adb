"""The committed compiler outputs are what p4c makes of the current sources.

They must be identical except for one volatile field: the BMv2 JSON's top-level "program", which
p4c fills with the path of its preprocessed output and so names the output folder."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from mlfc import contract, pipeline_sizes, wire

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


@pytest.mark.p4c
def test_resizing_the_committed_outputs_is_what_p4c_compiles_at_those_sizes(tmp_path: Path) -> None:
    """A deployment without p4c resizes (mlfc/pipeline_sizes.py); with p4c it compiles
    `make p4 P4_SIZES=...`: the same P4Info and JSON either way."""
    sizes = {contract.FLOWS: 16384, contract.ROUTES_V4: 4096, contract.JOB_PRIORITY: 2048, contract.ECN_PROFILE: 8192}
    macros = {table: macro for macro, table in pipeline_sizes.MACROS.items()}
    compiled = tmp_path / "compiled"
    subprocess.run(
        ["make", "--no-print-directory", "p4", "P4_PROGRAMS=mlfc", f"P4_BUILD={compiled}",
         "P4_SIZES=" + " ".join(f"{macros[t]}={n}" for t, n in sizes.items())],
        cwd=REPO, check=True, capture_output=True,
    )  # fmt: skip
    resized = tmp_path / "resized"
    pipeline_sizes.write_resized(sizes, resized)
    assert (compiled / "mlfc.p4info.txtpb").read_text() == (resized / "mlfc.p4info.txtpb").read_text()
    docs = [json.loads((d / "mlfc.json").read_text()) for d in (compiled, resized)]
    for doc in docs:
        doc.pop("program", None)
    assert docs[0] == docs[1]
    assert pipeline_sizes.bmv2_json_sizes(docs[0])[contract.FLOWS] == 16384
