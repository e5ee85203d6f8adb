"""The benchmarks' pure helpers: growth classification of scaling curves, saturation of rates, the tables,
and the one summary table of `make bench` (bench/scaling.py, bench/summary.py). No timing here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import scaling
import summary


def powers(k: float, xs=(10, 100, 1000, 10000)) -> list[tuple[float, float]]:
    return [(x, 3.0 * x**k) for x in xs]


@pytest.mark.parametrize(
    ("k", "name"),
    [(0.0, "flat"), (0.5, "sublinear"), (1.0, "linear"), (1.5, "worse than linear"), (2.0, "quadratic or worse")],
)
def test_slope_recovers_the_exponent_and_names_it(k: float, name: str) -> None:
    pts = powers(k)
    assert scaling.slope(pts) == pytest.approx(k, abs=1e-9)
    assert scaling.growth_class(scaling.slope(pts)) == name


def test_n_log_n_counts_as_linear_within_the_band() -> None:
    import math

    pts = [(x, x * math.log(x)) for x in (1000, 10000, 50000)]
    assert scaling.growth_class(scaling.slope(pts)) == "linear"


def test_growth_names_the_step_where_a_linear_curve_turns_worse() -> None:
    pts = [(1, 1.0), (2, 2.0), (4, 4.0), (8, 32.0)]  # linear, then a jump between 4 and 8
    text = scaling.growth(pts)
    assert "from 4 up" in text, text


def test_growth_of_a_clean_linear_curve_names_no_turn() -> None:
    text = scaling.growth(powers(1.0))
    assert text.startswith("linear") and "from" not in text


def test_close_sizes_are_not_read_as_a_turn() -> None:
    # 5,500 and 6,000 entries held differ by noise, not by growth: no "worse from" on that step.
    pts = [(1000, 3.0), (3000, 4.0), (5500, 8.0), (6000, 16.0), (11000, 13.0)]
    assert [x for x, _ in scaling.spaced(pts)] == [1000, 3000, 5500, 11000]
    assert "from 5500" not in scaling.growth(pts)


def test_slope_refuses_too_few_or_degenerate_points() -> None:
    with pytest.raises(ValueError):
        scaling.slope([(10, 1.0)])
    with pytest.raises(ValueError):
        scaling.slope([(10, 1.0), (10, 2.0)])
    with pytest.raises(ValueError):
        scaling.slope([(0, 1.0), (10, 0.0)])  # nothing positive on a log scale


def test_saturation_finds_where_adding_size_stops_paying() -> None:
    assert scaling.saturation([(1, 100.0), (2, 190.0), (4, 200.0), (8, 205.0)]) == 4
    assert scaling.saturation([(1, 100.0), (2, 200.0), (4, 400.0)]) is None
    assert scaling.saturation([(4, 200.0), (1, 100.0), (2, 80.0)]) == 2  # sorted by size first


def test_curve_verdicts_for_costs_and_rates() -> None:
    cost = scaling.Curve("t", "n", "s", tuple(powers(1.0)))
    assert cost.verdict().startswith("linear")
    rate = scaling.Curve("r", "switches", "entries/s", ((1, 100.0), (2, 105.0)), cost=False)
    assert "stops rising" in rate.verdict() and "switches = 2" in rate.verdict()
    assert "one point" in scaling.Curve("x", "n", "s", ((1, 1.0),)).verdict()


def test_markdown_table_formats_numbers() -> None:
    text = scaling.markdown_table(["a", "b", "c", "d"], [[1234, 0.012345, 12345.6, float("nan")]])
    lines = text.splitlines()
    assert lines[0] == "| a | b | c | d |"
    assert lines[2] == "| 1,234 | 0.0123 | 12,346 | - |"


def test_write_csv_and_plot(tmp_path: Path) -> None:
    scaling.write_csv(tmp_path / "x" / "t.csv", ["n", "s"], [[1, 2.0]])
    assert (tmp_path / "x" / "t.csv").read_text().splitlines() == ["n,s", "1,2.0"]
    curves = [
        scaling.Curve("c", "n", "s", tuple(powers(1.0))),
        scaling.Curve("r", "n", "r", ((1, 2.0), (2, 3.0)), False),
    ]
    scaling.plot_curves(tmp_path / "p.png", curves, "t")
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_summary_rows_round_trip_through_the_run_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "summary.jsonl"
    summary.record(summary.Row("lost", "1"))  # no run file: nothing recorded, no error
    monkeypatch.setenv(summary.ENV, str(path))
    summary.record(summary.Row("transport", "3.1 Gb/s", "iperf3 1.0 Gb/s", "3.1x", ">= 2x", summary.verdict(True)))
    summary.record(summary.Row("controller", "a | b"))
    rows = summary.load(path)
    assert [r.figure for r in rows] == ["transport", "controller"]
    text = summary.table(rows)
    assert "| transport | 3.1 Gb/s | iperf3 1.0 Gb/s | 3.1x | >= 2x | met |" in text
    assert "a / b" in text  # a cell's own bar would break the table
    assert summary.verdict(None) == "-" and summary.verdict(False) == "missed"
    assert summary.load(tmp_path / "absent.jsonl") == []
