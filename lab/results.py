"""Experiment results: per-iteration records, summary tables, CSV and a timeline plot of each job's
communication phases."""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path


@dataclass(frozen=True)
class IterationRecord:
    scenario: str
    job: int
    worker: str
    iteration: int
    start: float  # seconds since the scenario started
    comm_start: float
    comm_end: float
    end: float
    bytes: int
    retransmits: int = 0
    zero_filled: int = 0
    # When the push was acknowledged: comm_start..push_end is the push (worker -> PS direction),
    # push_end..comm_end the pull (PS -> worker). None in records that do not say.
    push_end: float | None = None
    accuracy: float | None = None  # validation accuracy after this iteration, where the job measured it
    lost_chunks: int = 0  # chunks of this iteration's push the PS zero-filled (real training)
    mltcp_f: str = ""  # "slope:intercept" the worker's sender used for this iteration's push ("" without MLTCP)
    sent_bytes: int | None = None  # of ``bytes``, what the push handed to the network (less withheld chunks)
    pull_sent_bytes: int | None = None  # what the pull brought over the network (less chunks the PS left out)
    # the push's chunks, those withheld and those sent at fp16 or int8 (mlfc.policy.precision); the rest fp32
    chunks: int = 0
    withheld_chunks: int = 0
    fp16_chunks: int = 0
    int8_chunks: int = 0

    @property
    def duration(self) -> float:
        return self.end - self.start

    def phases(self) -> dict[str, tuple[float, float]]:
        """Communication spans by link direction; one undirected span when the split is unknown."""
        if self.push_end is None:
            return {"comm": (self.comm_start, self.comm_end)}
        return {"push": (self.comm_start, self.push_end), "pull": (self.push_end, self.comm_end)}


@dataclass(frozen=True)
class JobSummary:
    job: int
    iterations: int
    avg: float
    p99: float
    comm_avg: float
    push_avg: float = math.nan  # NaN when the records do not split push from pull


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def summarise(records: Iterable[IterationRecord], skip_warmup: int = 1) -> tuple[list[JobSummary], JobSummary]:
    """Per job and overall; the first ``skip_warmup`` iterations of each job are left out (connection
    set-up, learning bytes per iteration)."""
    by_job: dict[int, list[IterationRecord]] = {}
    for r in records:
        by_job.setdefault(r.job, []).append(r)
    per_job, all_durations, all_comm = [], [], []
    for job in sorted(by_job):
        rs = [r for r in by_job[job] if r.iteration >= skip_warmup] or by_job[job]
        durations = [r.duration for r in rs]
        comm = [r.comm_end - r.comm_start for r in rs]
        push = [r.push_end - r.comm_start for r in rs if r.push_end is not None]
        all_durations += durations
        all_comm += comm
        per_job.append(
            JobSummary(
                job,
                len(rs),
                sum(durations) / len(rs),
                percentile(durations, 99),
                sum(comm) / len(rs),
                sum(push) / len(push) if len(push) == len(rs) else math.nan,
            )
        )
    n = len(all_durations)
    overall = JobSummary(
        0,
        n,
        sum(all_durations) / n if n else math.nan,
        percentile(all_durations, 99),
        sum(all_comm) / n if n else math.nan,
    )
    return per_job, overall


CHUNK_COUNTS = ("chunks", "withheld_chunks", "fp16_chunks", "int8_chunks")  # IterationRecord's, 0 if unsaid


def write_csv(path: Path, records: Sequence[IterationRecord]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=[fl.name for fl in fields(IterationRecord)])
        w.writeheader()
        for r in records:
            w.writerow(asdict(r))


def read_csv(path: Path) -> list[IterationRecord]:
    out = []
    with path.open() as f:
        for row in csv.DictReader(f):
            out.append(
                IterationRecord(
                    scenario=row["scenario"],
                    job=int(row["job"]),
                    worker=row["worker"],
                    iteration=int(row["iteration"]),
                    start=float(row["start"]),
                    comm_start=float(row["comm_start"]),
                    comm_end=float(row["comm_end"]),
                    end=float(row["end"]),
                    bytes=int(row["bytes"]),
                    retransmits=int(row["retransmits"]),
                    zero_filled=int(row["zero_filled"]),
                    push_end=float(row["push_end"]) if row.get("push_end") else None,
                    accuracy=float(row["accuracy"]) if row.get("accuracy") else None,
                    lost_chunks=int(row.get("lost_chunks") or 0),
                    mltcp_f=row.get("mltcp_f") or "",
                    sent_bytes=int(row["sent_bytes"]) if row.get("sent_bytes") else None,
                    pull_sent_bytes=int(row["pull_sent_bytes"]) if row.get("pull_sent_bytes") else None,
                    **{k: int(row.get(k) or 0) for k in CHUNK_COUNTS},
                )
            )
    return out


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    def cell(v: object) -> str:
        if isinstance(v, float):
            return "-" if math.isnan(v) else f"{v:.3f}"
        return str(v)

    text = [[cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in text)) if text else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))
    sep = "  ".join("-" * w for w in widths)
    body = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in text]
    return "\n".join([line, sep, *body])


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def plot_timeline(
    path: Path, records: Sequence[IterationRecord], title: str, marks: Sequence[tuple[str, float]] = ()
) -> None:
    """One row per worker: a bar for every communication phase (push solid, pull pale), so
    interleaving is visible; ``marks``: labelled vertical lines (e.g. when the coordinator's fallback engaged)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workers = sorted({(r.job, r.worker) for r in records})
    fig, ax = plt.subplots(figsize=(11, 0.6 * len(workers) + 1.6))
    colours = plt.get_cmap("tab10")
    for row, (job, worker) in enumerate(workers):
        mine = [r for r in records if r.worker == worker and r.job == job]
        colour = colours((job - 1) % 10)
        for phase, alpha in (("comm", 1.0), ("push", 1.0), ("pull", 0.45)):
            spans = [(a, b - a) for r in mine if phase in (ph := r.phases()) for a, b in [ph[phase]]]
            if spans:
                name = f"job {job}" if phase != "pull" else f"job {job} pull"
                ax.broken_barh(spans, (row - 0.35, 0.7), color=colour, alpha=alpha, label=name)
    for name, t in marks:
        ax.axvline(t, color="black", linestyle="--", linewidth=1.0)
        ax.annotate(name, (t, len(workers) - 0.5), xytext=(3, -10), textcoords="offset points", fontsize="small")
    ax.set_yticks(range(len(workers)), [f"job {j} {w}" for j, w in workers])
    ax.set_xlabel("time (s)")
    ax.set_title(title)
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    ax.legend(unique.values(), unique.keys(), loc="upper right", fontsize="small")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
