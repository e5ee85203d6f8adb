"""The one summary table of `make bench`: each benchmark records its headline figures, with the anchor
measured in the same run, the ratio and the target; bench/run_all.py prints them together at the end.

A benchmark run alone (no $MLFC_BENCH_SUMMARY) records nothing and prints its own tables as before.
"""

from __future__ import annotations

import json
import os
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


def verdict(ok: bool | None) -> str:
    return "-" if ok is None else ("met" if ok else "missed")


def record(row: Row, path: str | None = None) -> None:
    """Append ``row`` to the run's summary file (a JSON line), if the run keeps one."""
    target = path or os.environ.get(ENV)
    if not target:
        return
    with Path(target).open("a") as f:
        f.write(json.dumps(asdict(row)) + "\n")


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
