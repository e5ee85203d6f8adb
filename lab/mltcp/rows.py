"""What the MLTCP experiments (kernel TCP: ``kernel``; unmodified DDP: ``gloo``) measure per mix and treatment,
and how a cell of rounds becomes a docs/data/mltcp row and a docs/data/mltcp-regime row: written once for both.

A run result is anything with ``avg``, ``p99``, ``interleaved_at``, ``signals_per_phase`` and ``retransmits``
(lab.mltcp.kernel_net.RunResult, lab.mltcp.gloo_ddp.DdpRun).
"""

from __future__ import annotations

import csv
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from mlfc.lab.mltcp import regime
from mlfc.lab.mltcp.figures import mltcp_meets, mltcp_target
from mlfc.lab.mltcp.kernel_net import DEFAULT_BUFFER, DEFAULT_RATE_MBPS, FAMILIES
from mlfc.lab.scenarios import share_of_ideal_gain


class Run(Protocol):
    @property
    def avg(self) -> float: ...

    @property
    def p99(self) -> float: ...

    @property
    def interleaved_at(self) -> int | None: ...

    @property
    def signals_per_phase(self) -> float: ...

    @property
    def retransmits(self) -> int: ...


@dataclass
class Cell:
    """One regime, mix and treatment: a result per round, with the round's ideal and baseline."""

    mix: str
    treatment: str  # "reno", "mltcp_reno 2:0.5", ...
    family: str
    runs: list[Any] = field(default_factory=list)  # Run
    ideal_avgs: list[float] = field(default_factory=list)
    ideal_p99s: list[float] = field(default_factory=list)  # the slowest job's ideal time, per round
    base_avgs: list[float] = field(default_factory=list)
    csvs: list[Path] = field(default_factory=list)  # each round's per-iteration records
    queue_bytes: int = DEFAULT_BUFFER
    mark_threshold_bytes: int | None = None
    rate_bps: float = DEFAULT_RATE_MBPS * 1e6

    @property
    def mltcp(self) -> bool:
        return self.treatment not in FAMILIES

    @property
    def algorithm(self) -> str:
        """The treatment without F: 'mltcp_reno', 'mltcp_reno+job' (one progress per job), 'reno'."""
        return self.treatment.split(" ", 1)[0]

    @property
    def f(self) -> str:
        """The MLTCP treatment's F in its text form ('' for the plain algorithm)."""
        return self.treatment.split(" ", 1)[1] if self.mltcp else ""

    def shares(self) -> list[float]:
        return [
            share_of_ideal_gain(b, r.avg, i) for b, r, i in zip(self.base_avgs, self.runs, self.ideal_avgs, strict=True)
        ]

    def pooled_share(self) -> float:
        """The share of the ideal gain of the round-averaged times: robust when one round's baseline
        happened to interleave by itself (that round's own share divides by almost nothing)."""
        mean = statistics.fmean
        return share_of_ideal_gain(mean(self.base_avgs), mean(r.avg for r in self.runs), mean(self.ideal_avgs))

    def ideal_speedups(self) -> list[float]:
        return [b / i for b, i in zip(self.base_avgs, self.ideal_avgs, strict=True)]

    def avg_over_ideal(self) -> list[float]:
        return [r.avg / i for r, i in zip(self.runs, self.ideal_avgs, strict=True)]


def regime_label(queue_bytes: int, mark_threshold_bytes: int | None) -> str:
    return f"q{queue_bytes}" + ("" if mark_threshold_bytes is None else f"-k{mark_threshold_bytes}")


def pairs(cells: Sequence[Cell]) -> list[tuple[Cell, Cell]]:
    """(MLTCP cell, its plain cell in the same regime, mix and rounds) for every MLTCP treatment."""
    by_key = {(c.queue_bytes, c.mark_threshold_bytes, c.mix, c.treatment): c for c in cells}
    return [(c, by_key[(c.queue_bytes, c.mark_threshold_bytes, c.mix, c.family)]) for c in cells if c.mltcp]


def mean_range(values: Sequence[float], fmt: str = "{:.3f}", pct: bool = False) -> str:
    vals = [v for v in values if not math.isnan(v)]
    if not vals:
        return "-"
    k = 100 if pct else 1
    mean, lo, hi = statistics.fmean(vals) * k, min(vals) * k, max(vals) * k
    if pct:
        return f"{mean:.0f} % ({lo:.0f}..{hi:.0f})"
    return f"{fmt.format(mean)} ({fmt.format(lo)}..{fmt.format(hi)})"


HEADERS = ["regime", "mix", "treatment", "rounds", "avg s", "p99 s", "speed-up", "ideal", "of ideal gain", "pooled",
           "interleaved from iter", "signals/phase"]  # fmt: skip


def summary_rows(cells: Sequence[Cell]) -> list[list[object]]:
    """The console and summary.md table, one line per cell."""
    rows = []
    for c in cells:
        rows.append([
            regime_label(c.queue_bytes, c.mark_threshold_bytes), c.mix, c.treatment, len(c.runs),
            mean_range([r.avg for r in c.runs]), mean_range([r.p99 for r in c.runs]),
            mean_range([b / r.avg for b, r in zip(c.base_avgs, c.runs, strict=True)]),
            mean_range(c.ideal_speedups()),
            mean_range(c.shares(), pct=True) if c.mltcp else "-",
            f"{c.pooled_share():.0%}" if c.mltcp and not math.isnan(c.pooled_share()) else "-",
            "/".join("-" if r.interleaved_at is None else str(r.interleaved_at) for r in c.runs),
            mean_range([r.signals_per_phase for r in c.runs], fmt="{:.1f}"),
        ])  # fmt: skip
    return rows


def published_rows(
    cells: Sequence[Cell],
    command: str,
    *,
    dataplane: str,
    jobs: Callable[[Cell], int],
    extra: Callable[[Cell, Cell], dict[str, Any]] = lambda c, base: {},
) -> list[tuple[dict, list[tuple[Path, str]]]]:
    """docs/data/mltcp rows (issue 24's schema with issue 45's regime fields) of the MLTCP treatments, each with
    its own and its baseline's per-round CSVs (same rounds), named under runs/<mix>/<dataplane>-<regime>/."""
    out = []
    mean = statistics.fmean
    for c, base in pairs(cells):
        b_avg, b_p99 = mean(r.avg for r in base.runs), mean(r.p99 for r in base.runs)
        row = {
            "mix": c.mix,
            "cc": c.family,
            "dataplane": dataplane,
            "treatment": c.algorithm,
            "jobs": jobs(c),
            "rounds": len(c.runs),
            "share_of_ideal": [None if math.isnan(v) else round(v, 4) for v in c.shares()],
            "avg_speedup": round(b_avg / mean(r.avg for r in c.runs), 4),
            "p99_speedup": round(b_p99 / mean(r.p99 for r in c.runs), 4),
            "ideal_avg": round(b_avg / mean(c.ideal_avgs), 4),
            "ideal_p99": round(b_p99 / mean(c.ideal_p99s), 4),
            "interleaved_from": [r.interleaved_at for r in c.runs],
            "f": c.f,
            "command": command,
            "baseline_avg_s": round(b_avg, 4),
            "avg_s": round(mean(r.avg for r in c.runs), 4),
            "pooled_share": None if math.isnan(c.pooled_share()) else round(c.pooled_share(), 4),
            "retransmits": [r.retransmits for r in c.runs],
            "baseline_retransmits": [r.retransmits for r in base.runs],
            "measured": time.strftime("%Y-%m-%d"),
            "ack_delay": None,
            "link_bps": c.rate_bps,
            "queue_bytes": c.queue_bytes,
            "mark_threshold_bytes": c.mark_threshold_bytes,
            "signals_per_phase": round(mean(r.signals_per_phase for r in c.runs), 3),
            "baseline_signals_per_phase": round(mean(r.signals_per_phase for r in base.runs), 3),
            "avg_over_ideal": [round(v, 4) for v in c.avg_over_ideal()],
            **extra(c, base),
        }
        tag = f"{c.mix}/{dataplane}-{regime_label(c.queue_bytes, c.mark_threshold_bytes)}"
        name = c.algorithm
        runs = [(p, f"{tag}/{name}@{c.f.replace(':', '_')}-r{i + 1}.csv") for i, p in enumerate(c.csvs)]
        runs += [(p, f"{tag}/{c.family}-r{i + 1}.csv") for i, p in enumerate(base.csvs)]
        out.append((row, runs))
    return out


def regime_rows(cells: Sequence[Cell], command: str, *, platform: str) -> list[dict]:
    """docs/data/mltcp-regime rows of the MLTCP treatments."""
    return [
        regime.row(
            platform=platform,
            treatment=c.algorithm,
            mix=c.mix,
            cc=c.family,
            f=c.f,
            queue_bytes=c.queue_bytes,
            mark_threshold_bytes=c.mark_threshold_bytes,
            link_bps=c.rate_bps,
            shares=c.shares(),
            avg_over_ideal=c.avg_over_ideal(),
            baseline_avg_over_ideal=base.avg_over_ideal(),
            interleaved_from=[r.interleaved_at for r in c.runs],
            signals=[r.signals_per_phase for r in c.runs],
            baseline_signals=[r.signals_per_phase for r in base.runs],
            command=command,
        )
        for c, base in pairs(cells)
    ]


def verdicts(published: Sequence[dict]) -> list[str]:
    """A line per published row that has a target in lab/mltcp/figures.py's table (the one the docs are generated
    with): mean share of the ideal gain, its range, the pooled share and the verdict."""

    out = []
    for row in published:
        goal = mltcp_target(row)
        if goal == "-":
            continue
        vals = [v for v in row["share_of_ideal"] if v is not None]
        m = statistics.fmean(vals) if vals else math.nan
        pooled = "-" if row["pooled_share"] is None else format(row["pooled_share"], ".0%")
        out.append(
            f"{row['mix']} {row['treatment']} {row['f']}: {m:.0%} of the ideal gain, mean of {len(vals)} rounds "
            f"({min(vals, default=math.nan):.0%}..{max(vals, default=math.nan):.0%}; pooled {pooled}) "
            f"(target {goal.replace('>=', ' >= ')}): {'met' if mltcp_meets(row) else 'MISSED'}"
        )
    return out


# rounds.csv: the columns both experiments write, before each one's own counts of a run
ROUND_COLUMNS = ("queue_bytes", "mark_threshold_bytes", "mix", "treatment", "round", "avg_s", "p99_s",
                 "baseline_avg_s", "ideal_avg_s", "speedup", "ideal_speedup", "share_of_ideal_gain",
                 "interleaved_from")  # fmt: skip

# An experiment's own columns of rounds.csv: a name and the value of a run (written as it comes)
RoundCounts = Sequence[tuple[str, Callable[[Any], object]]]


def write_round_csv(path: Path, cells: Sequence[Cell], counts: RoundCounts) -> None:
    """rounds.csv: a row per cell and round, the round's times against its baseline and ideal, then ``counts``
    (the experiment's own columns: lab.mltcp.kernel.ROUND_COUNTS, lab.mltcp.gloo_rows.ROUND_COUNTS)."""
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([*ROUND_COLUMNS, *(name for name, _ in counts)])
        for c in cells:
            for k, (r, b, i) in enumerate(zip(c.runs, c.base_avgs, c.ideal_avgs, strict=True)):
                share = share_of_ideal_gain(b, r.avg, i)
                writer.writerow([c.queue_bytes, "" if c.mark_threshold_bytes is None else c.mark_threshold_bytes,
                                 c.mix, c.treatment, k + 1, f"{r.avg:.4f}", f"{r.p99:.4f}", f"{b:.4f}", f"{i:.4f}",
                                 f"{b / r.avg:.4f}", f"{b / i:.4f}", "" if math.isnan(share) else f"{share:.4f}",
                                 "" if r.interleaved_at is None else r.interleaved_at,
                                 *(value(r) for _, value in counts)])  # fmt: skip
