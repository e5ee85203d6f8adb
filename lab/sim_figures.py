"""The ns-3 scale sweep's table and plot (docs/data/sim-scale, written by mlfc.sim's scale_sweep)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mlfc.lab.results import markdown_table
from mlfc.lab.summaries import Row


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
