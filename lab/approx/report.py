"""Approximate flow control's report: its table, accuracy plots, runs CSV, summary.md and the rows it
publishes to docs/data/approx."""

from __future__ import annotations

import csv
import math
import statistics
import time
from pathlib import Path

from mlfc.lab import dataplanes
from mlfc.lab.approx.run import Experiment, Result
from mlfc.lab.approx.variants import FINAL_EVALUATIONS, FRACTION, Variant, stack
from mlfc.lab.results import format_table
from mlfc.lab.rounds import spread
from mlfc.lab.tta import (
    SMOOTH_WINDOW,
    AccuracyPoint,
    plot_accuracy,
    reduction,
)
from mlfc.policy.ecn import MarkingProfile, RedProfile


def table(e: Experiment) -> str:
    rows = []
    for jobs, name in e.groups():
        mine = e.rows(name, jobs)
        full = {(r.round, r.seed): r for r in e.rows("full", jobs)}
        base = [full.get((r.round, r.seed)) for r in mine]
        faster = [reduction(b.mean_tta, r.mean_tta) if b else math.nan for r, b in zip(mine, base, strict=True)]
        below = [100 * (b.final - r.final) if b else math.nan for r, b in zip(mine, base, strict=True)]
        hit = "/".join(f"{sum(not math.isnan(t) for t in r.tta())}" for r in mine)
        rows.append([
            name, jobs, mine[0].variant.describe(), len(mine),
            spread([r.avg for r in mine], fmt=".3f"), spread([r.p99 for r in mine], fmt=".3f"),
            spread([r.mean_tta for r in mine], fmt=".1f"), hit,
            "-" if name == "full" else spread(faster, 100, unit=" %"),
            spread([r.final for r in mine], fmt=".4f"),
            "-" if name == "full" else spread(below, fmt=".2f", unit=" pp"),
            spread([r.bytes_share for r in mine], 100, unit=" %"), " / ".join(sorted({r.precision for r in mine})),
            spread([r.lost_chunks for r in mine]), spread([r.drops for r in mine]),
            spread([r.retransmits for r in mine]),
            f"{100 * min(r.run.run.utilisation for r in mine):.0f} %",
        ])  # fmt: skip
    headers = ["treatment", "jobs", "what", "runs", "avg iter s", "p99 iter s", "to 0.95 A* s", "jobs there",
               "less time than full", "final acc (last 5)", "acc below full", "bytes vs full", "precision",
               "zero-filled chunks", "switch drops", "retransmits", "link use (min)"]  # fmt: skip
    return format_table(headers, rows)


def mean_curve(r: Result) -> list[AccuracyPoint]:
    """The mean accuracy over a run's jobs at each evaluated iteration, at the time the last job had it."""
    by_it: dict[int, list[AccuracyPoint]] = {}
    for p in (p for ps in r.points().values() for p in ps):
        by_it.setdefault(p.iteration, []).append(p)
    return [AccuracyPoint(max(p.time for p in ps), it, statistics.fmean(p.accuracy for p in ps))
            for it, ps in sorted(by_it.items())]  # fmt: skip


def plot_treatments(path: Path, e: Experiment, jobs: int, seed: int, rnd: int) -> None:
    runs = [r for r in e.results if r.jobs == jobs and r.seed == seed and r.round == rnd]
    if not runs:
        return
    curves = {r.variant.name: {0: mean_curve(r)} for r in runs}
    starts = {r.variant.name: r.run.start for r in runs}
    title = (f"{e.model_name}: mean accuracy of {jobs} job(s) per treatment, seed {seed}, round {rnd + 1}, "
             f"{e.plane.label}")  # fmt: skip
    plot_accuracy(path, curves, title, starts, {"0.95 A*": FRACTION * e.references[seed].a_star})


RUN_FIELDS = ("dataplane", "model", "treatment", "jobs", "seed", "round", "compression", "loss_bound", "a_star",
              "avg_s", "p99_s", "tta_095_s", "jobs_reached", "final_acc", "bytes_share", "push_share",
              "zero_filled_chunks", "switch_drops", "retransmits", "utilisation", "cpu_busy", "errors")  # fmt: skip


def write_runs_csv(path: Path, e: Experiment) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(RUN_FIELDS)
        for r in e.results:
            w.writerow([
                e.plane.name, r.model, r.variant.name, r.jobs, r.seed, r.round + 1, r.compression,
                r.variant.loss_bound, f"{r.a_star:.4f}", f"{r.avg:.4f}", f"{r.p99:.4f}", f"{r.mean_tta:.3f}",
                sum(not math.isnan(t) for t in r.tta()), f"{r.final:.4f}", f"{r.bytes_share:.4f}",
                f"{r.push_share:.4f}", r.lost_chunks, r.drops, r.retransmits, f"{r.run.run.utilisation:.3f}",
                f"{r.run.run.cpu.mean_busy:.1f}" if r.run.run.cpu else "", "; ".join(r.run.errors),
            ])  # fmt: skip


def summary(e: Experiment) -> str:
    a, m = e.args, e.model
    refs = ", ".join(f"seed {s}: {r.a_star:.3f}" for s, r in e.references.items())
    lines = [
        f"## Approximate flow control, {e.model_name}, on {e.plane.label} ({time.strftime('%Y-%m-%d %H:%M')})",
        "",
        f"dataplane: {dataplanes.describe(e.plane)}; {e.probe}",
        f"{m.what} ({e.results[0].model_bytes if e.results else '?'} bytes pushed per worker per "
        f"iteration), lr {m.lr:g}, {a.workers} workers per job, {a.iterations or m.iterations} iterations, compute "
        f"padded to {m.compute_s:g} s (real forward/backward {1000 * e.padding:.1f} ms), bottleneck "
        f"{a.bottleneck_pps} pkt/s, queue depth 64; {a.rounds} round(s) x seeds {','.join(map(str, a.seeds))}.",
        f"A* (converged in process, lab/astar.py): {refs}. Time to 0.95 A* on the smoothed curve (mean of "
        f"{SMOOTH_WINDOW} evaluations); final accuracy: mean of the last {FINAL_EVALUATIONS} evaluations.",
        "",
        "```",
        table(e),
        "```",
        "",
    ]
    return "\n".join(lines)


# --- the published rows (docs/data/approx, issue 25 item 8) -------------------------------------------

KEY = ("model", "dataplane", "jobs", "treatment")
SCHEMA = (
    "issue 25: one row per model, dataplane, jobs and treatment; time_to_095 (s, smoothed curve, mean over the "
    "run's jobs) and final_acc (mean of each job's last 5 evaluations, mean over jobs) one per run; "
    "bytes_sent_share: pushes as sent plus pulls over full delivery's, mean over runs; precision: per run, the "
    "shares of the pushes' chunks sent fp32, fp16, int8 and withheld (issue 46 item 3)"
)


def published_rows(e: Experiment, command: str) -> list[tuple[dict, list[tuple[Path, str]]]]:
    out = []
    prefix = f"{e.model_name}/{e.plane.name}"
    for jobs, name in e.groups():
        mine = e.rows(name, jobs)
        full = {(r.round, r.seed): r for r in e.rows("full", jobs)}
        less = [reduction(full[(r.round, r.seed)].mean_tta, r.mean_tta) if (r.round, r.seed) in full else math.nan
                for r in mine]  # fmt: skip
        row = {
            "model": e.model_name,
            "dataplane": e.plane.name,
            "jobs": jobs,
            "congested": jobs > 1,
            "treatment": name,
            "rounds": len({r.round for r in mine}),
            "seeds": sorted({r.seed for r in mine}),
            "time_to_095": [_num(r.mean_tta) for r in mine],
            "final_acc": [_num(r.final) for r in mine],
            "bytes_sent_share": _num(statistics.fmean(r.bytes_share for r in mine)),
            "precision": sorted({r.precision for r in mine}),
            "less_than_full_095": [_num(x) for x in less],
            "runs": [
                {"round": r.round + 1, "seed": r.seed, "compression": r.compression, "precision": r.precision}
                for r in mine
            ],
            "what": mine[0].variant.describe(),
            "loss_bound": mine[0].variant.loss_bound,
            "a_star": {str(s): round(ref.a_star, 4) for s, ref in e.references.items()},
            "iterations": e.args.iterations or e.model.iterations,
            "bottleneck_pps": e.args.bottleneck_pps,
            **regime(e),
            "signals_per_phase": [_num(r.signals_per_phase) for r in mine],
            "errors": sum(len(r.run.errors) for r in mine),
            "measured": time.strftime("%Y-%m-%d"),
            "command": command,
        }
        runs = [(r.csv, f"{prefix}/{r.csv.name}") for r in mine if r.csv is not None]
        out.append((row, runs))
    return out


def regime(e: Experiment) -> dict:
    """The bottleneck's queue and marking the runs had (the lab stack's, as ``stack`` builds it)."""
    cfg = stack(e.args, e.model, Variant("full"), 1, 0)
    return {"queue_packets": cfg.queue_depth, "marking": marking_text(cfg.ecn)}


def marking_text(profile: MarkingProfile) -> str:
    if isinstance(profile, RedProfile):
        return f"RED {profile.kmin}-{profile.kmax} packets, pmax {profile.pmax:g}"
    return f"step above {profile.k_bytes} B"


def _num(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, 4)
