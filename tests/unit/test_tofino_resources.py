"""lab/tofino_resources.py: per-table sums over a compiler report laid out as resources.json and
metrics.json are (backends/tofino/compiler_interfaces/schemas in p4c)."""

from __future__ import annotations

import json
from pathlib import Path

from mlfc.lab import tofino_resources


def _use(table: str) -> dict:
    return {"used_by": table, "used_for": "match"}


def _write_report(build: Path) -> None:
    logs = build / "pipe" / "logs"
    logs.mkdir(parents=True)
    stage0 = {
        "stage_number": 0,
        "rams": {
            "nRows": 8,
            "nColumns": 10,
            "srams": [
                {"row": 0, "column": 2, "usages": [_use("I.fwd.routes_v4"), _use("I.fwd.routes_v4")]},
                {"row": 1, "column": 2, "usages": [_use("I.fwd.routes_v4")]},
            ],
        },
        "tcams": {"nRows": 12, "nColumns": 2, "tcams": [{"row": 0, "column": 0, "usages": [_use("I.cls.flows")]}]},
        "hash_bits": {
            "nBits": 52,
            "nFunctions": 8,
            "bits": [
                {
                    "hash_bit": b,
                    "hash_function": 0,
                    "usages": [{"used_by": "I.fwd.routes_v4", "type": "way_select", "value": 0}],
                }
                for b in range(3)
            ],
        },
        "vliw": {
            "size": 32,
            "instructions": [
                {
                    "instruction_number": 1,
                    "color_usages": [
                        {
                            "color": 0,
                            "gress": "ingress",
                            "usages": [{"used_by": "I.fwd.routes_v4", "action_names": ["a"]}],
                        }
                    ],
                }
            ],
        },
        "logical_tables": {
            "size": 16,
            "ids": [{"id": 0, "table_name": "I.fwd.routes_v4"}, {"id": 1, "table_name": "I.cls.flows"}],
        },
    }
    stage3 = {
        "stage_number": 3,
        "tcams": {
            "nRows": 12,
            "nColumns": 2,
            "tcams": [
                {"row": 0, "column": 0, "usages": [_use("E.ecn.ecn_profile")]},
                {"row": 1, "column": 0, "usages": [_use("E.ecn.ecn_profile")]},
            ],
        },
        "rams": {
            "nRows": 8,
            "nColumns": 10,
            "srams": [{"row": 0, "column": 2, "usages": [_use("E.ecn.ecn_profile$action")]}],
        },
        "gateways": {
            "nRows": 8,
            "nUnits": 2,
            "gateways": [
                {"row": 0, "unit_id": 0, "usages": [_use("cond-7")]},
                {"row": 1, "unit_id": 0, "usages": [_use("cond-8")]},
            ],
        },
        "logical_tables": {"size": 16, "ids": [{"id": 0, "table_name": "E.ecn.ecn_profile"}]},
    }
    resources = {"compiler_version": "9.99", "resources": {"mau": {"nStages": 12, "mau_stages": [stage0, stage3]}}}
    metrics = {
        "compiler_version": "9.99",
        "phv": {
            "normal": [
                {"bit_width": 8, "containers_occupied": 5, "bits_occupied": 33, "bits_overlaid": 0},
                {"bit_width": 16, "containers_occupied": 0, "bits_occupied": 0, "bits_overlaid": 0},
            ]
        },
        "mau": {"srams": 2, "tcams": 3, "map_rams": 0, "logical_tables": 3},
    }
    (logs / "resources.json").write_text(json.dumps(resources))
    (logs / "metrics.json").write_text(json.dumps(metrics))


def test_units_are_summed_per_table_over_its_stages(tmp_path: Path) -> None:
    _write_report(tmp_path)
    s = tofino_resources.summarize(tmp_path)
    assert s.compiler == "9.99"
    assert (s.stages_used, s.stages_available) == (2, 12)
    assert s.tables["I.fwd.routes_v4"].stages == {0}
    # A RAM listing the same table twice is one RAM.
    assert dict(s.tables["I.fwd.routes_v4"].units) == {"SRAM": 2, "hash bits": 3, "VLIW": 1}
    assert dict(s.tables["I.cls.flows"].units) == {"TCAM": 1}
    assert s.tables["E.ecn.ecn_profile"].stages == {3} and s.tables["E.ecn.ecn_profile"].units["TCAM"] == 2
    assert s.phv == [("normal", 8, 5, 33), ("normal", 16, 0, 0)]


def test_the_summary_is_a_markdown_table_per_table_and_phv(tmp_path: Path) -> None:
    _write_report(tmp_path)
    text = tofino_resources.render(tofino_resources.summarize(tmp_path))
    assert "Stages used: **2 of 12**" in text
    # table, stages, SRAM, TCAM, hash bits, gateways, VLIW
    assert "| I.fwd.routes_v4 | 0 | 2 |  | 3 |  | 1 |" in text
    assert "| E.ecn.ecn_profile | 3 | 1 | 2 |  |  |  |" in text
    assert "| (compiler-made: conditions, assignments) | 3 |  |  |  | 2 |  |\n\nPHV" in text  # last row
    assert "| normal | 8 | 5 | 33 |" in text and "| normal | 16 |" not in text  # empty kinds left out


def test_a_missing_report_says_to_compile_first(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert tofino_resources.main([str(tmp_path)]) == 1
    assert "make p4-tofino" in capsys.readouterr().err


def test_action_halves_fold_into_their_table_and_compiler_tables_into_one_row(tmp_path: Path) -> None:
    _write_report(tmp_path)
    tables = tofino_resources.by_p4_table(tofino_resources.summarize(tmp_path).tables)
    assert dict(tables["E.ecn.ecn_profile"].units) == {"TCAM": 2, "SRAM": 1}
    assert dict(tables[tofino_resources.COMPILER_MADE].units) == {"gateways": 2}
    assert "E.ecn.ecn_profile$action" not in tables and "cond-7" not in tables
