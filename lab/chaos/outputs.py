"""What a chaos run writes: the per-fault table (outage, stall, iteration times, switches back on the latest
decision), summary.md, faults.csv, iterations.csv, iterations.png and the ledger's CSVs."""

from __future__ import annotations

import csv
import itertools
import statistics
from dataclasses import dataclass
from pathlib import Path

from mlfc.lab.chaos.records import final_accuracy, iteration_ends
from mlfc.lab.chaos.run import RunResult
from mlfc.lab.chaos.schedule import ACCURACY_TARGET_PP, ENTRIES_TARGET_S, WORKERS, Fault


@dataclass(frozen=True)
class FaultRow:
    index: int
    action: str  # kill, stop or down (lab/chaos/schedule.py KINDS)
    target: str
    fault: str  # as printed: kill -9 ps, SIGSTOP ks1, link ks1-ks2 down
    iteration: int  # the first iteration not finished when the fault fired
    outage_s: float
    stall_s: float  # the slowest of the 3 iterations after the kill (the job standing still)
    before_ms: float  # median iteration time of the 5 iterations before the kill
    after_ms: float  # ... of 5 iterations after those 3
    entries_s: float
    entries_ok: bool
    missing_iterations: int  # iterations the job went through without a worker record (a PS resumed past them)


def fault_rows(run: RunResult) -> list[FaultRow]:
    ends = iteration_ends(run.records)
    its = sorted(ends)
    rows = []
    for fr in run.faults:
        before = [i for i in its if ends[i] <= fr.killed_at]
        after = [i for i in its if ends[i] > fr.killed_at]
        if not before or not after:
            continue
        last, first = before[-1], after[0]
        # the slowest of the (up to) 3 iterations after the kill: how long the job stood still
        nxt = [last, *after[:3]]
        stall = max(ends[i] - ends[p] for p, i in itertools.pairwise(nxt))

        def durations(seq: list[int]) -> list[float]:
            return [ends[i] - ends[p] for p, i in itertools.pairwise(seq) if i == p + 1]

        pre = durations(before[-6:])
        post = durations(after[3:9])
        rows.append(
            FaultRow(
                fr.fault.index,
                fr.fault.action,
                fr.fault.target,
                fr.fault.describe(),
                last + 1,
                fr.outage_s,
                stall,
                1000 * statistics.median(pre) if pre else float("nan"),
                1000 * statistics.median(post) if post else float("nan"),
                fr.entries_s,
                fr.entries_error is None and fr.entries_s <= ENTRIES_TARGET_S,
                first - last - 1,
            )
        )
    return rows


def summary_text(
    seed: int,
    plane: str,
    faults: list[Fault],
    run: RunResult,
    base: RunResult | None,
    rows: list[FaultRow],
    load: tuple[float, float] | None = None,
) -> str:
    acc = final_accuracy(run.records)
    base_acc = final_accuracy(base.records) if base is not None else None
    lines = [f"## chaos, seed {seed}, {plane}", ""]
    lines.append(
        f"Job: digits, {WORKERS} workers, {run_iterations(run)} iterations, lossless; {len(faults)} faults "
        f"scheduled, {len(run.faults)} fired; run took {run.seconds:.0f} s"
        + (f" (undisturbed {base.seconds:.0f} s)" if base else "")
        + (f"; load average {load[0]:.1f} at the start, {load[1]:.1f} at the end" if load else "")
        + "."
    )
    lines += [
        "",
        "| # | fault | at iteration | for s | longest iteration after, s | iteration ms before | after | "
        "switches = latest decision after s | ≤ 1 s | iterations without record |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.index} | {r.fault} | {r.iteration} | {r.outage_s:.2f} | {r.stall_s:.2f} | "
            f"{r.before_ms:.0f} | {r.after_ms:.0f} | {r.entries_s:.2f} | {'yes' if r.entries_ok else 'NO'} | "
            f"{r.missing_iterations} |"
        )
    lines += [""]
    lines.append(
        f"* training completed: **{'yes' if run.completed else 'NO'}**"
        + ("" if not run.errors else f" ({'; '.join(run.errors)})")
    )
    lines += run.ledger.summary(ENTRIES_TARGET_S)
    if acc is not None:
        txt = f"* final accuracy (iteration {acc[0]}): **{acc[1]:.4f}**"
        if base_acc is not None:
            dpp = 100 * (acc[1] - base_acc[1])
            ok = abs(dpp) <= ACCURACY_TARGET_PP
            txt += f", undisturbed run {base_acc[1]:.4f}: {dpp:+.2f} pp ({'within' if ok else 'NOT within'} 0.5 pp)"
        lines.append(txt)
    ok_entries = sum(r.entries_ok for r in rows)
    lines.append(
        f"* switches equal to the latest decision within {ENTRIES_TARGET_S:g} s of the recovery: "
        f"{ok_entries}/{len(rows)} faults"
    )
    if run.unplanned:
        lines.append(
            "* restarts the supervisor made after exits no fault caused: "
            + ", ".join(f"{n} (status {rc})" for _, n, rc in run.unplanned)
        )
    if run.ps_summary:
        s = run.ps_summary
        lines.append(
            f"* PS (last incarnation): {s.get('rejoins', 0)} worker re-joins, {s.get('pull_failures', 0)} "
            f"failed pulls, {s.get('stray', 0)} stray deliveries"
        )
    return "\n".join(lines) + "\n"


def run_iterations(run: RunResult) -> int:
    return 1 + max((r["iteration"] for r in run.records), default=-1)


def write_outputs(out: Path, run: RunResult, rows: list[FaultRow], text: str) -> list[Path]:
    """Everything in ``out``; returns the ledger's CSVs (one row per acknowledged report / decision)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.md").write_text(text)
    ledger = run.ledger.write(out)
    with (out / "faults.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            [
                "index",
                "action",
                "target",
                "iteration",
                "outage_s",
                "stall_s",
                "before_ms",
                "after_ms",
                "entries_s",
                "entries_ok",
                "missing_iterations",
            ]
        )
        for r in rows:
            w.writerow(
                [
                    r.index,
                    r.action,
                    r.target,
                    r.iteration,
                    f"{r.outage_s:.3f}",
                    f"{r.stall_s:.3f}",
                    f"{r.before_ms:.1f}",
                    f"{r.after_ms:.1f}",
                    f"{r.entries_s:.3f}",
                    int(r.entries_ok),
                    r.missing_iterations,
                ]
            )
    keys = ["worker", "iteration", "start", "end", "compute_s", "comm_s", "accuracy"]
    with (out / "iterations.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(keys)
        for r in sorted(run.records, key=lambda r: (r["worker"], r["iteration"])):
            w.writerow([r.get(k, "") for k in keys])
    plot(out / "iterations.png", run)
    return ledger


def plot(path: Path, run: RunResult) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ends = iteration_ends(run.records)
    its = sorted(ends)
    if len(its) < 2:
        return
    t0 = ends[its[0]]
    xs = [ends[i] - t0 for i in its[1:]]
    ys = [ends[i] - ends[p] for p, i in itertools.pairwise(its)]
    fig, ax = plt.subplots(figsize=(10, 4))
    ax.plot(xs, ys, ".-", lw=0.8, ms=3, label="iteration time (all workers)")
    for fr in run.faults:
        ax.axvline(fr.killed_at - t0, color="red", lw=0.8, alpha=0.6)
        ax.text(fr.killed_at - t0, max(ys) * 0.95, fr.fault.describe(), rotation=90, fontsize=7, va="top", color="red")
    ax.set_yscale("log")
    ax.set_xlabel("seconds")
    ax.set_ylabel("seconds per iteration")
    ax.set_title(f"{run.name}: iteration time, faults in red")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
