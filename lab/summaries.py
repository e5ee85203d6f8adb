"""Published results: docs/data/<experiment>/summary.json (+ per-run CSVs), the store every experiment publishes
to and every table is made from.

An experiment that produces a headline figure calls ``publish`` with its rows; the rows are merged
into the experiment's summary.json by their key (a new run of the same mix / treatment / F replaces
the old row, every other row stays), and the per-run CSVs are copied next to it under runs/. The
tables made from the summaries are each experiment's figures module; lab/figures.py puts them in the docs.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "docs" / "data"

Row = dict[str, Any]


class FiguresError(Exception):
    """A summary that cannot be read or written, or a block that cannot be placed."""


def atomic_write(path: Path, text: str) -> None:
    """Write through a temporary file and rename, so a failure never leaves half a summary."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load(experiment: str, data: Path = DATA) -> dict[str, Any]:
    """The experiment's summary ({"rows": []} when none was published yet)."""
    path = data / experiment / "summary.json"
    if not path.exists():
        return {"rows": []}
    try:
        summary = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise FiguresError(f"{path}: not JSON ({exc})") from None
    if not isinstance(summary, dict) or not isinstance(summary.get("rows"), list):
        raise FiguresError(f"{path}: expected an object with a 'rows' list")
    return summary


def publish(
    experiment: str,
    rows: Sequence[Row],
    *,
    key: Sequence[str],
    runs: Iterable[tuple[Path, str]] = (),
    meta: Mapping[str, Any] | None = None,
    data: Path = DATA,
) -> Path:
    """Merge ``rows`` into docs/data/<experiment>/summary.json; returns the summary's path.

    A row replaces the published row with the same values of ``key``; ``runs`` are (CSV path, name under
    runs/) pairs copied beside the summary; ``meta`` is stored at the summary's top level."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", experiment):
        raise FiguresError(f"experiment name {experiment!r}: use lower-case letters, digits, - and _")
    for row in rows:
        missing = [k for k in key if k not in row]
        if missing:
            raise FiguresError(f"{experiment}: row without its key field(s) {missing}: {row}")
    summary = load(experiment, data)

    def ident(row: Row) -> str:
        return json.dumps([row.get(k) for k in key])

    fresh = {ident(r) for r in rows}
    merged = [r for r in summary["rows"] if ident(r) not in fresh] + [dict(r) for r in rows]
    summary["rows"] = sorted(merged, key=lambda r: json.dumps([r.get(k) for k in key]))
    summary.update(meta or {})
    summary["key"] = list(key)
    summary["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    target = data / experiment
    for src, name in runs:
        dest = target / "runs" / name
        if not dest.resolve().is_relative_to((target / "runs").resolve()):
            raise FiguresError(f"run name {name!r} leaves {target / 'runs'}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
    path = target / "summary.json"
    atomic_write(path, json.dumps(summary, indent=1, sort_keys=True) + "\n")
    return path


# --- table cells ----------------------------------------------------------------------------------


def spread_cell(values: Sequence[float | None], scale: float = 1.0, fmt: str = ".0f", unit: str = "") -> str:
    """A table cell: the mean of ``values`` (times ``scale``) and, for more than one, their range."""
    vals = [v * scale for v in values if v is not None and not math.isnan(v)]
    if not vals:
        return "-"
    text = f"{statistics.fmean(vals):{fmt}}{unit}"
    return text + (f" ({min(vals):{fmt}}..{max(vals):{fmt}})" if len(vals) > 1 else "")
