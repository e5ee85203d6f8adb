"""Table sizes a deployment sets (mlfc/pipeline_sizes.py): parsed and bounded by the tested maximum,
resized outputs the controller loads, and its refusal of a policy that does not fit them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from mlfc import contract, pipeline_sizes
from mlfc.controller import compile as cc
from mlfc.controller.entries import TableEntry, Ternary, entry
from mlfc.controller.errors import ValidationError
from mlfc.controller.pipeline import Pipeline, PipelineError

pytestmark = pytest.mark.skipif(not contract.P4INFO.is_file(), reason=f"{contract.P4INFO} missing: run `make p4`")


def test_sizes_are_named_by_size_p4s_macros_and_bounded() -> None:
    assert pipeline_sizes.parse_sizes(["FLOW_CLASSIFIER_SIZE=16384", "ROUTES_V4_SIZE=8"]) == {
        contract.FLOWS: 16384,
        contract.ROUTES_V4: 8,
    }
    for bad, why in [
        ("FLOWS=5", "expected MACRO=N"),
        ("FLOW_CLASSIFIER_SIZE", "expected MACRO=N"),
        ("FLOW_CLASSIFIER_SIZE=lots", "not an integer"),
        ("FLOW_CLASSIFIER_SIZE=16385", r"outside 1\.\.16384 \(the largest tested\)"),
        ("FLOW_CLASSIFIER_SIZE=0", "outside"),
        ("CONGESTION_LEVEL_SIZE=512", r"outside 1\.\.256"),
    ]:
        with pytest.raises(pipeline_sizes.SizeError, match=why):
            pipeline_sizes.parse_sizes([bad])
    # every table of the contract has its macro in size.p4, and the maximum is never below the default
    text = (contract.P4_BUILD.parent / "shared" / "size.p4").read_text()
    assert set(pipeline_sizes.MACROS.values()) == set(contract.TABLES)
    assert all(f"#define {m} " in text for m in pipeline_sizes.MACROS)
    assert all(t.size <= t.max_size for t in contract.TABLES.values())


def test_resized_outputs_change_only_the_sizes_and_the_controller_loads_them(tmp_path: Path) -> None:
    code = pipeline_sizes.main(["--size", "FLOW_CLASSIFIER_SIZE=16384", "--out", str(tmp_path)])
    assert code == 0
    pipeline = Pipeline.load(tmp_path / "mlfc.p4info.txtpb", tmp_path / "mlfc.json")
    assert pipeline.table_size(contract.FLOWS) == 16384
    assert pipeline.table_size(contract.JOB_PRIORITY) == contract.JOB_PRIORITY_SIZE
    old = json.loads(contract.BMV2_JSON.read_text())
    new = json.loads((tmp_path / "mlfc.json").read_text())
    assert pipeline_sizes.bmv2_json_sizes(new)[contract.FLOWS] == 16384
    assert pipeline_sizes.resize_bmv2_json(new, pipeline_sizes.bmv2_json_sizes(old)) == old


def test_a_size_beyond_the_tested_maximum_is_refused_on_load(tmp_path: Path) -> None:
    pipeline_sizes.write_resized({}, tmp_path)
    p4info = tmp_path / "mlfc.p4info.txtpb"
    p4info.write_text(p4info.read_text().replace("size: 1024", "size: 40000", 1))
    with pytest.raises(PipelineError, match=r"size 40000 outside 1\.\.16384"):
        Pipeline.load(p4info, tmp_path / "mlfc.json")


def test_the_controller_refuses_what_does_not_fit_the_loaded_sizes(tmp_path: Path) -> None:
    pipeline_sizes.write_resized({contract.FLOWS: 2000}, tmp_path)
    pipeline = Pipeline.load(tmp_path / "mlfc.p4info.txtpb", tmp_path / "mlfc.json")
    fits = tuple(_flows(2000))
    cc.check_capacity(fits, pipeline, "s1")
    with pytest.raises(ValidationError, match=r"2001 entries for .*flows exceed its size 2000"):
        cc.check_capacity((*fits, *_flows(1, start=2000)), pipeline, "s1")


def _flows(n: int, start: int = 0) -> Iterator[TableEntry]:
    for i in range(start, start + n):
        match = {contract.IPV4_SRC: Ternary(0x0A000000 + i, 0xFFFFFFFF)}
        yield entry(contract.FLOWS, match, contract.SET_JOB, {"job_id": 1}, priority=1)
