"""The benchmarks' tables (docs/data/bench, transport-designs, dataplane; written by bench/)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from mlfc.lab.results import markdown_table

TRANSPORT_DESIGNS_SCHEMA = (
    "issue 28 item 2: one row per design (a commit) and controller, run trial by trial in one "
    "run; gbps and of_tcp (the ratio to the iperf3 TCP stream of the same trial) per trial; position: the "
    "design's place on the command line"
)


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


def render_dataplane_telemetry(summary: Mapping[str, Any]) -> str:
    """Issue 46: what the queue telemetry costs mlfc.p4's packet rate, each design against the run's first (the
    layout without it), by the median of all trials; one run per packet kind (UDP checksum 0, or one)."""
    body = []
    for r in summary["rows"]:
        ops, base = r["ops"]["mlfc"], r["ops"]["l3fwd"]
        cost = r.get("cost_vs_reference")
        body.append([
            r["design"],
            "yes" if r.get("udp_checksum") else "0 (none)",
            f"{ops.get('tables applied', 0)} ({base.get('tables applied', 0)}), {ops.get('table hits', 0)} hits",
            f"{ops.get('conditions', 0)} ({base.get('conditions', 0)})",
            f"{ops.get('primitives', 0)} ({base.get('primitives', 0)})",
            f"{ops.get('parser set ops', 0)} ({base.get('parser set ops', 0)})",
            ", ".join(f"{x['mlfc_pps']:,.0f}" for x in r["rounds"]),
            "-" if r.get("mlfc_pps_median") is None else f"{r['mlfc_pps_median']:,.0f}",
            "-" if cost is None or r.get("reference") == r["design"] else f"{100 * cost:.1f} %",
            _cpu(r),
            ", ".join(f"{x['ratio']:.2f}" for x in r["rounds"]),
        ])  # fmt: skip
    headers = ["design", "UDP checksum", "tables applied (l3fwd)", "conditions (l3fwd)", "primitives (l3fwd)",
               "parser set ops (l3fwd)", "mlfc.p4 packets/s by round", "median of all trials",
               "packet rate lost to it (target <= 3 %)", "BMv2 CPU µs per packet (rate lost at that cost)",
               "ratio to l3fwd.p4 by round"]  # fmt: skip
    commands = sorted({r["command"] for r in summary["rows"] if r.get("command")})
    r0 = summary["rows"][0]
    how = (f"Each design against the first of its run (the layout without the telemetry, same frames): "
           f"{r0['trials_per_round']} alternating trials of {r0['seconds']:g} s per round and program, "
           f"{r0['size']}-byte tagged ECT(0) frames; {summary.get('bmv2', 'BMv2')}. Commands: "
           + "; ".join(f"`{c}`" for c in commands or [summary.get("command", "")]))  # fmt: skip
    return markdown_table(headers, body) + "\n\n" + how


def _cpu(row: Mapping[str, Any]) -> str:
    cpu, cost = row.get("cpu_us_per_packet"), row.get("cpu_cost_vs_reference")
    if cpu is None:
        return "-"
    return f"{cpu:.1f}" + ("" if cost is None or row.get("reference") == row["design"] else f" ({100 * cost:+.1f} %)")
