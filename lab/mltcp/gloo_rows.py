"""The gloo experiment's rows (lab/mltcp/gloo.py): docs/data/mltcp and mltcp-regime rows of its MLTCP
treatments, their verdicts and the per-round CSV."""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Sequence
from pathlib import Path

from mlfc.lab.mltcp import rows
from mlfc.lab.mltcp.rows import Cell
from mlfc.lab.scenarios import share_of_ideal_gain

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


def write_round_csv(path: Path, cells: Sequence[Cell]) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["queue_bytes", "mark_threshold_bytes", "mix", "treatment", "round", "avg_s", "p99_s",
                    "baseline_avg_s", "ideal_avg_s", "speedup", "ideal_speedup", "share_of_ideal_gain",
                    "interleaved_from", "connections", "loss_events", "ce_marks", "retransmits",
                    "signals_per_phase"])  # fmt: skip
        for c in cells:
            for k, (r, b, i) in enumerate(zip(c.runs, c.base_avgs, c.ideal_avgs, strict=True)):
                share = share_of_ideal_gain(b, r.avg, i)
                w.writerow([c.queue_bytes, "" if c.mark_threshold_bytes is None else c.mark_threshold_bytes,
                            c.mix, c.treatment, k + 1, f"{r.avg:.4f}", f"{r.p99:.4f}", f"{b:.4f}", f"{i:.4f}",
                            f"{b / r.avg:.4f}", f"{b / i:.4f}", "" if math.isnan(share) else f"{share:.4f}",
                            "" if r.interleaved_at is None else r.interleaved_at, sum(r.connections.values()),
                            r.loss_events, r.marks, r.retransmits, f"{r.signals_per_phase:.3f}"])  # fmt: skip
