"""Publish a `make hpsearch` run from its files: the top-job slowdown recomputed, or the completed rounds
of a run that was stopped.

    python -m mlfc.lab.hpsearch.rescore results/hpsearch/digits/ref [--publish]
    python -m mlfc.lab.hpsearch.rescore results/hpsearch/digits/ref --from-files --command "..." [--publish]

The top job's slowdown is derived data: the job that held MAIF's top class longest (the decision CSV),
its iteration time over the iterations it ran entirely in the top class (the run's iteration CSV), over
its configuration's time alone (the solo CSVs). When that definition changes (lab/hpsearch/rows.py), a
finished run need not be measured again: the first form recomputes ``top_job`` and ``top_job_slowdown`` of
the MAIF rows already in docs/data/hpsearch/summary.json, prints old and new side by side, and with
--publish writes them (and copies the decision CSVs beside the iteration CSVs). Nothing else of a row
changes; a row whose rounds do not match the directory's files is refused.

``--from-files`` builds every row from the run directory alone (hpsearch.csv, written after each completed
round, the per-run CSVs and reference.json): what a run stopped after some rounds publishes (nothing of a
long measurement is lost to an interruption). Rounds with a run of every treatment are kept; ``--command``
is the command the run was started with (it goes into the rows).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from collections import defaultdict
from pathlib import Path

from mlfc.lab import summaries
from mlfc.lab.decisions import DecisionSample
from mlfc.lab.hpsearch import rows as hrows
from mlfc.lab.hpsearch.search import DEFAULT_ITERATIONS, FRACTIONS, HPSEARCH_PPS, mean_iter
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
        out[path.stem.replace("_", " ")] = mean_iter(read_csv(path))[0]
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


def rows_from_files(run_dir: Path, task: str, dataplane: str, command: str, *, iterations: int,
                    bottleneck_pps: int) -> list[tuple[dict, list[tuple[Path, str]]]]:  # fmt: skip
    """Every treatment's row of the run in ``run_dir`` from its files, over the rounds that every treatment
    completed; each with the files to copy beside the summary."""
    table = list(csv.DictReader((run_dir / "hpsearch.csv").open()))
    ref = json.loads((run_dir / "reference.json").read_text())
    by: dict[str, dict[int, dict]] = defaultdict(dict)
    for row in table:
        by[row["treatment"]][int(row["round"])] = row
    if "baseline" not in by:
        raise SystemExit(f"{run_dir}: no FIFO (baseline) run to compare with")
    rounds = sorted(set.intersection(*(set(rs) for rs in by.values())))
    if not rounds:
        raise SystemExit(f"{run_dir}: no round with a run of every treatment ({', '.join(by)})")
    alone = alone_times(run_dir)

    def tta(row: dict) -> dict[float, float]:
        return {f: float(row[f"tta_{f:.2f}"]) for f in FRACTIONS}

    fifo = {r - 1: tta(by["baseline"][r]) for r in rounds}
    prefix = f"{task}/{dataplane}"
    out = []
    for name, runs in by.items():
        slowdown, top = {}, []
        copies = [(run_dir / "reference.json", f"{prefix}/reference.json")]
        for r in rounds:
            it_csv, dec_csv = run_dir / f"{name}-r{r}.csv", run_dir / f"{name}-r{r}-decisions.csv"
            copies.append((it_csv, f"{prefix}/{it_csv.name}"))
            order = runs[r]["order"].split(" ")
            names = [f"{order[i]} {order[i + 1]}" for i in range(0, len(order), 2)]  # "w16 lr0.1" per job
            if name != "baseline":  # MAIF: its top job from its decisions (FIFO's coordinator decides too)
                cfg, slowdown[r - 1] = rescore_run(it_csv, dec_csv, alone)
                top.append(cfg)
                copies.append((dec_csv, f"{prefix}/{dec_csv.name}"))
            else:  # FIFO: the same job as the round's MAIF run (as in the run), over its whole run
                job = runs[r]["top_job"]
                top.append(names[int(job) - 1] if job else None)
                slowdown[r - 1] = float(runs[r]["top_job_slowdown"] or "nan")
        row = hrows.make_row(
            task=task,
            dataplane=dataplane,
            configurations=len(ref["configurations"]),
            treatment=name,
            tta={r - 1: tta(runs[r]) for r in rounds},
            fifo=fifo,
            slowdown=slowdown,
            command=command,
            a_star=ref["a_star"],
            grid=",".join(c["configuration"] for c in ref["configurations"]),
            iterations=iterations,
            bottleneck_pps=bottleneck_pps,
            top_job=top,
            same_as_solo=[int(runs[r]["same_as_solo"]) for r in rounds],
            errors=[len([e for e in runs[r]["errors"].split("; ") if e]) for r in rounds],
            measured=time.strftime("%Y-%m-%d", time.localtime((run_dir / "hpsearch.csv").stat().st_mtime)),
        )
        out.append((row, copies))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "run_dir", type=Path, help="a finished run's OUT/<task>/<dataplane> (e.g. results/hpsearch/digits/ref)"
    )
    ap.add_argument("--publish", action="store_true", help="write the recomputed rows to docs/data/hpsearch")
    ap.add_argument("--from-files", action="store_true", help="every row from the run's files (completed rounds)")
    ap.add_argument("--command", help="--from-files: the command the run was started with")
    ap.add_argument("--iterations", type=int, help="--from-files: the run's iterations (default: the task's)")
    ap.add_argument("--bottleneck-pps", type=int, default=HPSEARCH_PPS, help="--from-files (%(default)s)")
    args = ap.parse_args(argv)
    dataplane, task = args.run_dir.name, args.run_dir.parent.name
    summary = summaries.load("hpsearch")
    if args.from_files:
        if not args.command:
            ap.error("--from-files needs --command (the command the run was started with)")
        iterations = args.iterations or DEFAULT_ITERATIONS.get(task)
        if iterations is None:
            ap.error(f"task {task}: give --iterations")
        rows = rows_from_files(args.run_dir, task, dataplane, args.command, iterations=iterations,
                               bottleneck_pps=args.bottleneck_pps)  # fmt: skip
    else:
        rows = rescore(args.run_dir, task, dataplane, summary)
    if not rows:
        print(f"no published MAIF rows of {task} on {dataplane}", file=sys.stderr)
        return 1
    old = {r["treatment"]: r for r in summary["rows"] if (r["task"], r["dataplane"]) == (task, dataplane)}
    for row, _ in rows:
        before = old.get(row["treatment"], {"top_job": None, "top_job_slowdown": None})
        print(f"{task} {dataplane} {row['treatment']}: top job {before['top_job']} -> {row['top_job']}; "
              f"slowdown {before['top_job_slowdown']} -> {row['top_job_slowdown']}")  # fmt: skip
    if args.publish:
        path = summaries.publish("hpsearch", [r for r, _ in rows], key=hrows.KEY,
                               runs=[p for _, ps in rows for p in ps], meta={"schema": hrows.SCHEMA})  # fmt: skip
        print(f"published to {path}; `make figures` regenerates the docs' tables")
    return 0


if __name__ == "__main__":
    sys.exit(main())
