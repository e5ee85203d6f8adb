"""An e2e run's regime figures (issue 45): the congestion signals its flows saw, and its point on the MLTCP
regime curve (docs/data/mltcp-regime, lab/mltcp/regime.py)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from mlfc.lab.mltcp import regime as regime_curve
from mlfc.lab.stack import StackRun


def signals_per_phase(run: StackRun) -> float:
    """Congestion signals (the switches' ECN marks + drops) per flow per communication phase: every record is
    one worker's iteration, whose push and pull are one phase each of two flows."""
    signals = sum(c.get("ecn_marks", 0) + c.get("drops", 0) for c in run.counters.values())
    return signals / (2 * len(run.records)) if run.records else math.nan


def mean_signals(runs: Sequence[StackRun]) -> float | None:
    """signals_per_phase averaged over rounds (None when no run had records)."""
    finite = [v for v in map(signals_per_phase, runs) if not math.isnan(v)]
    return round(sum(finite) / len(finite), 3) if finite else None


def regime_row(record: dict, platform: str) -> dict:
    """The regime curve's row (docs/data/mltcp-regime) of a published MLTCP row."""
    return regime_curve.row(
        platform=platform,
        mix=record["mix"],
        cc=record["cc"],
        treatment=record["treatment"],
        f=record["f"],
        queue_bytes=record["queue_bytes"],
        mark_threshold_bytes=record["mark_threshold_bytes"],
        link_bps=record["link_bps"],
        shares=record["share_of_ideal"],
        avg_over_ideal=record["avg_over_ideal"],
        baseline_avg_over_ideal=record["baseline_avg_over_ideal"],
        interleaved_from=record["interleaved_from"],
        signals=record["signals_per_round"],
        baseline_signals=record["baseline_signals_per_round"],
        command=record["command"],
    )
