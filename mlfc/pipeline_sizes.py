"""Table sizes a deployment sets: the contract's defaults (p4src/shared/size.p4) up to a tested maximum.

A deployment that needs other sizes compiles them in::

    make p4 P4_SIZES="FLOW_CLASSIFIER_SIZE=16384 JOB_PRIORITY_SIZE=4096" P4_BUILD=deploy/p4

or, without p4c, resizes the committed outputs (the same P4Info and BMv2 JSON with the tables' sizes
changed, which is all the defines change; tests/p4 compare the two where p4c is present)::

    python -m mlfc.pipeline_sizes --size FLOW_CLASSIFIER_SIZE=16384 --out deploy/p4

and points its configuration's ``pipeline.p4info`` / ``pipeline.device_config`` at the result. The
controller, which refuses a policy whose entries do not fit the loaded P4Info's sizes, and the reference
switch accept sizes 1..``TableSpec.max_size``; the v1model program is the only one resized (the TNA
program's sizes are Tofino resources, fixed at its compile).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from finsy.proto import p4i
from google.protobuf import text_format

from mlfc import contract

# size.p4's macro for each table: the one vocabulary of `make p4 P4_SIZES=...` and of this module's CLI
MACROS: dict[str, str] = {
    "ROUTES_V4_SIZE": contract.ROUTES_V4,
    "FLOW_CLASSIFIER_SIZE": contract.FLOWS,
    "JOB_PRIORITY_SIZE": contract.JOB_PRIORITY,
    "ECN_PROFILE_SIZE": contract.ECN_PROFILE,
    "CONGESTION_LEVEL_SIZE": contract.CONGESTION_LEVELS,
    "DROP_THRESHOLD_SIZE": contract.DROP_THRESHOLD,
}


class SizeError(ValueError):
    pass


def size_problem(table: str, size: int) -> str | None:
    """Why ``size`` is not one ``table`` may have, or None."""
    spec = contract.TABLES[table]
    if not 1 <= size <= spec.max_size:
        return f"{table}: size {size} outside 1..{spec.max_size} (the largest tested)"
    return None


def parse_sizes(items: Iterable[str]) -> dict[str, int]:
    """``["FLOW_CLASSIFIER_SIZE=16384", ...]`` as {table name: size}, every one checked."""
    sizes: dict[str, int] = {}
    for item in items:
        macro, sep, value = item.partition("=")
        if not sep or macro not in MACROS:
            raise SizeError(f"{item!r}: expected MACRO=N with MACRO one of {', '.join(MACROS)}")
        try:
            size = int(value)
        except ValueError:
            raise SizeError(f"{item!r}: {value!r} is not an integer") from None
        if problem := size_problem(MACROS[macro], size):
            raise SizeError(problem)
        sizes[MACROS[macro]] = size
    return sizes


def resize_p4info(info: p4i.P4Info, sizes: Mapping[str, int]) -> p4i.P4Info:
    out = p4i.P4Info()
    out.CopyFrom(info)
    for t in out.tables:
        if t.preamble.name in sizes:
            t.size = sizes[t.preamble.name]
    return out


def _named_tables(doc: Mapping[str, Any]) -> Iterable[dict[str, Any]]:
    for pipeline in doc.get("pipelines", []):
        for t in pipeline.get("tables", []):
            if t.get("name") in contract.TABLES:
                yield t


def resize_bmv2_json(doc: Mapping[str, Any], sizes: Mapping[str, int]) -> dict[str, Any]:
    out = copy.deepcopy(dict(doc))
    for t in _named_tables(out):
        if t["name"] in sizes:
            t["max_size"] = sizes[t["name"]]
    return out


def bmv2_json_sizes(doc: Mapping[str, Any]) -> dict[str, int]:
    """The contract tables' sizes in a BMv2 JSON (``max_size``)."""
    return {t["name"]: t["max_size"] for t in _named_tables(doc)}


def write_resized(sizes: Mapping[str, int], out: Path, build: Path = contract.P4_BUILD) -> tuple[Path, Path]:
    """The committed mlfc.p4info.txtpb and mlfc.json of ``build`` with ``sizes``, written into ``out``."""
    text = (build / "mlfc.p4info.txtpb").read_text()
    info = text_format.Parse(text, p4i.P4Info())
    doc = json.loads((build / "mlfc.json").read_text())
    out.mkdir(parents=True, exist_ok=True)
    p4info_path, json_path = out / "mlfc.p4info.txtpb", out / "mlfc.json"
    header = "".join(line for line in text.splitlines(keepends=True)[:3] if line.startswith("#") or not line.strip())
    p4info_path.write_text(header + text_format.MessageToString(resize_p4info(info, sizes)))
    json_path.write_text(json.dumps(resize_bmv2_json(doc, sizes), indent=2) + "\n")
    return p4info_path, json_path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", action="append", default=[], metavar="MACRO=N", help="repeatable")
    ap.add_argument("--out", type=Path, required=True, help="directory for mlfc.p4info.txtpb and mlfc.json")
    args = ap.parse_args(argv)
    try:
        sizes = parse_sizes(args.size)
        paths = write_resized(sizes, args.out)
    except (SizeError, OSError) as exc:
        print(f"pipeline_sizes: {exc}", file=sys.stderr)
        return 2
    for table in contract.TABLES:
        print(f"{table}: {sizes.get(table, contract.TABLES[table].size)}")
    print(f"wrote {paths[0]} and {paths[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
