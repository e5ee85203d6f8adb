"""Recomputing a published top-job slowdown from a finished run's files (lab/hpsearch/rescore.py)."""

from __future__ import annotations

import csv
import json
from dataclasses import asdict, fields
from pathlib import Path

import pytest

from mlfc.lab.decisions import DecisionSample
from mlfc.lab.decisions import write_csv as write_decisions
from mlfc.lab.hpsearch import rescore
from mlfc.lab.hpsearch import rows as hrows
from mlfc.lab.results import IterationRecord
from mlfc.lab.results import write_csv as write_records


def rec(job: int, it: int, start: float, dur: float) -> IterationRecord:
    return IterationRecord("s", job, "w0", it, start, start, start + dur, start + dur, 100)


def write_run(path: Path, records: list[IterationRecord], configs: dict[int, str]) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=[*(fl.name for fl in fields(IterationRecord)), "configuration"])
        w.writeheader()
        for r in records:
            w.writerow({**asdict(r), "configuration": configs[r.job]})


def test_the_top_job_is_rescored_from_the_run_files(tmp_path: Path) -> None:
    run = tmp_path / "digits" / "ref"
    (run / "solo").mkdir(parents=True)
    write_records(run / "solo" / "w8_lr0.1.csv", [rec(1, i, float(i), 1.0) for i in range(5)])
    write_records(run / "solo" / "w4_lr0.1.csv", [rec(1, i, float(i), 0.5) for i in range(5)])
    # Records start at 100 s on their clock (the search's start); job 1 is on top from 0 to 10 s after it.
    start = 100.0
    records = [rec(1, 0, start, 1.0)] + [rec(1, i, start + i, 1.0) for i in range(1, 8)]
    records += [rec(1, 8, start + 8.0, 30.0)]  # began on top, ended after the demotion at 10 s: not counted
    records += [rec(2, i, start + 2.0 * i, 2.0) for i in range(20)]
    write_run(run / "maif-r1.csv", records, {1: "w8 lr0.1", 2: "w4 lr0.1"})
    d = [DecisionSample(1000.0 + t, k, job, rank, 7 - rank, 0.0, 0.0, "prior", 0, 0, 0.0)
         for k, (t, job, rank) in enumerate([(0.0, 1, 1), (0.0, 2, 2), (10.0, 2, 1), (10.0, 1, 2)])]  # fmt: skip
    write_decisions(run / "maif-r1-decisions.csv", d, start=1000.0)
    row = {"task": "digits", "dataplane": "ref", "configurations": 2, "framework": "mlfc-ps", "treatment": "maif-sum",
           "rounds": 1, "time_to_090": [1.0], "time_to_095": [2.0], "less_than_fifo_095": [0.5],
           "top_job_slowdown": [3.0], "top_job": ["w8 lr0.1"], "command": "x"}  # fmt: skip
    other = {**row, "dataplane": "bmv2"}
    [(new, copies)] = rescore.rescore(run, "digits", "ref", {"rows": [row, other]})
    # Job 2 held the top class from 10 s to the run's end (40 s), job 1 for 10 s: job 2, at 2.0 s an iteration
    # against 0.5 s alone.
    assert new["top_job"] == ["w4 lr0.1"] and new["top_job_slowdown"] == [pytest.approx(4.0)]
    assert {k: v for k, v in new.items() if k not in ("top_job", "top_job_slowdown")} == {
        k: v for k, v in row.items() if k not in ("top_job", "top_job_slowdown")
    }
    assert copies == [(run / "maif-r1-decisions.csv", "digits/ref/maif-r1-decisions.csv")]
    hrows.check_row(new)


def test_a_row_without_its_rounds_files_is_refused(tmp_path: Path) -> None:
    run = tmp_path / "digits" / "ref"
    (run / "solo").mkdir(parents=True)
    row = {"task": "digits", "dataplane": "ref", "treatment": "maif-search", "rounds": 2}
    with pytest.raises(SystemExit, match="missing"):
        rescore.rescore(run, "digits", "ref", {"rows": [row]})


def test_a_stopped_run_publishes_its_completed_rounds_from_its_files(tmp_path: Path) -> None:
    run = tmp_path / "digits" / "ref"
    (run / "solo").mkdir(parents=True)
    write_records(run / "solo" / "w8_lr0.1.csv", [rec(1, i, float(i), 1.0) for i in range(5)])
    write_records(run / "solo" / "w4_lr0.1.csv", [rec(1, i, float(i), 0.5) for i in range(5)])
    ref = {"a_star": {"a_star": 0.99}, "configurations": [{"configuration": "8:0.1"}, {"configuration": "4:0.1"}]}
    (run / "reference.json").write_text(json.dumps(ref))
    records = [rec(1, i, 100.0 + i, 1.0) for i in range(10)] + [rec(2, i, 100.0 + 2 * i, 2.0) for i in range(5)]
    d = [DecisionSample(1000.0, 1, 1, 1, 6, 0.0, 0.0, "prior", 0, 0, 0.0)]
    for name in ("baseline", "maif"):
        for r in (1, 2):
            write_run(run / f"{name}-r{r}.csv", records, {1: "w8 lr0.1", 2: "w4 lr0.1"})
            # FIFO's coordinator decides too (not applied): its file must not make it a MAIF run
            write_decisions(run / f"{name}-r{r}-decisions.csv", d, start=1000.0)
    head = "dataplane,treatment,round,order,tta_0.90,tta_0.95,first_job_0.90,first_job_0.95,finish_s,utilisation,"
    head += "cpu_busy,same_as_solo,top_job,top_job_slowdown,errors\n"
    lines = [f"ref,{t},{r},w8 lr0.1 w4 lr0.1,{a},{b},1,1,30,0.5,50,2,{j},{s},{e}\n"
             for t, r, a, b, j, s, e in [("baseline", 1, 50, 100, 1, 3.0, ""), ("maif", 1, 20, 40, 1, 9.9, ""),
                                         ("baseline", 2, 60, 80, 1, 2.5, "x; y"), ("maif", 2, 30, 60, 1, 9.9, ""),
                                         ("baseline", 3, 55, 90, 1, 2.0, "")]]  # fmt: skip
    (run / "hpsearch.csv").write_text(head + "".join(lines))
    rows = {row["treatment"]: (row, copies) for row, copies in rescore.rows_from_files(
        run, "digits", "ref", "python -m mlfc.lab.hpsearch --publish", iterations=10, bottleneck_pps=800)}  # fmt: skip
    fifo, maif = rows["fifo"][0], rows["maif-sum"][0]
    assert fifo["rounds"] == maif["rounds"] == 2  # round 3 has no MAIF run: left out
    assert maif["time_to_095"] == [40.0, 60.0] and maif["less_than_fifo_095"] == [0.6, 0.25]
    # Job 1 held the top class all run long; its iterations (1..9, 1 s) over 1 s alone, recomputed
    assert maif["top_job"] == ["w8 lr0.1"] * 2 and maif["top_job_slowdown"] == [1.0, 1.0]
    assert fifo["top_job"] == ["w8 lr0.1"] * 2 and fifo["top_job_slowdown"] == [3.0, 2.5]  # as the run had it
    assert fifo["errors"] == [0, 2] and maif["grid"] == "8:0.1,4:0.1" and maif["a_star"] == {"a_star": 0.99}
    assert (run / "maif-r2-decisions.csv", "digits/ref/maif-r2-decisions.csv") in rows["maif-sum"][1]
    hrows.check_row(maif)
