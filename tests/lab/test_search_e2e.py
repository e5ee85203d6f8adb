"""`make search` end to end, tiny (not a measurement): one round, a 2-trial study, both at once under FIFO and MAIF,
real jobs through the reference switch; its files, its rows and MAIF's classes freed as trials end."""

from __future__ import annotations

import csv
import functools
from pathlib import Path

import pytest

from mlfc.lab import summaries
from mlfc.lab.cleanup import leftovers
from mlfc.lab.search import cli
from mlfc.lab.search import rows as srows

FINISH_SLACK_S = 5.0  # the agents' finish and the coordinator's next decision


@pytest.mark.mininet
@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_tiny_study_runs_under_fifo_and_maif_and_publishes_its_rows(tmp_path: Path, monkeypatch) -> None:
    data = tmp_path / "data"
    monkeypatch.setattr(summaries, "publish", functools.partial(summaries.publish, data=data))
    out = tmp_path / "out"
    before = set(leftovers())
    argv = ["--trials", "2", "--concurrency", "2", "--rounds", "1", "--pruners", "asha", "--iterations", "4",
            "--reference-grid", "16:0.1", "--plateau-max", "300", "--plateau-patience", "3",
            "--cache", str(tmp_path / "astar"), "--out", str(out), "--dataplane", "ref", "--publish"]  # fmt: skip
    assert cli.main(argv) == 0
    runs = out / "digits" / "ref" / "asha"
    proposals = {}
    for treatment in ("baseline", "maif"):
        with (runs / f"{treatment}-r1-trials.csv").open() as f:
            trials = list(csv.DictReader(f))
        assert [int(t["trial"]) for t in trials] == [0, 1] and [int(t["job"]) for t in trials] == [1, 2]
        assert {t["state"] for t in trials} <= {"complete", "pruned"}, trials
        assert all(int(t["evaluations"]) >= 1 for t in trials)
        proposals[treatment] = [(t["width"], t["lr"], t["batch_size"]) for t in trials]
        with (runs / f"{treatment}-r1.csv").open() as f:
            assert {int(r["job"]) for r in csv.DictReader(f)} == {1, 2}
    assert proposals["baseline"] == proposals["maif"]  # the same seed: TPE's startup draws
    # A trial that ended (pruned or complete) holds no class in MAIF's decisions a few seconds later: its
    # agents finished the job at the coordinator.
    with (runs / "maif-r1-decisions.csv").open() as f:
        decisions = list(csv.DictReader(f))
    assert decisions and {int(d["job"]) for d in decisions} <= {1, 2}
    with (runs / "maif-r1-trials.csv").open() as f:
        ended = {int(t["job"]): float(t["ended_s"]) for t in csv.DictReader(f)}
    late = [d for d in decisions if float(d["since_start"]) > ended[int(d["job"])] + FINISH_SLACK_S]
    assert not late, f"jobs still ranked after their trial ended: {late}"
    summary = summaries.load("search", data)
    assert {r["treatment"] for r in summary["rows"]} == {"fifo", "maif-sum"}
    for row in summary["rows"]:
        srows.check_row(row)
        assert (row["trials"], row["concurrency"], row["pruner"]) == (2, 2, "SuccessiveHalvingPruner")
        assert row["errors"] == [0]
    assert (data / "search" / "runs" / "digits" / "ref" / "asha" / "maif-r1-trials.csv").exists()
    assert not set(leftovers()) - before
