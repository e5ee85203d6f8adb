"""The one summary table of `make bench`: each benchmark records its headline figures, with the anchor
measured in the same run, the ratio and the target; bench/run_all.py prints them together at the end.

A benchmark run alone (no $MLFC_BENCH_SUMMARY) records nothing and prints its own tables as before.
Besides the table's text a row carries its figure as numbers (value, unit, the anchor's value, the
ratio) and the command that measured it: `make bench` publishes those to docs/data/bench/summary.json
(issue 28's schema, lab/bench_figures.py), from which `make figures` makes the docs' table.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

ENV = "MLFC_BENCH_SUMMARY"
HEADER = ("figure", "measured", "anchor (same run)", "ratio", "target", "verdict")


@dataclass(frozen=True, slots=True)
class Row:
    figure: str
    measured: str
    anchor: str = "-"
    ratio: str = "-"
    target: str = "none"
    verdict: str = "-"  # "met", "missed", or "-" where there is no target
    value: float | None = None  # the measured figure as a number, in ``unit``
    unit: str = ""
    anchor_value: float | None = None  # the anchor's figure, same unit (None: no anchor)
    ratio_value: float | None = None
    command: str = ""  # filled in by record(): the benchmark's own command line


def command_line() -> str:
    """This benchmark's command line, as a user would type it from the project's root."""
    root = str(Path(__file__).resolve().parent.parent) + os.sep  # paths below the project's root, relative
    args = [a.replace(root, "") for a in sys.argv[1:]]
    return shlex.join(["python", f"bench/{os.path.basename(sys.argv[0])}", *args])


def published(row: Row) -> dict:
    """``row`` in docs/data/bench's schema: name, value, unit, anchor, anchor_value, ratio, target, command."""
    anchor = row.anchor if row.anchor != "-" else None
    return {
        "name": row.figure,
        "value": row.value,
        "unit": row.unit,
        "measured": row.measured,
        "anchor": anchor,
        "anchor_value": row.anchor_value,
        "ratio": row.ratio_value,
        "target": None if row.target == "none" else row.target,
        "verdict": row.verdict,
        "command": row.command,
    }


def verdict(ok: bool | None) -> str:
    return "-" if ok is None else ("met" if ok else "missed")


def record(row: Row, path: str | None = None) -> None:
    """Append ``row`` to the run's summary file (a JSON line), if the run keeps one."""
    target = path or os.environ.get(ENV)
    if not target:
        return
    entry = asdict(row)
    entry["command"] = row.command or command_line()
    with Path(target).open("a") as f:
        f.write(json.dumps(entry) + "\n")


def load(path: Path) -> list[Row]:
    if not path.exists():
        return []
    return [Row(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def table(rows: Sequence[Row]) -> str:
    out = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for r in rows:
        cells = (r.figure, r.measured, r.anchor, r.ratio, r.target, r.verdict)
        out.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(out)
