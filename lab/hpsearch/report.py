"""The hyper-parameter search's report: its tables, runs CSV, plots, summary.md and the rows it publishes
to docs/data/hpsearch."""

from __future__ import annotations

import csv
import math
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

from mlfc.lab import dataplanes
from mlfc.lab import decisions as dec
from mlfc.lab.hpsearch import rows as hrows
from mlfc.lab.hpsearch.search import FRACTIONS, Search
from mlfc.lab.results import format_table
from mlfc.lab.rounds import spread
from mlfc.lab.scenarios import TREATMENTS
from mlfc.lab.tta import (
    plot_accuracy,
    reduction,
)


def solo_table(s: Search) -> str:
    rows = []
    targets = s.targets()
    for so in s.solos:
        rows.append(
            [
                so.config.name,
                so.final,
                so.iter_s,
                so.comm_s,
                so.comm_s / so.iter_s,
                *(so.tta(t) for t in targets.values()),
            ]
        )
    return format_table(
        [
            "configuration",
            "final acc",
            "iter s",
            "comm s",
            "comm fraction",
            *(f"alone to {f:.2f} A* s" for f in targets),
        ],
        rows,
    )


def treatment_table(s: Search, names: Sequence[str]) -> str:
    base = [r for r in s.runs if r.treatment == "baseline"]
    rows = []
    for name in names:
        mine = sorted((r for r in s.runs if r.treatment == name), key=lambda r: r.round)
        if not mine:
            continue
        row: list[object] = [name, len(mine)]
        for f in FRACTIONS:
            row.append(spread([r.tta[f] for r in mine], fmt=".1f"))
            if name == "baseline" or not base:
                row.append("-")
            else:
                by_round = {b.round: b.tta[f] for b in base}
                row.append(spread([reduction(by_round.get(r.round, math.nan), r.tta[f]) for r in mine], 100, unit=" %"))
        row.append(spread([r.slowdown for r in mine], fmt=".2f", unit="x"))
        row.append(spread([r.finish for r in mine], fmt=".0f"))
        row.append(spread([r.stopped for r in mine], fmt=".0f"))
        util = [r.run.run.utilisation for r in mine if not math.isnan(r.run.run.utilisation)]
        row.append(f"{100 * min(util):.0f} %" if util else "-")
        cpu = [r.run.run.cpu.mean_busy for r in mine if r.run.run.cpu]
        row.append(f"{statistics.fmean(cpu):.0f} %" if cpu else "-")
        row.append(f"{max(r.run.start_spread() for r in mine):.2f}")
        row.append("/".join(f"{r.same_as_solo}" for r in mine))
        row.append(sum(len(r.run.errors) for r in mine))
        rows.append(row)
    headers = ["treatment", "rounds"]
    for f in FRACTIONS:
        headers += [f"to {f:.2f} A* s", "less time than FIFO"]
    headers += [
        "top job vs alone",
        "all done s",
        "stopped at s",
        "link use (min)",
        "CPU",
        "start spread s",
        "curves as alone",
        "errors",
    ]
    return format_table(headers, rows)


def write_runs_csv(path: Path, s: Search) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            [
                "dataplane",
                "treatment",
                "round",
                "order",
                *(f"tta_{f:.2f}" for f in FRACTIONS),
                *(f"first_job_{f:.2f}" for f in FRACTIONS),
                "finish_s",
                "stopped_s",
                "utilisation",
                "cpu_busy",
                "same_as_solo",
                "top_job",
                "top_job_slowdown",
                "errors",
            ]
        )
        for r in s.runs:
            w.writerow(
                [
                    s.plane.name,
                    r.treatment,
                    r.round + 1,
                    " ".join(s.configs[c].name for c in r.order),
                    *(f"{r.tta[f]:.3f}" for f in FRACTIONS),
                    *(r.first[f] or "" for f in FRACTIONS),
                    f"{r.finish:.3f}",
                    f"{r.stopped:.3f}",
                    f"{r.run.run.utilisation:.3f}",
                    f"{r.run.run.cpu.mean_busy:.1f}" if r.run.run.cpu else "",
                    r.same_as_solo,
                    r.top_job or "",
                    f"{r.slowdown:.3f}",
                    "; ".join(r.run.errors),
                ]
            )


def plot_compare(path: Path, s: Search, rnd: int) -> None:
    runs = [r for r in s.runs if r.round == rnd]
    curves = {r.treatment: r.run.points() for r in runs}
    starts = {r.treatment: r.run.start for r in runs}
    title = f"{s.args.task} search, round {rnd + 1}, {s.plane.label}: best accuracy among the jobs"
    plot_accuracy(path, curves, title, starts, {f"{f:.2f} A*": t for f, t in s.targets().items()})


def timeline_text(s: Search, treatment: str, rnd: int = 0, limit: int = 25) -> list[str]:
    run = next((r for r in s.runs if r.treatment == treatment and r.round == rnd), None)
    if run is None or not run.run.decisions:
        return []
    names = {j + 1: s.configs[c].name for j, c in enumerate(run.order)}
    lines = dec.describe(run.run.decisions, run.run.decision_start(), names)
    more = len(lines) - limit
    lines = lines[:limit] + ([f"... {more} more changes in {treatment}-r{rnd + 1}-decisions.csv"] if more > 0 else [])
    return [
        f"MAIF's order over time, {treatment} round {rnd + 1} (class, curve fit, last accuracy@iteration):",
        "",
        "```",
        *lines,
        "```",
        "",
    ]


def summary(s: Search, names: Sequence[str]) -> str:
    a = s.args
    targets = s.targets()
    pad = ", ".join(f"width {w}: {1000 * t:.1f} ms" for w, t in sorted(s.padding.items()))
    lines = [
        f"## Hyper-parameter search on {s.plane.label} ({time.strftime('%Y-%m-%d %H:%M')})",
        "",
        f"dataplane: {dataplanes.describe(s.plane)}; {s.probe}",
        f"{len(s.configs)} configurations of {a.task} (width:lr {','.join(f'{c.width}:{c.lr:g}' for c in s.configs)}), "
        f"each a PS + {a.workers} workers, {a.iterations} iterations, validation every {a.eval_every}, "
        f"bottleneck {a.bottleneck_pps} pkt/s; compute padded to {a.compute_s:g} s per iteration "
        f"(real forward/backward: {pad}); {a.rounds} round(s).",
        f"A* = {s.a_star:.3f}: {s.best.describe()['configuration']} trained to a plateau "
        f"({'from the cache' if s.best.cached else 'trained for this run'}, {s.best.path}; made {s.best.made}; "
        f"{s.best.method}); 0.90 A* = {targets[0.90]:.3f}, 0.95 A* = {targets[0.95]:.3f}; the best "
        f"configuration's smoothed curve reaches 0.95 A* at iteration {s.best.iteration_reaching(targets[0.95])}. "
        "Every configuration's converged run: reference.json.",
        "",
        "Alone (FIFO, one job on the network):",
        "",
        "```",
        solo_table(s),
        "```",
        "",
        "Search, time from the start until the best smoothed accuracy among the jobs reaches the target: mean "
        "(min..max) over rounds; less time than FIFO is per round against the same round's baseline; top job "
        "vs alone: the job that held MAIF's top class longest, its iteration time over the iterations it ran "
        "entirely on top, over alone "
        "(baseline: the same job's over the whole run):",
        "",
        "```",
        treatment_table(s, names),
        "```",
        "",
    ]
    phases = phase_table(s)
    if phases:
        lines += [
            "Where the top job's time goes: seconds per iteration in each phase over the iterations it ran entirely "
            "in the top class "
            "(FIFO: the same job over the whole run) against the same configuration alone; pull includes the "
            "PS's wait for the job's slower worker:",
            "",
            "```",
            phases,
            "```",
            "",
        ]
    for name in names:
        if TREATMENTS[name].priorities == "maif":
            lines += timeline_text(s, name)
    return "\n".join(lines)


def phase_table(s: Search) -> str:
    rows = []
    for r in sorted(s.runs, key=lambda r: (r.round, r.treatment)):
        if r.top_job is None or not r.top_phases:
            continue
        cfg = s.configs[r.order[r.top_job - 1]]
        alone = next((so.phases for so in s.solos if so.config == cfg), {})
        cells = [f"{r.top_phases[p]:.3f} / {alone.get(p, math.nan):.3f}" for p in hrows.PHASES]
        rows.append([r.round + 1, r.treatment, f"{r.top_job} ({cfg.name})", *cells, f"{r.slowdown:.2f}x"])
    if not rows:
        return ""
    return format_table(["round", "treatment", "top job", *(f"{p} s (top / alone)" for p in hrows.PHASES),
                         "iteration vs alone"], rows)  # fmt: skip


def published_rows(s: Search, command: str) -> list[tuple[dict, list[tuple[Path, str]]]]:
    """docs/data/hpsearch rows (issue 26 item 6) of every treatment, each with its per-run CSVs to copy."""
    fifo = {r.round: r.tta for r in s.runs if r.treatment == "baseline"}
    a = s.args
    prefix = f"{a.task}/{s.plane.name}"
    out = []
    for name in a.treatments:
        mine = sorted((r for r in s.runs if r.treatment == name), key=lambda r: r.round)
        if not mine:
            continue
        names = {r.round: s.configs[r.order[r.top_job - 1]].name if r.top_job else None for r in mine}
        row = hrows.make_row(
            task=a.task,
            dataplane=s.plane.name,
            configurations=len(s.configs),
            treatment=name,
            tta={r.round: r.tta for r in mine},
            fifo=fifo,
            slowdown={r.round: r.slowdown for r in mine},
            command=command,
            a_star=s.best.describe(),
            grid=",".join(f"{c.width}:{c.lr:g}" for c in s.configs),
            iterations=a.iterations,
            bottleneck_pps=a.bottleneck_pps,
            top_job=[names[r.round] for r in mine],
            same_as_solo=[r.same_as_solo for r in mine],
            errors=[len(r.run.errors) for r in mine],
            measured=time.strftime("%Y-%m-%d"),
        )
        runs = [(s.out / f"{name}-r{r.round + 1}.csv", f"{prefix}/{name}-r{r.round + 1}.csv") for r in mine]
        # MAIF's decisions beside its iterations: the top job and its periods can be recomputed from the data
        decisions = [s.out / f"{name}-r{r.round + 1}-decisions.csv" for r in mine]
        runs += [(p, f"{prefix}/{p.name}") for p in decisions if p.exists()]
        out.append((row, [*runs, (s.out / "reference.json", f"{prefix}/reference.json")]))
    return out
