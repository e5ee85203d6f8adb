"""Recompute the published top-job slowdown of a finished `make hpsearch` from its run files.

    python -m mlfc.lab.hpsearch_rescore results/hpsearch/digits/ref [--publish]

The top job's slowdown is derived data: the job that held MAIF's top class longest (the decision CSV),
its iteration time over the iterations it ran entirely in the top class (the run's iteration CSV), over
its configuration's time alone (the solo CSVs). When that definition changes (lab/hpsearch_rows.py), a
finished run need not be measured again: this recomputes ``top_job`` and ``top_job_slowdown`` of the MAIF
rows in docs/data/hpsearch/summary.json from the run directory, prints old and new side by side, and with
--publish writes them (and copies the decision CSVs beside the iteration CSVs). Nothing else of a row
changes; a row whose rounds do not match the directory's files is refused.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from pathlib import Path

from mlfc.lab import figures
from mlfc.lab import hpsearch_rows as hrows
from mlfc.lab.decisions import DecisionSample
from mlfc.lab.results import IterationRecord, read_csv
from mlfc.lab.tta import search_start


def read_decisions(path: Path, start: float) -> list[DecisionSample]:
    """A decision CSV as samples on the run's records clock (``since_start`` + the search's start)."""
    out = []
    with path.open() as f:
        for row in csv.DictReader(f):
            out.append(
                DecisionSample(
                    float(row["since_start"]) + start,
                    int(row["decision"]),
                    int(row["job"]),
                    int(row["rank"]),
                    int(row["priority"]),
                    float(row["score"]),
                    float(row["gain"]),
                    row["model"],
                    int(row["points"]),
                    int(row["last_iteration"]),
                    float(row["last_quality"]),
                )
            )
    return out


def alone_times(run_dir: Path) -> dict[str, float]:
    """Configuration name -> its mean iteration time alone (the solo runs, first iteration left out)."""
    out = {}
    for path in sorted((run_dir / "solo").glob("*.csv")):
        records = read_csv(path)
        rs = [r for r in records if r.iteration >= 1] or records
        out[path.stem.replace("_", " ")] = sum(r.duration for r in rs) / len(rs)
    return out


def job_configurations(path: Path) -> dict[int, str]:
    with path.open() as f:
        return {int(row["job"]): row["configuration"] for row in csv.DictReader(f)}


def rescore_run(run_csv: Path, decisions_csv: Path, alone: dict[str, float]) -> tuple[str | None, float]:
    """(the top job's configuration, its slowdown) of one MAIF run."""
    records: list[IterationRecord] = read_csv(run_csv)
    samples = read_decisions(decisions_csv, search_start(records))
    configs = job_configurations(run_csv)
    by_job = {j: alone.get(c, math.nan) for j, c in configs.items()}
    job, slowdown = hrows.top_job_slowdown(records, hrows.top_periods(samples), by_job)
    return (configs.get(job) if job is not None else None), slowdown


def rescore(run_dir: Path, task: str, dataplane: str, summary: dict) -> list[tuple[dict, list[tuple[Path, str]]]]:
    """The summary's MAIF rows of ``task`` and ``dataplane`` with top_job/top_job_slowdown recomputed, each with
    its decision CSVs to copy."""
    alone = alone_times(run_dir)
    internal = {v: k for k, v in hrows.PUBLISHED.items()}
    out = []
    for row in summary["rows"]:
        if (row["task"], row["dataplane"]) != (task, dataplane) or row["treatment"] == "fifo":
            continue
        name = internal.get(row["treatment"], row["treatment"])
        runs = [
            (run_dir / f"{name}-r{r}.csv", run_dir / f"{name}-r{r}-decisions.csv") for r in range(1, row["rounds"] + 1)
        ]
        missing = [str(p) for pair in runs for p in pair if not p.exists()]
        if missing:
            raise SystemExit(f"{row['treatment']}: {row['rounds']} round(s) published, missing {', '.join(missing)}")
        scored = [rescore_run(it, dec, alone) for it, dec in runs]
        new = dict(row)
        new["top_job"] = [c for c, _ in scored]
        new["top_job_slowdown"] = [hrows.published_number(s) for _, s in scored]
        hrows.check_row(new)
        prefix = f"{task}/{dataplane}"
        out.append((new, [(dec, f"{prefix}/{dec.name}") for _, dec in runs]))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "run_dir", type=Path, help="a finished run's OUT/<task>/<dataplane> (e.g. results/hpsearch/digits/ref)"
    )
    ap.add_argument("--publish", action="store_true", help="write the recomputed rows to docs/data/hpsearch")
    args = ap.parse_args(argv)
    dataplane, task = args.run_dir.name, args.run_dir.parent.name
    summary = figures.load("hpsearch")
    rows = rescore(args.run_dir, task, dataplane, summary)
    if not rows:
        print(f"no published MAIF rows of {task} on {dataplane}", file=sys.stderr)
        return 1
    old = {r["treatment"]: r for r in summary["rows"] if (r["task"], r["dataplane"]) == (task, dataplane)}
    for row, _ in rows:
        before = old[row["treatment"]]
        print(f"{task} {dataplane} {row['treatment']}: top job {before['top_job']} -> {row['top_job']}; "
              f"slowdown {before['top_job_slowdown']} -> {row['top_job_slowdown']}")  # fmt: skip
    if args.publish:
        path = figures.publish("hpsearch", [r for r, _ in rows], key=hrows.KEY,
                               runs=[p for _, ps in rows for p in ps], meta={"schema": hrows.SCHEMA})  # fmt: skip
        print(f"published to {path}; `make figures` regenerates the docs' tables")
    return 0


if __name__ == "__main__":
    sys.exit(main())
