"""The study experiment's files: per study its iteration and trial CSVs, accuracy PNG and MAIF's decisions;
per round and pruner the treatments' best accuracy over time; search.csv, summary.md and the published rows."""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from mlfc.lab import decisions as dec
from mlfc.lab.hpsearch.rows import PUBLISHED
from mlfc.lab.search import figures
from mlfc.lab.search import rows as srows
from mlfc.lab.search.study import PRUNER_NAMES, SAMPLER, StudyRun
from mlfc.lab.tta import SMOOTH_WINDOW, plot_accuracy


@dataclass
class Measured:
    """A finished study with the figures the rows are made of."""

    run: StudyRun
    tta: dict[float, float]  # fraction of A* -> seconds after the study's start
    same_as_fifo: int | None = None  # trials proposed as in the same round's FIFO study (None: this is FIFO)

    @property
    def stem(self) -> str:
        return f"{self.run.pruner}/{self.run.treatment}-r{self.run.round + 1}"

    @property
    def pruned(self) -> int:
        return sum(t.state == "pruned" for t in self.run.trials)


def measure(run: StudyRun, targets: Mapping[float, float]) -> Measured:
    return Measured(run, srows.study_time_to_accuracy(run.trials, targets, run.start, SMOOTH_WINDOW))


def write_study(out: Path, m: Measured, targets: Mapping[float, float], title: str) -> None:
    """OUT/<pruner>/<treatment>-rN.csv (iterations with their trial and parameters), -trials.csv, -accuracy.png
    and, under MAIF, -decisions.csv."""
    run = m.run
    stem = out / m.stem
    stem.parent.mkdir(parents=True, exist_ok=True)
    by_job = {t.job: t for t in run.trials}
    rows = [asdict(r) | {"trial": by_job[r.job].number, **by_job[r.job].params, "round": run.round + 1}
            for r in run.records if r.job in by_job]  # fmt: skip
    _write_dicts(stem.parent / f"{stem.name}.csv", rows, ["job", "trial", "round"])
    start = run.start if math.isfinite(run.start) else 0.0
    trials = [{"trial": t.number, "job": t.job, **t.params, "state": t.state,
               "launched_s": round(t.launched - start, 3), "ended_s": round(t.ended - start, 3),
               "evaluations": len(t.points), "value": t.value, "pruned_at": t.pruned_at, "error": t.error}
              for t in run.trials]  # fmt: skip
    _write_dicts(stem.parent / f"{stem.name}-trials.csv", trials, ["trial"])
    labels = {t.job: t.name for t in run.trials}
    lines = {f"{f:.2f} A*": v for f, v in targets.items()}
    plot_accuracy(stem.parent / f"{stem.name}-accuracy.png", run.points(), title, start, lines, labels)
    if run.decisions:
        dec.write_csv(stem.parent / f"{stem.name}-decisions.csv", run.decisions, run.t0_wall + start)


def _write_dicts(path: Path, rows: Sequence[dict], empty_header: list[str]) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else empty_header)
        w.writeheader()
        w.writerows(rows)


def plot_round(path: Path, studies: Sequence[Measured], targets: Mapping[float, float], title: str) -> None:
    """The treatments' best smoothed accuracy over time in one round with one pruner."""
    curves = {PUBLISHED.get(m.run.treatment, m.run.treatment): srows.smoothed_points(m.run.trials, SMOOTH_WINDOW)
              for m in studies}  # fmt: skip
    starts = {PUBLISHED.get(m.run.treatment, m.run.treatment): m.run.start for m in studies}
    plot_accuracy(path, curves, title, starts, {f"{f:.2f} A*": v for f, v in targets.items()})


def say_study(m: Measured) -> str:
    run = m.run
    reached = ", ".join(f"{f:.2f} A* after {v:.1f} s" if math.isfinite(v) else f"{f:.2f} A* not reached"
                        for f, v in m.tta.items())  # fmt: skip
    same = "" if m.same_as_fifo is None else f"; {m.same_as_fifo}/{len(run.trials)} trials proposed as under FIFO"
    return (f"   {run.treatment} {run.pruner} round {run.round + 1}: {reached}; best value {run.best_value:.3f}; "
            f"{m.pruned} pruned{same}" + (f"; errors: {'; '.join(run.errors)}" if run.errors else ""))  # fmt: skip


def write_runs_csv(path: Path, studies: Sequence[Measured]) -> None:
    """search.csv: one row per study."""
    rows = [{"pruner": m.run.pruner, "treatment": m.run.treatment, "round": m.run.round + 1, "seed": m.run.seed,
             **{f"time_to_{round(100 * f):03d}": v for f, v in m.tta.items()}, "best_value": m.run.best_value,
             "trials": len(m.run.trials), "pruned": m.pruned, "same_params_as_fifo": m.same_as_fifo,
             "errors": len(m.run.errors)} for m in studies]  # fmt: skip
    _write_dicts(path, rows, ["pruner", "treatment", "round"])


def published_rows(
    studies: Sequence[Measured], *, task: str, dataplane: str, trials: int, concurrency: int, command: str,
    extra: Mapping[str, object],
) -> list[dict]:  # fmt: skip
    """One row per pruner and treatment (in the order the studies ran)."""
    groups: dict[tuple[str, str], list[Measured]] = {}
    for m in studies:
        groups.setdefault((m.run.pruner, m.run.treatment), []).append(m)
    rows = []
    for (pruner, treatment), mine in groups.items():
        mine = sorted(mine, key=lambda m: m.run.round)
        fifo = {m.run.round: m.tta for m in studies if m.run.pruner == pruner and m.run.treatment == "baseline"}
        rows.append(srows.make_row(
            task=task, dataplane=dataplane, sampler=SAMPLER, pruner=PRUNER_NAMES[pruner], trials=trials,
            concurrency=concurrency, treatment=treatment, tta={m.run.round: m.tta for m in mine}, fifo=fifo,
            best_value={m.run.round: m.run.best_value for m in mine}, pruned={m.run.round: m.pruned for m in mine},
            command=command, seeds=[m.run.seed for m in mine], same_params_as_fifo=[m.same_as_fifo for m in mine],
            errors=[len(m.run.errors) for m in mine],
            best_over_time=[srows.curve_for_json(srows.best_over_time(m.run.trials, m.run.start, SMOOTH_WINDOW))
                            for m in mine],
            **extra,
        ))  # fmt: skip
    return rows


def published_runs(studies: Sequence[Measured], task: str, dataplane: str, out: Path) -> list[tuple[Path, str]]:
    """The per-study files copied beside the summary (docs/data/search/runs/<task>/<dataplane>/...)."""
    files = [out / f"{m.stem}{suffix}" for m in studies for suffix in (".csv", "-trials.csv", "-decisions.csv")]
    prefix = f"{task}/{dataplane}"
    return [(p, f"{prefix}/{p.relative_to(out)}") for p in [*files, out / "reference.json"] if p.exists()]


def summary(rows: Sequence[dict]) -> str:
    """summary.md's table: the rows as the docs would show them, before they are published."""
    return figures.render_search({"rows": list(rows)})
