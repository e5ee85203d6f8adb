"""An e2e run's regime figures (issue 45): the congestion signals its flows saw, and its point on the MLTCP
regime curve (docs/data/mltcp-regime, lab/mltcp/regime.py)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from mlfc.lab.mltcp import regime as regime_curve
from mlfc.lab.scenarios import Regime, Treatment
from mlfc.lab.stack import StackRun


def run_names(
    mix: str,
    plane: str,
    ack_delay: float | None,
    regime: Regime,
    treatment: Treatment,
    f: str,
    runs: Sequence[Path],
    baseline_runs: Sequence[Path],
) -> list[tuple[Path, str]]:
    """The names under docs/data/<experiment>/runs of a row's per-run CSVs and its baseline's: one folder per
    mix, dataplane, ACK delay and regime, files named by the treatment and its F, so rows measured in other
    regimes or with another F never overwrite each other's runs."""
    folder = f"{mix}/{plane}{'' if ack_delay is None else f'-ackdelay{ack_delay:g}'}{regime.tag()}"
    name = f"{treatment.name}@{f}" if treatment.mltcp else treatment.name
    name = name.replace(":", "_")
    out = [(p, f"{folder}/{name}-r{i + 1}.csv") for i, p in enumerate(runs)]
    out += [(p, f"{folder}/{treatment.baseline}-vs-{name}-r{i + 1}.csv") for i, p in enumerate(baseline_runs)]
    return out


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
