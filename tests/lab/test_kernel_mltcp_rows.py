"""Kernel MLTCP's published rows: issue 24's schema, shares against the same round's plain algorithm, and the
verdicts from lab/mltcp/figures.py's one table of targets."""

from __future__ import annotations

import argparse
import csv
import dataclasses
from pathlib import Path

import pytest

from mlfc.lab.mltcp import figures as mltcp_figures
from mlfc.lab.mltcp import kernel as kernel_mltcp
from mlfc.lab.mltcp import regime, rows
from mlfc.lab.mltcp.kernel_net import RunResult
from mlfc.lab.mltcp.rows import Cell
from mlfc.lab.results import IterationRecord


def _run(avg: float, jobs: int = 2, iterations: int = 6) -> RunResult:
    """Every job's iterations ``avg`` s long, back to back, all jobs communicating at once (not interleaved)."""
    records = []
    for j in range(1, jobs + 1):
        for it in range(iterations):
            start = it * avg
            records.append(IterationRecord("s", j, f"w{j}", it, start, start + avg / 2, start + avg, start + avg, 1000))
    return RunResult("s", "reno", records)


def _cells(base: list[float], mltcp: list[float], ideal: list[float], mix: str = "compat-2") -> list[Cell]:
    # the lab's default regime: CE above 60 KB of a 300 KB queue at 200 Mbit/s
    plain = Cell(mix, "reno", "reno", [_run(b) for b in base], ideal, ideal, base,
                 [Path(f"/b{i}") for i in range(len(base))], 300_000, 60_000)  # fmt: skip
    treated = Cell(mix, "mltcp_reno 2:0.5", "reno", [_run(m) for m in mltcp], ideal, ideal, base,
                   [Path(f"/m{i}") for i in range(len(mltcp))], 300_000, 60_000)  # fmt: skip
    return [plain, treated]


def test_a_row_per_mltcp_treatment_in_issue_24s_schema() -> None:
    [(row, runs)] = kernel_mltcp.published_rows(_cells([1.0, 1.0], [0.9, 0.95], [0.8, 0.8]), "cmd")
    assert {k: row[k] for k in ("mix", "cc", "dataplane", "treatment", "f", "jobs", "rounds", "command")} == {
        "mix": "compat-2", "cc": "reno", "dataplane": "kernel", "treatment": "mltcp_reno", "f": "2:0.5",
        "jobs": 2, "rounds": 2, "command": "cmd",
    }  # fmt: skip
    # of the ideal gain in speed: (1.0 / 0.9 - 1) / (1.0 / 0.8 - 1), (1.0 / 0.95 - 1) / 0.25
    assert row["share_of_ideal"] == [0.4444, 0.2105]
    assert row["ideal_avg"] == pytest.approx(1.25) and row["avg_speedup"] == pytest.approx(1 / 0.925, abs=1e-4)
    assert set(mltcp_figures.MLTCP_KEY) <= set(row)
    names = [name for _, name in runs]
    tag = "compat-2/kernel-q300000-k60000"  # the run files name their regime: deep and shallow rows coexist
    assert names[:2] == [f"{tag}/mltcp_reno@2_0.5-r1.csv", f"{tag}/mltcp_reno@2_0.5-r2.csv"]
    assert names[2:4] == [f"{tag}/reno-r1.csv", f"{tag}/reno-r2.csv"]
    assert (row["queue_bytes"], row["mark_threshold_bytes"], row["link_bps"]) == (300_000, 60_000, 200e6)
    assert row["signals_per_phase"] == 0.0  # the synthetic records retransmit nothing


def test_signals_per_phase_counts_loss_events_and_marks_per_connection_and_phase() -> None:
    run = _run(1.0, jobs=2, iterations=5)
    run.flows = 2
    run.records[0] = dataclasses.replace(run.records[0], retransmits=60)  # segments: not events
    run.loss_events = 6
    run.marks = 14
    assert run.signals_per_phase == pytest.approx(20 / (2 * 5 * 2))


def test_regime_rows_carry_the_issue_45_schema() -> None:
    [row] = kernel_mltcp.regime_rows(_cells([1.0, 1.0], [0.9, 0.95], [0.8, 0.8]), "cmd")
    assert set(regime.KEY) <= set(row)
    assert {"signals_per_phase", "rounds", "share_of_ideal", "avg_over_ideal", "baseline_avg_over_ideal",
            "interleaved_from", "command"} <= set(row)  # fmt: skip
    assert row["avg_over_ideal"] == [pytest.approx(0.9 / 0.8), pytest.approx(0.95 / 0.8)]
    assert row["baseline_avg_over_ideal"] == [pytest.approx(1.25), pytest.approx(1.25)]
    assert row["platform"] == "kernel" and row["rounds"] == 2


def test_deep_rows_are_the_curves_and_shallow_rows_meet_issue_45s_targets() -> None:
    deep = _cells([1.0, 1.0], [0.8, 0.8], [0.8, 0.8])
    for c in deep:  # the same queue, unmarked: congestion is signalled at 300 KB, 12 ms
        c.mark_threshold_bytes = None
    [(row, _)] = kernel_mltcp.published_rows(deep, "cmd")
    assert mltcp_figures.mltcp_target(row) == "-"
    [(row, _)] = kernel_mltcp.published_rows(_cells([1.0, 1.0], [0.8, 0.8], [0.8, 0.8]), "cmd")
    assert mltcp_figures.mltcp_target(row) == "every>=0.90"
    # every round at the ideal, but never interleaved (the synthetic runs overlap): not met
    assert not mltcp_figures.mltcp_meets(row)


def test_the_verdict_is_the_docs_table_target() -> None:
    [line, _largest] = kernel_mltcp.targets(_cells([1.0, 1.0], [0.9, 0.95], [0.8, 0.8], mix="compat-8"))
    assert "target share >= 0.70" in line and line.endswith("MISSED")
    [line, _largest] = kernel_mltcp.targets(_cells([1.0, 1.0], [0.82, 0.81], [0.8, 0.8], mix="compat-8"))
    assert line.endswith("met")
    # a mix without a target gets no verdict line
    assert len(kernel_mltcp.targets(_cells([1.0, 1.0], [0.9, 0.9], [0.8, 0.8], mix="partial-2"))) == 1


def test_rounds_csv_has_a_row_per_round_and_the_kernel_labs_own_counts_last(tmp_path: Path) -> None:
    path = tmp_path / "rounds.csv"
    rows.write_round_csv(path, _cells([1.0, 1.0], [0.9, 0.8], [0.8, 0.8]), kernel_mltcp.ROUND_COUNTS)
    with path.open() as f:
        header, *lines = list(csv.reader(f))
    assert header[-3:] == ["retransmits", "ce_marks", "signals_per_phase"]
    assert header[:-3] == list(rows.ROUND_COLUMNS)
    by_round = [dict(zip(header, line, strict=True)) for line in lines]
    rounds = [(r["treatment"], r["round"]) for r in by_round]
    assert rounds == [("reno", "1"), ("reno", "2"), ("mltcp_reno 2:0.5", "1"), ("mltcp_reno 2:0.5", "2")]
    treated = by_round[3]
    assert (treated["avg_s"], treated["speedup"], treated["share_of_ideal_gain"]) == ("0.8000", "1.2500", "1.0000")
    assert treated["retransmits"] == "0" and treated["mark_threshold_bytes"] == "60000"


def test_the_report_writes_its_summary_and_rounds_csv(tmp_path: Path) -> None:
    """_report, as a run ends: summary.md with the table and the verdicts, rounds.csv beside it."""
    args = argparse.Namespace(mark_threshold=60_000, grid=None, rounds=2, iterations=25, rate=200.0,
                              buffer="300000", flows=2, mixes="compat-2")  # fmt: skip
    kernel_mltcp._report(args, _cells([1.0, 1.0], [0.9, 0.8], [0.8, 0.8]), tmp_path, (0.5,), (0.7,), 0.0)
    summary = (tmp_path / "summary.md").read_text()
    assert "mltcp_reno 2:0.5" in summary and "CE marked above 60000 B" in summary
    with (tmp_path / "rounds.csv").open() as f:
        assert len(list(csv.reader(f))) == 1 + 4  # header, two treatments x two rounds
