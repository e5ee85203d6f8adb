"""What the Tofino compiler made of p4src/tna/mlfc.p4, table by table: the stages each table sits in
and the SRAM, TCAM, map RAM, hash bits, crossbar bytes, gateways, statistics ALUs and VLIW slots it
takes, summed over its stages, then PHV containers and the pipeline totals.

    python -m mlfc.lab.tofino_resources [BUILD_DIR] [--out resources.md]

BUILD_DIR is the compiler's output directory (default p4src/build/tofino): it reads
pipe/logs/resources.json (per stage, which table uses which unit) and pipe/logs/metrics.json (totals).
`make p4-tofino` runs it and commits the result as p4src/build/tofino/resources.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mlfc import contract
from mlfc.lab.results import markdown_table

# resources.json stage sections -> the column they count (one unit per listed element that names the table).
UNITS = {
    "rams": "SRAM",
    "tcams": "TCAM",
    "map_rams": "map RAM",
    "hash_bits": "hash bits",
    "xbar_bytes": "xbar bytes",
    "gateways": "gateways",
    "statistic_alus": "stats ALUs",
    "meter_alus": "meter ALUs",
    "vliw": "VLIW",
}
STAGES_TOFINO1 = 12


@dataclass
class TableUse:
    stages: set[int] = field(default_factory=set)
    units: dict[str, int] = field(default_factory=lambda: defaultdict(int))


@dataclass
class Summary:
    compiler: str
    stages_used: int
    stages_available: int
    tables: dict[str, TableUse]
    totals: dict[str, int]
    phv: list[tuple[str, int, int, int]]  # (kind, width, containers occupied, bits occupied)


def _users(node: object) -> Iterator[str]:
    """The table names an element of a stage section is used by (any depth: VLIW nests them)."""
    if isinstance(node, dict):
        for key in ("used_by", "used_by_table", "table_name"):
            if isinstance(node.get(key), str):
                yield node[key]
        yield from node.get("used_by_tables", []) or []
        for value in node.values():
            if isinstance(value, dict | list):
                yield from _users(value)
    elif isinstance(node, list):
        for item in node:
            yield from _users(item)


def _elements(section: object) -> Iterator[object]:
    """The hardware units of a section: the list among its values (srams, tcams, bits, ...)."""
    if isinstance(section, dict):
        for value in section.values():
            if isinstance(value, list):
                yield from value


def summarize(build: Path) -> Summary:
    logs = build / "pipe" / "logs"
    resources = json.loads((logs / "resources.json").read_text())
    metrics = json.loads((logs / "metrics.json").read_text())
    mau = resources["resources"]["mau"]
    tables: dict[str, TableUse] = defaultdict(TableUse)
    for stage in mau["mau_stages"]:
        number = stage["stage_number"]
        for section, unit in UNITS.items():
            for element in _elements(stage.get(section)):
                for name in set(_users(element)):  # a unit shared by two uses of one table counts once
                    tables[name].stages.add(number)
                    tables[name].units[unit] += 1
        for entry in _elements(stage.get("logical_tables")):
            if isinstance(entry, dict) and "table_name" in entry:
                tables[entry["table_name"]].stages.add(number)
    used = {n for t in tables.values() for n in t.stages}
    phv = [
        (kind, u["bit_width"], u["containers_occupied"], u["bits_occupied"])
        for kind in ("normal", "tagalong", "mocha", "dark")
        for u in metrics.get("phv", {}).get(kind, []) or []
    ]
    m = metrics.get("mau", {})
    totals = {k: m[k] for k in ("srams", "tcams", "map_rams", "logical_tables") if k in m}
    return Summary(
        compiler=str(metrics.get("compiler_version", "?")),
        stages_used=len(used),
        stages_available=int(mau.get("nStages", STAGES_TOFINO1)),
        tables=dict(tables),
        totals=totals,
        phv=phv,
    )


COMPILER_MADE = "(compiler-made: conditions, assignments)"


def by_p4_table(tables: dict[str, TableUse]) -> dict[str, TableUse]:
    """Fold a table's `$action` (action data) half into it, and the compiler-made tables (gateways for
    `if`s, one-instruction tables for assignments: names without a dot) into one row."""
    out: dict[str, TableUse] = defaultdict(TableUse)
    for name, use in tables.items():
        p4 = name.removesuffix("$action").lstrip(".")
        key = p4 if "." in p4 else COMPILER_MADE
        out[key].stages |= use.stages
        for unit, n in use.units.items():
            out[key].units[unit] += n
    return dict(out)


def render(s: Summary) -> str:
    tables = by_p4_table(s.tables)
    units = [u for u in UNITS.values() if any(t.units.get(u) for t in tables.values())]
    ordered = sorted(tables.items(), key=lambda kv: (kv[0] == COMPILER_MADE, min(kv[1].stages, default=99), kv[0]))
    rows = [
        [name, ",".join(map(str, sorted(t.stages)))] + [str(t.units.get(u, 0) or "") for u in units]
        for name, t in ordered
    ]
    out = [
        f"# Tofino 1 resources of p4src/tna/mlfc.p4 (compiler {s.compiler})",
        "",
        f"Stages used: **{s.stages_used} of {s.stages_available}**. "
        + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in s.totals.items())
        + " (pipeline totals, metrics.json).",
        "",
        "Per P4 table (with its action-data half), summed over its stages (resources.json); the tables",
        "the compiler makes for `if` conditions and assignments are summed in the last row:",
        "",
        markdown_table(["table", "stages", *units], rows),
        "",
        "PHV containers occupied (metrics.json):",
        "",
        markdown_table(
            ["kind", "width", "containers", "bits"],
            [[k, str(w), str(c), str(b)] for k, w, c, b in s.phv if c],
        ),
        "",
    ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", nargs="?", type=Path, default=contract.TOFINO_BUILD)
    ap.add_argument("--out", type=Path, help="also write the summary here (markdown)")
    args = ap.parse_args(argv)
    try:
        text = render(summarize(args.build))
    except FileNotFoundError as e:
        print(f"{e.filename} missing: compile first (make p4-tofino)", file=sys.stderr)
        return 1
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
