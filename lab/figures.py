"""Published results: docs/data/<experiment>/summary.json (+ per-run CSVs) and the tables made from them.

An experiment that produces a headline figure calls ``publish`` with its rows; the rows are merged
into the experiment's summary.json by their key (a new run of the same mix / treatment / F replaces
the old row, every other row stays), and the per-run CSVs are copied next to it under runs/. The
docs never hold a hand-typed figure for these experiments: ``python -m mlfc.lab.figures`` (``make
figures``) rewrites every block between ``<!-- figures:EXPERIMENT -->`` and ``<!-- /figures:EXPERIMENT
-->`` in docs/results.md and README.md from the summaries, draws docs/img/figures-EXPERIMENT.png, and
``--check`` fails when a block is not what the data says.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mlfc.lab.mltcp import regime
from mlfc.lab.results import markdown_table

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "docs" / "data"
DOCS = (ROOT / "docs" / "results.md", ROOT / "README.md")
IMG = ROOT / "docs" / "img"

Row = dict[str, Any]


class FiguresError(Exception):
    """A summary that cannot be read or written, or a block that cannot be placed."""


def _atomic_write(path: Path, text: str) -> None:
    """Write through a temporary file and rename, so a failure never leaves half a summary."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load(experiment: str, data: Path = DATA) -> dict[str, Any]:
    """The experiment's summary ({"rows": []} when none was published yet)."""
    path = data / experiment / "summary.json"
    if not path.exists():
        return {"rows": []}
    try:
        summary = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise FiguresError(f"{path}: not JSON ({exc})") from None
    if not isinstance(summary, dict) or not isinstance(summary.get("rows"), list):
        raise FiguresError(f"{path}: expected an object with a 'rows' list")
    return summary


def publish(
    experiment: str,
    rows: Sequence[Row],
    *,
    key: Sequence[str],
    runs: Iterable[tuple[Path, str]] = (),
    meta: Mapping[str, Any] | None = None,
    data: Path = DATA,
) -> Path:
    """Merge ``rows`` into docs/data/<experiment>/summary.json; returns the summary's path.

    A row replaces the published row with the same values of ``key``; ``runs`` are (CSV path, name under
    runs/) pairs copied beside the summary; ``meta`` is stored at the summary's top level."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", experiment):
        raise FiguresError(f"experiment name {experiment!r}: use lower-case letters, digits, - and _")
    for row in rows:
        missing = [k for k in key if k not in row]
        if missing:
            raise FiguresError(f"{experiment}: row without its key field(s) {missing}: {row}")
    summary = load(experiment, data)

    def ident(row: Row) -> str:
        return json.dumps([row.get(k) for k in key])

    fresh = {ident(r) for r in rows}
    merged = [r for r in summary["rows"] if ident(r) not in fresh] + [dict(r) for r in rows]
    summary["rows"] = sorted(merged, key=lambda r: json.dumps([r.get(k) for k in key]))
    summary.update(meta or {})
    summary["key"] = list(key)
    summary["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    target = data / experiment
    for src, name in runs:
        dest = target / "runs" / name
        if not dest.resolve().is_relative_to((target / "runs").resolve()):
            raise FiguresError(f"run name {name!r} leaves {target / 'runs'}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
    path = target / "summary.json"
    _atomic_write(path, json.dumps(summary, indent=1, sort_keys=True) + "\n")
    return path


# --- the tables ------------------------------------------------------------------------------------


def _spread(values: Sequence[float | None], scale: float = 1.0, fmt: str = ".0f", unit: str = "") -> str:
    vals = [v * scale for v in values if v is not None and not math.isnan(v)]
    if not vals:
        return "-"
    text = f"{statistics.fmean(vals):{fmt}}{unit}"
    return text + (f" ({min(vals):{fmt}}..{max(vals):{fmt}})" if len(vals) > 1 else "")


# docs/data/mltcp: written by lab/e2e.py (switches) and lab/kernel_mltcp.py (kernel TCP)
MLTCP_KEY = ("mix", "cc", "dataplane", "treatment", "f", "ack_delay", "queue_bytes", "mark_threshold_bytes")
MLTCP_SCHEMA = (
    "issue 24: one row per mix, dataplane, MLTCP treatment and F; share_of_ideal per round (0..1); issue 45: each "
    "row's regime (link_bps, queue_bytes, mark_threshold_bytes, signals_per_phase: retransmits + CE marks per "
    "connection per communication phase; null in rows measured before it was recorded)"
)
SCHEMAS = {
    "mltcp": MLTCP_SCHEMA,
    "coordinated": "issue 24's fields: one row per mix, dataplane and treatment of the coordinator's against its "
    "baseline in the same rounds; fallback_engaged_s per round (null: never engaged)",
    "transport-designs": "issue 28 item 2: one row per design (a commit) and controller, run trial by trial in one "
    "run; gbps and of_tcp (the ratio to the iperf3 TCP stream of the same trial) per trial; position: the "
    "design's place on the command line",
}

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


def _mltcp_order(row: Row) -> tuple:
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
    rows = sorted(summary["rows"], key=_mltcp_order)
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
                _spread(r["share_of_ideal"], 100, unit=" %"),
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

    rows = sorted(summary["rows"], key=_mltcp_order)
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


def render_coordinated(summary: Mapping[str, Any]) -> str:
    """The coordinator's treatments (MAIF, interleaving, MLTCP with either, the fallback) against their baseline
    in the same rounds; issue 24 sets them no target, the MLTCP rows above are the comparison."""
    rows = sorted(summary["rows"], key=_mltcp_order)
    body = []
    for r in rows:
        engaged = r.get("fallback_engaged_s")
        body.append([
            r["mix"], r["dataplane"], r["treatment"], f"`{r['f']}`", r["rounds"],
            _spread(r["share_of_ideal"], 100, unit=" %"),
            f"{r['avg_speedup']:.2f}x / {r['ideal_avg']:.2f}x",
            f"{r['p99_speedup']:.2f}x / {r['ideal_p99']:.2f}x",
            "/".join("-" if i is None else str(i) for i in r["interleaved_from"]),
            "-" if engaged is None else "/".join("never" if e is None else f"{e:g}" for e in engaged),
        ])  # fmt: skip
    headers = ["mix", "dataplane", "treatment", "MLTCP F", "rounds", "of ideal gain: mean (min..max)",
               "avg speed-up / ideal", "p99 speed-up / ideal", "interleaved from", "fallback engaged at s"]  # fmt: skip
    return markdown_table(headers, body) + "\n\nCommands: " + "; ".join(sorted({f"`{r['command']}`" for r in rows}))


def _amount(value: float | None, unit: str, fallback: str = "-") -> str:
    if value is None:
        return fallback
    return (f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}") + (f" {unit}" if unit else "")


def render_bench(summary: Mapping[str, Any]) -> str:
    body = []
    for r in summary["rows"]:
        ratio = r.get("ratio")
        body.append(
            [
                r["name"],
                _amount(r.get("value"), r.get("unit", ""), r.get("measured") or "-"),
                r.get("anchor") or "-",
                _amount(r.get("anchor_value"), r.get("unit", "")),
                "-" if ratio is None else f"{ratio:.2f}",
                r.get("target") or "-",
                r.get("verdict") or "-",
                f"`{r['command']}`",
            ]
        )
    headers = ["figure", "value", "anchor (same run)", "anchor value", "ratio", "target", "verdict", "command"]
    return markdown_table(headers, body)


def render_transport_designs(summary: Mapping[str, Any]) -> str:
    """Issue 28 item 2: versions of the transport run trial by trial in one run, each trial's ratio to the
    iperf3 TCP stream measured just before it; the target is judged on the medians."""
    body = []
    ccs = ("reno", "cubic", "dcqcn")
    for r in sorted(summary["rows"], key=lambda r: (ccs.index(r["cc"]) if r["cc"] in ccs else 9, r["position"])):
        gbps, ratio = statistics.median(r["gbps"]), statistics.median(r["of_tcp"])
        met = gbps >= r["target_gbps"] and ratio >= r["target_of_tcp"]
        body.append([
            r["cc"],
            f"{r['design']} ({r['commit'][:7]})",
            f"{gbps:.2f} ({min(r['gbps']):.2f}..{max(r['gbps']):.2f})",
            ", ".join(f"{x:.2f}" for x in r["of_tcp"]),
            f"{ratio:.2f}",
            f"{r['tx_cpu_s_per_gbit']:.3f} / {r['rx_cpu_s_per_gbit']:.3f}",
            f">= {r['target_gbps']:g} Gb/s and >= {r['target_of_tcp']:g} of TCP: {'met' if met else 'missed'}",
        ])  # fmt: skip
    headers = ["controller", "design (commit)", "goodput Gb/s, median (range)", "of iperf3 TCP by trial",
               "median", "CPU s/Gb sender / receiver", "target (medians)"]  # fmt: skip
    how = (f"{summary.get('trials', '?')} trials of {summary.get('tensors', '?')} x "
           f"{summary.get('bytes', 0) / 1e6:g} MB per design and controller, {summary.get('date', '')}; load "
           f"average {summary.get('load_before', '?')} before, {summary.get('load_after', '?')} after. "
           f"Command: `{summary.get('command', '')}`")  # fmt: skip
    return markdown_table(headers, body) + "\n\n" + how


def render_dataplane(summary: Mapping[str, Any]) -> str:
    """Issue 28's program layouts side by side: BMv2's work per packet and the packet-rate ratio by round."""
    body = []
    for r in summary["rows"]:
        ops, base = r["ops"]["mlfc"], r["ops"]["l3fwd"]

        def count(kind: str, ops: Mapping[str, int] = ops, base: Mapping[str, int] = base) -> str:
            return f"{ops.get(kind, 0)} ({base.get(kind, 0)})"

        rounds = r["rounds"]
        met = all(x["ratio"] >= r["target"] for x in rounds)
        body.append([
            r["design"],
            f"{count('tables applied')}, {ops.get('table hits', 0)} hits",
            count("conditions"),
            count("primitives"),
            ", ".join(f"{x['mlfc_pps']:,.0f}" for x in rounds),
            ", ".join(f"{x['l3fwd_pps']:,.0f}" for x in rounds),
            ", ".join(f"{x['ratio']:.2f}" for x in rounds),
            f">= {r['target']}: {'met' if met else 'missed'}",
        ])  # fmt: skip
    headers = ["design", "tables applied (l3fwd)", "conditions (l3fwd)", "primitives (l3fwd)",
               "mlfc.p4 packets/s by round", "l3fwd.p4 packets/s by round", "ratio by round", "target"]  # fmt: skip
    r0 = summary["rows"][0]
    how = (f"{r0['trials_per_round']} alternating trials of {r0['seconds']:g} s per round and program, "
           f"{r0['size']}-byte tagged ECT(0) frames; {summary.get('bmv2', 'BMv2')}; load average "
           f"{summary.get('load_before', '?')} before, {summary.get('load_after', '?')} after. "
           f"Command: `{summary.get('command', '')}`")  # fmt: skip
    return markdown_table(headers, body) + "\n\n" + how


# Issue 26's targets: less time to 0.95 A* than the same round's FIFO (mean over rounds), and the top-class
# job within 1.3x of its iteration time alone in every round; the method: >= 12 configurations, >= 3 rounds.
# the search objectives (issue 26's ranking designs for a search) share the better objective's target
HPSEARCH_LESS_THAN_FIFO = {"maif-search": 0.45, "maif-potential": 0.45, "maif-elimination": 0.45, "maif-sum": 0.38}
HPSEARCH_SLOWDOWN = 1.3
HPSEARCH_ORDER = ("fifo", "maif-sum", "maif-search", "maif-potential", "maif-elimination")


def hpsearch_target(row: Row) -> str:
    level = HPSEARCH_LESS_THAN_FIFO.get(row["treatment"])
    if level is None:
        return "-"
    return f"≥ {100 * level:.0f} % less than FIFO, top job ≤ {HPSEARCH_SLOWDOWN:g}x"


def hpsearch_meets(row: Row) -> bool | None:
    """Whether the row meets its target in every round (None: the row has none, e.g. FIFO). A round
    without a figure (the target not reached, no top job) counts against it, as does a run short of the
    method."""
    level = HPSEARCH_LESS_THAN_FIFO.get(row["treatment"])
    if level is None:
        return None
    less, slow = row["less_than_fifo_095"], row["top_job_slowdown"]
    if row["rounds"] < 3 or row["configurations"] < 12 or None in less or None in slow or not less:
        return False
    return min(less) >= level and max(slow) <= HPSEARCH_SLOWDOWN  # issue 26: in every round


def _hpsearch_order(row: Row) -> tuple:
    t = row["treatment"]
    rank = HPSEARCH_ORDER.index(t) if t in HPSEARCH_ORDER else len(HPSEARCH_ORDER)
    return (row["task"], row["dataplane"], row["framework"], rank, t)


def render_hpsearch(summary: Mapping[str, Any]) -> str:
    rows = sorted(summary["rows"], key=_hpsearch_order)
    body = []
    for r in rows:
        met = hpsearch_meets(r)
        body.append(
            [
                r["task"],
                r["dataplane"],
                r["framework"],
                r["configurations"],
                r["treatment"],
                r["rounds"],
                _spread(r["time_to_090"], fmt=".1f"),
                _spread(r["time_to_095"], fmt=".1f"),
                "-" if r["treatment"] == "fifo" else _spread(r["less_than_fifo_095"], 100, unit=" %"),
                _spread(r["top_job_slowdown"], fmt=".2f", unit="x"),
                hpsearch_target(r),
                "-" if met is None else ("yes" if met else "**no**"),
            ]
        )
    headers = ["task", "dataplane", "framework", "configurations", "treatment", "rounds", "to 0.90 A* s",
               "to 0.95 A* s", "less time than FIFO to 0.95 A*", "top job vs alone", "target", "met"]  # fmt: skip
    return markdown_table(headers, body) + "\n\nCommands: " + "; ".join(sorted({f"`{r['command']}`" for r in rows}))


# Issue 25's targets for the network-decided scheme (treatment "mlfc") against full delivery of the same
# model, dataplane and number of jobs: congested, >= 40 % less time to 0.95 A* and final accuracy within
# 0.5 pp; alone (uncongested), within 2 % of full delivery's time and 0.5 pp; the method: >= 3 rounds, 2 seeds.
APPROX_LESS_THAN_FULL = 0.40
APPROX_ALONE_SLOWER = 0.02
APPROX_ACC_PP = 0.5
APPROX_ORDER = ("full", "fp16", "topk-ef", "selective-old", "mlfc-push", "mlfc", "mlfc-share")


def _mean(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None and not math.isnan(v)]
    return statistics.fmean(vals) if vals else None


# the treatments that are issue 25's scheme (the targets apply): the second design and the third
APPROX_SCHEMES = ("mlfc", "mlfc-share")


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
                _spread(r["time_to_095"], fmt=".1f"),
                "-" if r["treatment"] == "full" else _spread(r.get("less_than_full_095", []), 100, unit=" %"),
                _spread(r["final_acc"], fmt=".4f"),
                "-" if r["treatment"] == "full" or acc is None or facc is None else f"{100 * (facc - acc):.2f} pp",
                "-" if r["bytes_sent_share"] is None else f"{100 * r['bytes_sent_share']:.0f} %",
                approx_target(r),
                "-" if met is None else ("yes" if met else "**no**"),
            ]
        )
    headers = ["model", "dataplane", "jobs", "treatment", "rounds x seeds", "to 0.95 A* s",
               "less time than full (same run)", "final acc (last 5)", "below full", "bytes vs full", "target",
               "met"]  # fmt: skip
    return markdown_table(headers, body) + "\n\nCommands: " + "; ".join(sorted({f"`{r['command']}`" for r in rows}))


# Issue 29's chaos targets per seed: every acknowledged report found in the store, every acknowledged
# decision applied on every switch, restores within 1 s, final accuracy within 0.5 pp of the undisturbed
# run; the method: >= 10 faults, among them kill -9, SIGSTOP and a link down (lab/chaos/schedule.py KINDS).
CHAOS_RESTORE_S = 1.0
CHAOS_ACC_PP = 0.5
CHAOS_FAULTS = 10
CHAOS_ACTIONS = {"kill": "kill -9", "stop": "SIGSTOP", "down": "link down"}


def chaos_meets(row: Row) -> bool:
    acc, base = row["final_acc"], row["undisturbed_acc"]
    return (
        row["faults"] >= CHAOS_FAULTS
        and set(row.get("kinds", {})) >= set(CHAOS_ACTIONS)
        and row["reports_found"] == row["reports_acked"]
        and row["decisions_applied"] == row["decisions_acked"]
        and row["max_restore_s"] is not None
        and row["max_restore_s"] <= CHAOS_RESTORE_S
        and acc is not None
        and base is not None
        and 100 * abs(acc - base) <= CHAOS_ACC_PP
    )


def render_chaos(summary: Mapping[str, Any]) -> str:
    rows = sorted(summary["rows"], key=lambda r: (r["dataplane"], r["seed"], r["faults"]))
    body = []
    for r in rows:
        acc, base = r["final_acc"], r["undisturbed_acc"]
        delta = "-" if acc is None or base is None else f"{100 * (acc - base):+.2f} pp"
        restore = "-" if r["max_restore_s"] is None else f"{r['max_restore_s']:.3f}"
        kinds = ", ".join(f"{CHAOS_ACTIONS.get(k, k)} {n}" for k, n in sorted(r.get("kinds", {}).items()))
        body.append([r["dataplane"], r["seed"], r["faults"], kinds or "kill -9 only",
                     f"{r['reports_found']}/{r['reports_acked']}",
                     f"{r['decisions_applied']}/{r['decisions_acked']}", restore,
                     "-" if acc is None else f"{acc:.4f}", "-" if base is None else f"{base:.4f}", delta,
                     "yes" if chaos_meets(r) else "**no**"])  # fmt: skip
    headers = ["dataplane", "seed", "faults", "of which", "acked reports in the store",
               "acked decisions on every switch",
               "max restore s", "final acc", "undisturbed acc", "difference", "targets met"]  # fmt: skip
    target = (f"Targets: every acknowledged report and decision accounted for, restore ≤ {CHAOS_RESTORE_S:g} s, "
              f"accuracy within {CHAOS_ACC_PP:g} pp, ≥ {CHAOS_FAULTS} faults per seed with "
              f"{', '.join(CHAOS_ACTIONS.values())} among them.")  # fmt: skip
    cmds = "; ".join(sorted({f"`{r['command']}`" for r in rows}))
    return markdown_table(headers, body) + f"\n\n{target}\n\nCommands: {cmds}"


def _sim_scale_groups(summary: Mapping[str, Any]) -> dict[tuple, list[Row]]:
    """The sweep's rows by (host model, cc, jobs, iterations, scale), in order (jumbo first)."""
    groups: dict[tuple, list[Row]] = {}

    def order(r: Row) -> tuple:
        return (r["hosts"] != "jumbo", r["hosts"], r["cc"], r["jobs"], r["iterations"], r["scale"], r["seed"])

    for r in sorted(summary["rows"], key=order):
        groups.setdefault((r["hosts"], r["cc"], r["jobs"], r["iterations"], r["scale"]), []).append(r)
    return groups


def render_sim_scale(summary: Mapping[str, Any]) -> str:
    """Issue 28 item 4: MLTCP against the unmodified controller on ns-3 at growing fractions of the models'
    bytes; per seed, and where the figures stop changing."""
    body = []
    for (hosts, cc, jobs, its, scale), rows in _sim_scale_groups(summary).items():
        body.append([
            f"{scale:g}",
            f"{cc}, {jobs} jobs, {its} iterations, hosts {hosts}",
            ", ".join(str(r["seed"]) for r in rows),
            ", ".join(f"{r['base_avg_ms']:.3g}" for r in rows),
            ", ".join(f"{r['avg_speedup']:.3f}" for r in rows),
            ", ".join(f"{r['p99_speedup']:.3f}" for r in rows),
            ", ".join(f"{r['ideal_speedup']:.3f}" for r in rows),
            ", ".join(f"{r['interleaved_mltcp']}/{r['interleaved_base']} of {r['links_shared']}" for r in rows),
            ", ".join(f"{r['events'] / 1e6:,.1f}M in {r['wall_s']:,.0f} s" if r.get("events") else "-" for r in rows),
        ])  # fmt: skip
    headers = ["scale", "runs", "seeds", "unmodified avg ms", "MLTCP avg speed-up", "p99 speed-up",
               "ideal speed-up", "host links interleaved (MLTCP/unmodified)", "events, wall (both runs)"]  # fmt: skip
    settled = summary.get("settled_from", {})
    lines = [
        f"- {k}: the figures settle from scale **{'-' if v is None else f'{v:g}'}** (the seed means of "
        f"{', '.join(summary.get('compared', []))} within {summary.get('tolerance')} of every larger scale's)"
        for k, v in settled.items()
    ]
    for hosts, per in (summary.get("events_per_job_iteration_per_scale") or {}).items():
        if per:
            lines.append(f"- events per job-iteration per unit of scale, hosts {hosts} (median of the runs): {per:,}")
    cmds = "; ".join(sorted({f"`{r['command']}`" for r in summary["rows"]}))
    models = _sim_host_models(summary)
    return (markdown_table(headers, body) + "\n\n" + "\n".join(lines) + (f"\n\n{models}" if models else "")
            + f"\n\nCommands: {cmds}")  # fmt: skip


SIM_COMPARED = ("avg_speedup", "p99_speedup", "ideal_speedup")


def sim_host_models(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each faster host model against jumbo hosts at every scale both ran (issue 28 item 4): the seed means
    of SIM_COMPARED side by side, the largest difference and whether it is within the sweep's tolerance
    (a model stands for jumbo only where it is), its events as a share of jumbo's and events per wall s."""
    groups = _sim_scale_groups(summary)
    tol = summary.get("tolerance", 0.03)
    out = []
    for (hosts, cc, jobs, its, scale), rows in groups.items():
        ref = groups.get(("jumbo", cc, jobs, its, scale))
        if hosts == "jumbo" or ref is None:
            continue
        mine = {k: statistics.fmean(r[k] for r in rows) for k in SIM_COMPARED}
        jumbo = {k: statistics.fmean(r[k] for r in ref) for k in SIM_COMPARED}
        worst = max(abs(mine[k] - jumbo[k]) for k in SIM_COMPARED)
        events = all(r.get("events") for r in rows + ref)
        rates = [r["events"] / r["wall_s"] for r in rows if r.get("events") and r.get("wall_s")]
        out.append({
            "hosts": hosts, "cc": cc, "jobs": jobs, "iterations": its, "scale": scale, "seeds": len(rows),
            "jumbo_seeds": len(ref), "means": mine, "jumbo_means": jumbo, "largest_difference": worst,
            "agree": worst <= tol, "tolerance": tol,
            "events_of_jumbo": statistics.fmean(r["events"] for r in rows) / statistics.fmean(r["events"] for r in ref)
            if events else None,
            "events_per_s": statistics.median(rates) if rates else None,
        })  # fmt: skip
    return out


def _sim_host_models(summary: Mapping[str, Any]) -> str:
    body = [
        [
            f"{c['scale']:g}", f"{c['cc']}, {c['jobs']} jobs, {c['iterations']} iterations", c["hosts"],
            f"{c['seeds']} / {c['jumbo_seeds']}",
            *(f"{c['means'][k]:.3f} ({c['jumbo_means'][k]:.3f})" for k in SIM_COMPARED),
            f"{c['largest_difference']:.3f}: {'agree' if c['agree'] else 'differ'}",
            "-" if c["events_of_jumbo"] is None else f"{c['events_of_jumbo']:.2f}",
            "-" if c["events_per_s"] is None else f"{c['events_per_s']:,.0f}",
        ]
        for c in sim_host_models(summary)
    ]  # fmt: skip
    if not body:
        return ""
    tol = summary.get("tolerance", 0.03)
    headers = ["scale", "runs", "hosts", "seeds (jumbo's)", "MLTCP avg speed-up (jumbo)", "p99 speed-up (jumbo)",
               "ideal speed-up (jumbo)", f"largest difference (tolerance {tol})", "events, of jumbo's",
               "events per wall s"]  # fmt: skip
    return "Faster host models against jumbo hosts at the same scale (seed means):\n\n" + markdown_table(headers, body)


def plot_sim_scale(summary: Mapping[str, Any], path: Path) -> None:
    """The seed means of MLTCP's avg and p99 speed-up and the ideal against the scale (log)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    by_run: dict[tuple, dict[float, list[Row]]] = {}
    for (hosts, cc, jobs, its, scale), rows in _sim_scale_groups(summary).items():
        by_run.setdefault((hosts, cc, jobs, its), {})[scale] = rows
    for (hosts, cc, jobs, its), at in by_run.items():
        scales = sorted(at)
        for what, style in (("avg_speedup", "-o"), ("p99_speedup", "-s"), ("ideal_speedup", "--")):
            ax.plot(scales, [statistics.fmean(r[what] for r in at[s]) for s in scales],
                    style if hosts == "jumbo" else {"-o": ":o", "-s": ":s", "--": "-."}[style],
                    label=f"{cc}, {jobs} jobs, {its} it., {hosts}: {what.replace('_', ' ')}")  # fmt: skip
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("scale (fraction of the models' bytes and compute times)")
    ax.set_ylabel("speed-up over the unmodified controller")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


RENDERERS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "chaos": render_chaos,
    "mltcp": render_mltcp,
    regime.EXPERIMENT: regime.render,
    "coordinated": render_coordinated,
    "bench": render_bench,
    "dataplane": render_dataplane,
    "transport-designs": render_transport_designs,
    "hpsearch": render_hpsearch,
    "approx": render_approx,
    "sim-scale": render_sim_scale,
}
PLOTS: dict[str, Callable[[Mapping[str, Any], Path], None]] = {
    "mltcp": plot_mltcp,
    regime.EXPERIMENT: regime.plot,
    "sim-scale": plot_sim_scale,
}


def render(experiment: str, data: Path = DATA) -> str:
    if experiment not in RENDERERS:
        raise FiguresError(f"no table for experiment {experiment!r} (known: {', '.join(sorted(RENDERERS))})")
    summary = load(experiment, data)
    if not summary["rows"]:
        return f"*(no published rows yet: docs/data/{experiment}/summary.json)*"
    return RENDERERS[experiment](summary)


BLOCK = re.compile(r"(<!-- figures:([a-z0-9_-]+) -->\n)(.*?)(<!-- /figures:\2 -->)", re.S)


def fill(text: str, tables: Callable[[str], str]) -> str:
    """``text`` with every figures block's body replaced by ``tables(experiment)``."""
    return BLOCK.sub(lambda m: f"{m.group(1)}{tables(m.group(2))}\n{m.group(4)}", text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="fail if a docs block differs from its data; write nothing")
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--img", type=Path, default=IMG, help="where the plots go (%(default)s)")
    ap.add_argument("docs", nargs="*", type=Path, default=list(DOCS), help="files whose blocks to regenerate")
    args = ap.parse_args(argv)
    cache: dict[str, str] = {}

    def tables(experiment: str) -> str:
        if experiment not in cache:
            cache[experiment] = render(experiment, args.data)
        return cache[experiment]

    stale = []
    try:
        for doc in args.docs:
            old = doc.read_text()
            new = fill(old, tables)
            if new != old:
                stale.append(doc)
                if not args.check:
                    _atomic_write(doc, new)
    except (FiguresError, OSError) as exc:
        print(f"figures: {exc}", file=sys.stderr)
        return 2
    if args.check:
        for doc in stale:
            print(f"figures: {doc} is not what docs/data says: run `make figures`", file=sys.stderr)
        return 1 if stale else 0
    for experiment in sorted(cache):
        if experiment in PLOTS:
            PLOTS[experiment](load(experiment, args.data), args.img / f"figures-{experiment}.png")
    print(f"figures: {len(cache)} experiment(s) in {len(args.docs)} file(s); rewritten: "
          f"{', '.join(str(d) for d in stale) or 'none'}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
