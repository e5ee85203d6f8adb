"""The study experiment's table and plot in the docs (``make figures``), from docs/data/search/summary.json."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mlfc.lab.results import markdown_table
from mlfc.lab.summaries import Row, spread_cell

ORDER = ("fifo", "maif-sum", "maif-search")


def _order(row: Row) -> tuple:
    t = row["treatment"]
    rank = ORDER.index(t) if t in ORDER else len(ORDER)
    return (row["task"], row["dataplane"], row["sampler"], row["pruner"], row["trials"], row["concurrency"], rank, t)


def render_search(summary: Mapping[str, Any]) -> str:
    rows = sorted(summary["rows"], key=_order)
    body = [
        [
            r["task"],
            r["dataplane"],
            f"{r['sampler']}, {r['pruner']}",
            f"{r['trials']} ({r['concurrency']} at once)",
            r["treatment"],
            r["rounds"],
            spread_cell(r["time_to_090"], fmt=".1f"),
            spread_cell(r["time_to_095"], fmt=".1f"),
            "-" if r["treatment"] == "fifo" else spread_cell(r["less_than_fifo_095"], 100, unit=" %"),
            spread_cell(r["best_value"], fmt=".3f"),
            spread_cell(r["pruned"], fmt=".1f"),
        ]
        for r in rows
    ]
    headers = ["task", "dataplane", "sampler, pruner", "trials", "treatment", "rounds", "to 0.90 A* s",
               "to 0.95 A* s", "less time than FIFO to 0.95 A*", "best value", "pruned"]  # fmt: skip
    return markdown_table(headers, body) + "\n\nCommands: " + "; ".join(sorted({f"`{r['command']}`" for r in rows}))


def plot_search(summary: Mapping[str, Any], path: Path) -> None:
    """The studies' best smoothed accuracy over time (rows' ``best_over_time``): a panel per task, dataplane
    and pruner, a colour per treatment, a line per round; nothing is drawn without rows."""
    rows = sorted(summary["rows"], key=_order)
    panels: dict[tuple, list[Row]] = {}
    for r in rows:
        panels.setdefault((r["task"], r["dataplane"], r["pruner"], r["trials"], r["concurrency"]), []).append(r)
    if not panels:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2), squeeze=False)
    colours = plt.get_cmap("tab10")
    treatments = sorted({r["treatment"] for r in rows}, key=lambda t: (ORDER.index(t) if t in ORDER else 9, t))
    for ax, ((task, plane, pruner, trials, k), group) in zip(axes[0], panels.items(), strict=True):
        for r in group:
            colour = colours(treatments.index(r["treatment"]) % 10)
            for i, curve in enumerate(r.get("best_over_time") or []):
                if curve:
                    xs, ys = zip(*curve, strict=True)
                    ax.step(xs, ys, where="post", color=colour, alpha=0.85, linewidth=1.4,
                            label=r["treatment"] if i == 0 else None)  # fmt: skip
            for frac, style in ((0.90, ":"), (0.95, "--")):
                a_star = r.get("a_star", {}).get("a_star")
                if a_star:
                    ax.axhline(frac * a_star, color="grey", linestyle=style, linewidth=0.8)
        ax.set_title(f"{task}, {plane}: {pruner}, {trials} trials, {k} at once", fontsize="medium")
        ax.set_xlabel("time since the study's start (s)")
        ax.set_ylabel("best smoothed accuracy so far")
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small", loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
