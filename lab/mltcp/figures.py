"""The MLTCP experiment's published rows (docs/data/mltcp: the switches' e2e runs, kernel TCP, real DDP jobs,
ns-3): their key, targets, the docs' table and plot."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mlfc.lab.results import markdown_table
from mlfc.lab.summaries import Row, spread_cell

# docs/data/mltcp: written by lab/e2e/cli.py (switches), lab/mltcp/kernel.py (kernel TCP) and lab/mltcp/gloo.py
MLTCP_KEY = ("mix", "cc", "dataplane", "treatment", "f", "ack_delay", "queue_bytes", "mark_threshold_bytes")
MLTCP_SCHEMA = (
    "issue 24: one row per mix, dataplane, MLTCP treatment and F; share_of_ideal per round (0..1); issue 45: each "
    "row's regime (link_bps, queue_bytes, mark_threshold_bytes, signals_per_phase: retransmits + CE marks per "
    "connection per communication phase; null in rows measured before it was recorded)"
)


# Issue 24's targets, by (dataplane, mix, cc); the first match wins ("*" matches anything). They judge the rows
# measured before issue 45 recorded a row's regime.
MLTCP_TARGETS: tuple[tuple[str, str, str, str], ...] = (
    ("kernel", "compat-2", "*", "share>=0.80"),  # lab/mltcp/kernel.py's mix names
    ("kernel", "compat-4", "*", "share>=0.70"),
    ("kernel", "*", "*", "-"),  # issue 24 sets none for the kernel's other mixes
    ("real", "*", "*", "share>=0.70"),
    ("ns3", "*", "*", "share>=0.70"),
    ("*", "two-compatible", "dcqcn", "share>=0.70"),
    ("*", "two-compatible", "*", "every>=0.90"),
    ("*", "four-compatible", "*", "speedup>=2.0"),
    ("*", "*", "*", "share>=0.75"),
)
# Issue 45's targets, for rows in a shallow regime (below). "every": every round, the average iteration within
# 5 % of the ideal's and interleaved within 5 iterations; "tail": the mean, and p99 speed-up >= average.
MLTCP_SHALLOW_TARGETS: tuple[tuple[str, str, str, str], ...] = (
    ("*", "*", "dctcp", "share>=0.80"),
    ("*", "*", "dcqcn", "share>=0.80"),
    ("real", "*", "*", "share>=0.70"),  # unmodified DDP over gloo: 2 jobs (4 jobs: 0.60, below)
    ("ns3", "*", "*", "share>=0.70"),
    ("kernel", "compat-2", "*", "every>=0.90"),
    ("*", "two-compatible", "*", "every>=0.90"),
    ("kernel", "compat-4", "*", "tail>=0.80"),
    ("*", "four-compatible", "*", "tail>=0.80"),
    ("kernel", "compat-8", "*", "share>=0.70"),
    ("*", "*", "*", "-"),
)
# A regime is shallow when the depth at which congestion is signalled (the marking threshold where the switch
# marks, else the buffer where it drops) drains in at most this long: 3 ms, i.e. 75 KB at the kernel lab's
# 200 Mbit/s (its deep default was 300 KB, 12 ms).
SHALLOW_QUEUE_S = 0.003


def mltcp_shallow(row: Row) -> bool | None:
    """Whether the row ran in a shallow regime; None for rows that do not say their regime."""
    queue, rate = row.get("queue_bytes"), row.get("link_bps")
    if queue is None or not rate:
        return None
    depth = row.get("mark_threshold_bytes") or queue
    return depth * 8 / rate <= SHALLOW_QUEUE_S


def mltcp_target(row: Row) -> str:
    shallow = mltcp_shallow(row)
    if shallow is False:
        return "-"  # the deep-buffer rows are the regime curve's, not judged
    table = MLTCP_TARGETS if shallow is None else MLTCP_SHALLOW_TARGETS
    for plane, mix, cc, target in table:
        if plane in ("*", row["dataplane"]) and mix in ("*", row["mix"]) and cc in ("*", row["cc"]):
            if shallow and plane == "real" and row.get("jobs", 2) >= 4:
                return "share>=0.60"
            return target
    return "-"


def mltcp_meets(row: Row) -> bool:
    """Whether the row meets its target (p99 >= average speed-up is part of every compatible mix's in issue 24;
    issue 45's shallow rows: as MLTCP_SHALLOW_TARGETS says)."""
    shares = [s for s in row["share_of_ideal"] if s is not None]
    target = mltcp_target(row)
    if not shares or target == "-":
        return False
    kind, _, bound = target.partition(">=")
    level = float(bound)
    if mltcp_shallow(row):
        if kind == "every":
            over = row.get("avg_over_ideal") or []
            near_ideal = bool(over) and statistics.fmean(over) <= 1.05
            early = all(i is not None and i <= 5 for i in row["interleaved_from"])
            return min(shares) >= level and near_ideal and early
        if kind == "tail":
            return statistics.fmean(shares) >= level and row["p99_speedup"] >= row["avg_speedup"]
        return statistics.fmean(shares) >= level
    tail = row["p99_speedup"] >= row["avg_speedup"] or row["dataplane"] in ("kernel", "real", "ns3")
    if kind == "every":
        return min(shares) >= level and tail
    if kind == "speedup":
        return row["avg_speedup"] >= level and row["p99_speedup"] >= level
    return statistics.fmean(shares) >= level and tail


def mltcp_order(row: Row) -> tuple:
    return (row["dataplane"], row["jobs"], row["mix"], row["cc"], row.get("treatment", ""), row["f"],
            row.get("ack_delay") or 0.0)  # fmt: skip


def _mltcp_regime(row: Row) -> str:
    """link, queue, marking threshold, signals per connection per phase; '?' where the row did not record it."""
    if row.get("queue_bytes") is None:
        return "?"
    link = f"{row['link_bps'] / 1e6:g} Mb/s, " if row.get("link_bps") else ""
    mark = "" if row.get("mark_threshold_bytes") is None else f", CE > {row['mark_threshold_bytes'] / 1000:g} KB"
    signals = row.get("signals_per_phase")
    per_phase = "" if signals is None else f", {signals:.1f} signals/phase"
    return f"{link}{row['queue_bytes'] / 1000:g} KB{mark}{per_phase}"


def render_mltcp(summary: Mapping[str, Any]) -> str:
    rows = sorted(summary["rows"], key=mltcp_order)
    body = []
    for r in rows:
        inter = "/".join("-" if i is None else str(i) for i in r["interleaved_from"])
        body.append(
            [
                r["mix"],
                r["dataplane"],
                r["cc"] + (" (one progress per job)" if r.get("treatment", "").endswith("+job") else ""),
                f"`{r['f']}`",
                "-" if r.get("ack_delay") is None else f"{1e3 * r['ack_delay']:g} ms",
                _mltcp_regime(r),
                r["rounds"],
                spread_cell(r["share_of_ideal"], 100, unit=" %"),
                f"{r['avg_speedup']:.2f}x / {r['ideal_avg']:.2f}x",
                f"{r['p99_speedup']:.2f}x / {r['ideal_p99']:.2f}x",
                inter,
                mltcp_target(r).replace(">=", " >= "),
                "-" if mltcp_target(r) == "-" else "yes" if mltcp_meets(r) else "**no**",
            ]
        )
    headers = ["mix", "dataplane", "cc", "F", "ACK delay", "regime", "rounds", "of ideal gain: mean (min..max)",
               "avg speed-up / ideal", "p99 speed-up / ideal", "interleaved from", "target", "met"]  # fmt: skip
    return markdown_table(headers, body) + "\n\nCommands: " + "; ".join(sorted({f"`{r['command']}`" for r in rows}))


def plot_mltcp(summary: Mapping[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted(summary["rows"], key=mltcp_order)
    if not rows:
        return
    fig, ax = plt.subplots(figsize=(max(6.0, 0.55 * len(rows) + 2), 4))
    for i, r in enumerate(rows):
        shares = [100 * s for s in r["share_of_ideal"] if s is not None]
        if shares:
            ax.bar(i, statistics.fmean(shares), color="tab:blue" if mltcp_meets(r) else "tab:gray")
            ax.plot([i] * len(shares), shares, "k.", ms=4)
    ax.axhline(0, color="black", lw=0.6)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(
        [f"{r['mix']}\n{r['dataplane']} {r['cc']}\n{r['f']}" + (f"\nACK delay {1e3 * r['ack_delay']:g} ms"
         if r.get("ack_delay") else "") for r in rows],
        fontsize=6,
        rotation=90,
    )  # fmt: skip
    ax.set_ylabel("share of the ideal gain (%)")
    ax.set_title("MLTCP: share of the ideal gain per round (bar: mean; blue: target met)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
