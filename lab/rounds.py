"""Repeated rounds of a treatment, and the table every experiment prints of them.

A row is one treatment (or one sweep point) with one result per round. Speed-ups compare a row's mean
average iteration time with its baseline row's; each round's share of the ideal gain is listed as
mean (min..max), so a reader sees how many rounds a figure rests on and how far they spread. Every row
also states the run-validity figures (lab/validity.py): the pushes' link utilisation and the CPU use.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from mlfc.lab.results import JobSummary, format_table
from mlfc.lab.scenarios import Treatment, share_of_ideal_gain
from mlfc.lab.stack import StackRun


@dataclass
class TreatmentResult:
    treatment: Treatment
    run: StackRun
    per_job: list[JobSummary]
    overall: JobSummary
    interleaved_at: int | None
    fallback_at: float | None = None  # seconds after the run's start the coordinator's fallback first engaged

    @property
    def avg(self) -> float:
        return self.overall.avg

    @property
    def p99(self) -> float:
        return self.overall.p99


@dataclass
class Rounds:
    label: str
    treatment: Treatment
    results: list[TreatmentResult] = field(default_factory=list)  # one per round

    @property
    def avg(self) -> float:
        return statistics.fmean(r.avg for r in self.results)

    @property
    def p99(self) -> float:
        return statistics.fmean(r.p99 for r in self.results)

    def gains(self, base_avg: float, ideal_avg: float) -> list[float]:
        return [share_of_ideal_gain(base_avg, r.avg, ideal_avg) for r in self.results]

    def speedups(self, base: Rounds) -> list[float]:
        return [base.avg / r.avg for r in self.results]

    def p99_speedups(self, base: Rounds) -> list[float]:
        return [base.p99 / r.p99 for r in self.results]

    def interleaved(self) -> str:
        return "/".join("-" if r.interleaved_at is None else str(r.interleaved_at) for r in self.results)

    def utilisation(self) -> str:
        u = [r.run.utilisation for r in self.results if r.run is not None and not math.isnan(r.run.utilisation)]
        return f"{100 * min(u):.0f} %" if u else "-"

    def cpu(self) -> str:
        c = [r.run.cpu.mean_busy for r in self.results if r.run is not None and r.run.cpu is not None]
        return f"{statistics.fmean(c):.0f} %" if c else "-"


def spread(values: Sequence[float], scale: float = 1.0, fmt: str = ".0f", unit: str = "") -> str:
    """mean (min..max) of the finite values; "-" when there are none."""
    vals = [v * scale for v in values if not math.isnan(v)]
    if not vals:
        return "-"
    text = f"{statistics.fmean(vals):{fmt}}{unit}"
    if len(vals) > 1:
        text += f" ({min(vals):{fmt}}..{max(vals):{fmt}})"
    return text


def rounds_table(
    rows: Sequence[Rounds], ideal_avg: float, baseline: dict[str, Rounds] | None = None, ideal_p99: float | None = None
) -> str:
    """One line per row. ``baseline`` maps a treatment name to the row it is compared with (default:
    the first row). With ``ideal_p99`` (the slowest job's ideal iteration: with perfect interleaving every
    iteration takes its ideal time) a column gives the ideal p99 speed-up, the tail gain there is to get."""
    out = []
    for row in rows:
        base = (baseline or {}).get(row.treatment.baseline) or rows[0]
        gain = "-" if row is base else spread(row.gains(base.avg, ideal_avg), 100, unit=" %")
        out.append(
            [
                row.label,
                base.label,
                len(row.results),
                row.avg,
                row.p99,
                spread(row.speedups(base), fmt=".2f"),
                spread(row.p99_speedups(base), fmt=".2f"),
                base.avg / ideal_avg,
                *([] if ideal_p99 is None else [base.p99 / ideal_p99]),
                gain,
                row.interleaved(),
                row.utilisation(),
                row.cpu(),
            ]
        )
    headers = ["treatment", "vs", "rounds", "avg s", "p99 s", "avg speed-up", "p99 speed-up", "ideal",
               *([] if ideal_p99 is None else ["ideal p99"]),
               "of ideal gain", "interleaved from iter", "link use (min)", "CPU"]  # fmt: skip
    return format_table(headers, out)
