"""The end-to-end runs' coordinator table (docs/data/coordinated, written by lab/e2e/cli.py beside its MLTCP rows)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mlfc.lab.mltcp.figures import mltcp_order
from mlfc.lab.results import markdown_table
from mlfc.lab.summaries import spread_cell

COORDINATED_SCHEMA = (
    "issue 24's fields: one row per mix, dataplane and treatment of the coordinator's against its "
    "baseline in the same rounds; fallback_engaged_s per round (null: never engaged)"
)


def render_coordinated(summary: Mapping[str, Any]) -> str:
    """The coordinator's treatments (MAIF, interleaving, MLTCP with either, the fallback) against their baseline
    in the same rounds; issue 24 sets them no target, the MLTCP rows above are the comparison."""
    rows = sorted(summary["rows"], key=mltcp_order)
    body = []
    for r in rows:
        engaged = r.get("fallback_engaged_s")
        body.append([
            r["mix"], r["dataplane"], r["treatment"], f"`{r['f']}`", r["rounds"],
            spread_cell(r["share_of_ideal"], 100, unit=" %"),
            f"{r['avg_speedup']:.2f}x / {r['ideal_avg']:.2f}x",
            f"{r['p99_speedup']:.2f}x / {r['ideal_p99']:.2f}x",
            "/".join("-" if i is None else str(i) for i in r["interleaved_from"]),
            "-" if engaged is None else "/".join("never" if e is None else f"{e:g}" for e in engaged),
        ])  # fmt: skip
    headers = ["mix", "dataplane", "treatment", "MLTCP F", "rounds", "of ideal gain: mean (min..max)",
               "avg speed-up / ideal", "p99 speed-up / ideal", "interleaved from", "fallback engaged at s"]  # fmt: skip
    return markdown_table(headers, body) + "\n\nCommands: " + "; ".join(sorted({f"`{r['command']}`" for r in rows}))
