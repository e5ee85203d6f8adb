"""The gloo experiment's rows (lab/mltcp/gloo.py): docs/data/mltcp and mltcp-regime rows of its MLTCP
treatments, their verdicts and the per-round CSV."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path

from mlfc.lab.mltcp import rows
from mlfc.lab.mltcp.rows import Cell

# ---- rows ---------------------------------------------------------------------------------------


def mix_name(jobs: int) -> str:
    return f"ddp-{jobs}"


def published_rows(cells: Sequence[Cell], command: str) -> list[tuple[dict, list[tuple[Path, str]]]]:
    """docs/data/mltcp rows (dataplane "real", mix ddp-N) of the MLTCP treatments with their runs' CSVs."""

    def extra(c: Cell, base: Cell) -> dict:
        return {
            "connections_per_job": [statistics.fmean(r.connections.values()) for r in c.runs],
            "workload": "PyTorch DDP, gloo, CPU, 2 ranks per job (MLP, generated data)",
        }

    return rows.published_rows(cells, command, dataplane="real", jobs=lambda c: int(c.mix.rsplit("-", 1)[1]),
                               extra=extra)  # fmt: skip


def regime_rows(cells: Sequence[Cell], command: str) -> list[dict]:
    """docs/data/mltcp-regime rows (platform "kernel-ddp") of the MLTCP treatments."""
    return rows.regime_rows(cells, command, platform="kernel-ddp")


def verdicts(cells: Sequence[Cell]) -> list[str]:
    """Each MLTCP row with a target, against lab/mltcp/figures.py's table (lab/mltcp/rows.py)."""
    return rows.verdicts([row for row, _ in published_rows(cells, "")])


# gloo's own columns of rounds.csv (lab/mltcp/rows.py writes the rest)
ROUND_COUNTS: rows.RoundCounts = (
    ("connections", lambda r: sum(r.connections.values())),
    ("loss_events", lambda r: r.loss_events),
    ("ce_marks", lambda r: r.marks),
    ("retransmits", lambda r: r.retransmits),
    ("signals_per_phase", lambda r: f"{r.signals_per_phase:.3f}"),
)
