"""The hyper-parameter search's per-round figures and its published rows (docs/data/hpsearch, issue 26 item 6).

* ``top_periods``: who held MAIF's top class (rank 1) when, from the coordinator's sampled decisions.
* ``top_job_slowdown``: the job that held the top class longest, its mean iteration time while it held it
  over its iteration time alone (the target: within 1.3x); ``job_slowdown`` the same ratio over a whole
  run (FIFO's figure for the same job).
* ``less_than_fifo``: per round, how much less time a treatment took than the same round's FIFO.
* ``make_row``: one row of docs/data/hpsearch/summary.json; ``check_row`` what the renderer relies on.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mlfc.lab.decisions import DecisionSample
from mlfc.lab.results import IterationRecord
from mlfc.lab.tta import reduction

# The lab's treatment names -> the names the schema uses.
PUBLISHED = {"baseline": "fifo", "maif": "maif-sum", "maif-search": "maif-search", "maif-potential": "maif-potential",
             "maif-elimination": "maif-elimination", "maif-chance": "maif-chance"}  # fmt: skip
KEY = ("task", "dataplane", "framework", "treatment")
SCHEMA = (
    "issue 26: one row per task, dataplane, framework and treatment; time_to_090/095 (s), less_than_fifo_095 "
    "(fraction, against the same round's FIFO) and top_job_slowdown (iteration time over alone) per round"
)
FIELDS: dict[str, type | tuple[type, ...]] = {
    "task": str,
    "dataplane": str,
    "configurations": int,
    "framework": str,
    "treatment": str,
    "rounds": int,
    "time_to_090": list,
    "time_to_095": list,
    "less_than_fifo_095": list,
    "top_job_slowdown": list,
    "command": str,
}


def top_periods(samples: Iterable[DecisionSample], t0: float = 0.0) -> list[tuple[int, float, float]]:
    """(job, from, to) for every stretch a job held the top class alone (the highest class of its decision,
    no other job in it: what strict priority makes fast; the rank-1 job under the objectives that give the
    top class to one job), on the clock ``sample.time - t0``; a decision whose top class is shared has no
    top job and ends the stretch. The last stretch lasts to infinity (until the run's end, which the
    samples do not know)."""
    by_time: dict[float, list[DecisionSample]] = {}
    for s in samples:
        by_time.setdefault(s.time - t0, []).append(s)
    out: list[tuple[int, float, float]] = []
    for t, group in sorted(by_time.items()):
        high = max(s.priority for s in group)
        top = [s.job for s in group if s.priority == high]
        job = top[0] if len(top) == 1 else None
        if out and out[-1][0] == job:
            continue
        if out:
            out[-1] = (out[-1][0], out[-1][1], t)
        out.append((job, t, math.inf))
    return [p for p in out if p[0] is not None]


def _mean_duration(records: Iterable[IterationRecord], job: int, keep=lambda r: True, skip: int = 1) -> float:
    ds = [r.duration for r in records if r.job == job and r.iteration >= skip and keep(r)]
    return statistics.fmean(ds) if ds else math.nan


def job_slowdown(records: Sequence[IterationRecord], job: int, alone_s: float) -> float:
    """The job's mean iteration time over the run (the first iteration left out, as alone) over ``alone_s``."""
    if not alone_s > 0:
        return math.nan
    return _mean_duration(records, job) / alone_s


def top_job_slowdown(
    records: Sequence[IterationRecord], periods: Sequence[tuple[int, float, float]], alone: Mapping[int, float]
) -> tuple[int | None, float]:
    """(the job that held the top class longest within the run, its mean iteration time over the
    iterations it ran entirely in the top class (began and ended within one stretch), divided by its time
    alone); (None, NaN) without a top job. An iteration that began on top and ended after a demotion is
    not counted: until 2026-12-03 it was, and one such iteration (job 10 of maif round 1 that day: 5.6 s on
    top, then 185 s waiting in a lower class) made a job that ran at 1.0x while on top read 3.07x."""
    if not records or not periods:
        return None, math.nan
    lo, hi = min(r.start for r in records), max(r.end for r in records)
    held: dict[int, float] = {}
    for job, a, b in periods:
        held[job] = held.get(job, 0.0) + max(0.0, min(b, hi) - max(a, lo))
    job = max(held, key=lambda j: (held[j], -j))
    mean = _mean_duration(records, job, _on_top(periods, job))
    base = alone.get(job, math.nan)
    return job, mean / base if base > 0 else math.nan


PHASES = ("compute", "push", "pull")


def phase_means(records: Iterable[IterationRecord], job: int, keep=lambda r: True, skip: int = 1) -> dict[str, float]:
    """The job's mean seconds per iteration in each phase: compute (start to the push), push (until the PS
    acknowledged it), pull (until the new parameters were in: the PS's wait for the job's slowest worker,
    its update and the transfer back); NaN where the records do not split push from pull."""
    rs = [r for r in records if r.job == job and r.iteration >= skip and keep(r)]
    split = [r for r in rs if r.push_end is not None]
    out = {"compute": statistics.fmean(r.comm_start - r.start for r in rs) if rs else math.nan}
    out["push"] = statistics.fmean(r.push_end - r.comm_start for r in split) if split else math.nan
    out["pull"] = statistics.fmean(r.comm_end - r.push_end for r in split) if split else math.nan
    return out


def top_job_phases(
    records: Sequence[IterationRecord], periods: Sequence[tuple[int, float, float]], job: int
) -> dict[str, float]:
    """``phase_means`` of ``job`` over the iterations it ran entirely in the top class."""
    return phase_means(records, job, _on_top(periods, job))


def _on_top(periods: Sequence[tuple[int, float, float]], job: int):  # type: ignore[no-untyped-def]
    """Whether a record of ``job`` began and ended within one of its stretches in the top class."""
    mine = [(a, b) for j, a, b in periods if j == job]
    return lambda r: any(a <= r.start and r.end <= b for a, b in mine)


def less_than_fifo(fifo: Mapping[int, float], mine: Mapping[int, float]) -> list[float]:
    """Per round of ``mine`` (round -> seconds), in round order: 1 - mine / the same round's FIFO (NaN when
    either is missing or did not reach the target)."""
    return [reduction(fifo.get(r, math.nan), mine[r]) for r in sorted(mine)]


def published_number(v: float, digits: int = 4) -> float | None:
    """A figure as summary.json holds it: rounded, NaN as null."""
    return round(v, digits) if v is not None and math.isfinite(v) else None


def make_row(
    *,
    task: str,
    dataplane: str,
    configurations: int,
    treatment: str,
    tta: Mapping[int, Mapping[float, float]],
    fifo: Mapping[int, Mapping[float, float]],
    slowdown: Mapping[int, float],
    command: str,
    framework: str = "mlfc-ps",
    **extra: Any,
) -> dict[str, Any]:
    """One summary.json row: ``tta`` round -> fraction of A* -> seconds (this treatment), ``fifo`` the same
    of the same rounds' FIFO runs, ``slowdown`` round -> top_job_slowdown. NaN is written as null."""
    row = {
        "task": task,
        "dataplane": dataplane,
        "configurations": configurations,
        "framework": framework,
        "treatment": PUBLISHED.get(treatment, treatment),
        **time_fields(tta, fifo),
        "top_job_slowdown": [published_number(slowdown.get(r, math.nan)) for r in sorted(tta)],
        "command": command,
    }
    row.update(extra)
    check_row(row)
    return row


def time_fields(tta: Mapping[int, Mapping[float, float]], fifo: Mapping[int, Mapping[float, float]]) -> dict[str, Any]:
    """A row's rounds and per round its time_to_090/095 and less_than_fifo_095 (``tta`` round -> fraction of
    A* -> seconds, ``fifo`` the same rounds' FIFO runs; NaN as null): what every time-to-accuracy row holds."""
    rounds = sorted(tta)
    return {
        "rounds": len(rounds),
        "time_to_090": [published_number(tta[r][0.90], 3) for r in rounds],
        "time_to_095": [published_number(tta[r][0.95], 3) for r in rounds],
        "less_than_fifo_095": [
            published_number(v)
            for v in less_than_fifo({r: f[0.95] for r, f in fifo.items()}, {r: tta[r][0.95] for r in rounds})
        ],
    }


def check_row(row: Mapping[str, Any]) -> None:
    """Raise ValueError unless ``row`` has the schema's fields, of their types, a value per round."""
    check_fields("hpsearch", row, FIELDS, ("time_to_090", "time_to_095", "less_than_fifo_095", "top_job_slowdown"))


def check_fields(
    experiment: str, row: Mapping[str, Any], fields: Mapping[str, type | tuple[type, ...]], per_round: Sequence[str]
) -> None:
    """Raise ValueError unless ``row`` has ``fields`` (name -> type; a bool is no int), and each ``per_round``
    field a number or null per round."""
    for name, kind in fields.items():
        value = row.get(name)
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            raise ValueError(f"{experiment} row: {name} missing or not {kind}: {value!r}")
    for name in per_round:
        values = row[name]
        if len(values) != row["rounds"] or not all(v is None or isinstance(v, int | float) for v in values):
            raise ValueError(f"{experiment} row: {name} needs {row['rounds']} numbers or nulls, has {values!r}")
