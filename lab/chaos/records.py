"""What the chaos run's processes printed: worker records (JSON lines in w<rank>.log), progress, accuracy,
and the agents' acknowledgement logs (--ack-log)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from mlfc.lab.chaos.schedule import WORKERS


def read_json_lines(path: Path) -> list[dict]:
    out = []
    with contextlib.suppress(OSError):
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                with contextlib.suppress(ValueError):
                    row = json.loads(line)
                    if isinstance(row, dict):
                        out.append(row)
    return out


def worker_records(run_dir: Path) -> list[dict]:
    return [
        r
        for w in range(WORKERS)
        for r in read_json_lines(run_dir / f"w{w}.log")
        if "iteration" in r and not r.get("summary") and not r.get("ps")
    ]


def iteration_ends(records: list[dict]) -> dict[int, float]:
    """Iteration -> when the last worker finished it (the job is synchronous)."""
    ends: dict[int, float] = {}
    for r in records:
        ends[r["iteration"]] = max(r["end"], ends.get(r["iteration"], 0.0))
    return ends


def progress(run_dir: Path) -> int:
    """The highest iteration every worker has finished (-1 before the first)."""
    last = [-1] * WORKERS
    for r in worker_records(run_dir):
        last[r["worker"]] = max(last[r["worker"]], r["iteration"])
    return min(last)


def final_accuracy(records: list[dict]) -> tuple[int, float] | None:
    accs = [(r["iteration"], r["accuracy"]) for r in records if r.get("worker") == 0 and "accuracy" in r]
    return max(accs) if accs else None


def ack_rows(logs: list[Path]) -> list[dict]:
    """Every batch the coordinator answered, of every agent incarnation ({job, time, committed, reports})."""
    return [row for path in logs for row in read_json_lines(path)]
