"""Approximate flow control's published rows (docs/data/approx): targets and the docs' table."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from mlfc.lab.results import markdown_table
from mlfc.lab.summaries import Row, spread_cell

# Issue 25's targets for the network-decided scheme (treatment "mlfc") against full delivery of the same
# model, dataplane and number of jobs: congested, >= 40 % less time to 0.95 A* and final accuracy within
# 0.5 pp; alone (uncongested), within 2 % of full delivery's time and 0.5 pp; the method: >= 3 rounds, 2 seeds.
APPROX_LESS_THAN_FULL = 0.40
APPROX_ALONE_SLOWER = 0.02
APPROX_ACC_PP = 0.5
APPROX_ORDER = (
    "full", "fp16", "topk-ef", "selective-old", "mlfc-push", "mlfc", "mlfc-share", "mlfc-telemetry", "mlfc-precision",
    "mlfc-precision-pulls", "mlfc-precision-repair",
)  # fmt: skip


def _mean(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None and not math.isnan(v)]
    return statistics.fmean(vals) if vals else None


# the treatments that are issue 25's scheme (the targets apply): the second design and the third
APPROX_SCHEMES = (
    "mlfc", "mlfc-share", "mlfc-telemetry", "mlfc-precision", "mlfc-precision-pulls", "mlfc-precision-repair",
)  # fmt: skip


def approx_target(row: Row) -> str:
    if row["treatment"] not in APPROX_SCHEMES:
        return "-"
    if row["congested"]:
        return f"≥ {100 * APPROX_LESS_THAN_FULL:.0f} % less time than full, ≤ {APPROX_ACC_PP:g} pp below"
    return f"≤ {100 * APPROX_ALONE_SLOWER:.0f} % more time than full, ≤ {APPROX_ACC_PP:g} pp below"


def approx_meets(row: Row, full: Row | None) -> bool | None:
    """Whether a row of APPROX_SCHEMES meets its target against ``full`` (None: no target for this row). A
    run that never reached 0.95 A* counts against it, as does a run short of the method (3 rounds, 2 seeds)."""
    if row["treatment"] not in APPROX_SCHEMES:
        return None
    if full is None or row["rounds"] < 3 or len(row["seeds"]) < 2 or None in row["time_to_095"]:
        return False
    t, tf = _mean(row["time_to_095"]), _mean(full["time_to_095"])
    a, af = _mean(row["final_acc"]), _mean(full["final_acc"])
    if None in (t, tf, a, af):
        return False
    accurate = 100 * (af - a) <= APPROX_ACC_PP
    if row["congested"]:
        return accurate and t <= (1 - APPROX_LESS_THAN_FULL) * tf
    return accurate and t <= (1 + APPROX_ALONE_SLOWER) * tf


def render_approx(summary: Mapping[str, Any]) -> str:
    def order(r: Row) -> tuple:
        t = r["treatment"]
        return (r["model"], r["dataplane"], -r["jobs"], APPROX_ORDER.index(t) if t in APPROX_ORDER else 99, t)

    rows = sorted(summary["rows"], key=order)
    fulls = {(r["model"], r["dataplane"], r["jobs"]): r for r in rows if r["treatment"] == "full"}
    body = []
    for r in rows:
        full = fulls.get((r["model"], r["dataplane"], r["jobs"]))
        acc, facc = _mean(r["final_acc"]), _mean(full["final_acc"]) if full else None
        met = approx_meets(r, full)
        body.append(
            [
                r["model"],
                r["dataplane"],
                r["jobs"],
                r["treatment"],
                f"{r['rounds']} x {len(r['seeds'])}",
                spread_cell(r["time_to_095"], fmt=".1f"),
                "-" if r["treatment"] == "full" else spread_cell(r.get("less_than_full_095", []), 100, unit=" %"),
                spread_cell(r["final_acc"], fmt=".4f"),
                "-" if r["treatment"] == "full" or acc is None or facc is None else f"{100 * (facc - acc):.2f} pp",
                "-" if r["bytes_sent_share"] is None else f"{100 * r['bytes_sent_share']:.0f} %",
                spread_cell(r["signals_per_phase"], fmt=".2f") if r.get("signals_per_phase") else "-",
                approx_target(r),
                "-" if met is None else ("yes" if met else "**no**"),
            ]
        )
    headers = ["model", "dataplane", "jobs", "treatment", "rounds x seeds", "to 0.95 A* s",
               "less time than full (same run)", "final acc (last 5)", "below full", "bytes vs full",
               "signals / flow / phase", "target", "met"]  # fmt: skip
    return (markdown_table(headers, body) + "\n\n" + regimes(rows) + "\n\nCommands: "
            + "; ".join(sorted({f"`{r['command']}`" for r in rows})))  # fmt: skip


def regimes(rows: list[Row]) -> str:
    """Each regime the rows ran in (issue 46 item 6): the bottleneck's rate, queue and marking; rows published
    before the rows carried their queue and marking say so."""
    seen: dict[str, list[str]] = {}
    for r in rows:
        what = f"{r.get('bottleneck_pps', '?')} packets/s bottleneck"
        if "queue_packets" in r:
            what += f", {r['queue_packets']}-packet queue, marking {r['marking']}"
        else:
            what += ", queue and marking not recorded in the row (the lab's defaults then: 64 packets, RED 4-32)"
        seen.setdefault(what, []).append(f"{r['model']}/{r['dataplane']}")
    parts = [f"{what} ({', '.join(sorted(set(where)))})" for what, where in seen.items()]
    return ("Regime: " + "; ".join(parts) + ". Signals / flow / phase: the switches' CE marks and drops of the "
            "run's jobs per worker and iteration.")  # fmt: skip
