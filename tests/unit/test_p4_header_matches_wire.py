"""The P4 shim header and the Python wire format are one contract: same fields, same widths,
same order, same constants."""

from __future__ import annotations

import re
from pathlib import Path

from mlfc import contract, wire

P4SRC = Path(__file__).resolve().parents[2] / "p4src"


def _typedefs(text: str) -> dict[str, int]:
    return {name: int(w) for w, name in re.findall(r"typedef\s+bit<(\d+)>\s+(\w+)\s*;", text)}


def _p4_header_fields(text: str, name: str, typedefs: dict[str, int]) -> list[tuple[str, int]]:
    """Fields as (name, width), widths of typedef'd fields (``importance_t importance;``) resolved."""
    body = re.search(rf"header\s+{name}\s*\{{(.*?)\}}", text, re.S)
    assert body, f"header {name} not found"
    out = []
    for typ, f in re.findall(r"(bit<\d+>|\w+)\s+(\w+)\s*;", body.group(1)):
        out.append((f, int(typ[4:-1]) if typ.startswith("bit<") else typedefs[typ]))
    return out


def _p4_const(text: str, name: str) -> int:
    m = re.search(rf"const\s+\w+(?:<\d+>)?\s+{name}\s*=\s*(0x[0-9a-fA-F]+|\d+)\s*;", text)
    assert m, f"const {name} not found"
    return int(m.group(1), 0)


def test_shim_header_matches_wire_fields() -> None:
    text = (P4SRC / "shared" / "header.p4").read_text()
    typedefs = _typedefs((P4SRC / "shared" / "define.p4").read_text())
    assert _p4_header_fields(text, "mlfc_h", typedefs) == list(wire.SHIM_FIELDS)


def test_constants_match() -> None:
    text = (P4SRC / "shared" / "define.p4").read_text()
    assert _p4_const(text, "SHIM_PORT_BASE") == wire.SHIM_PORT_BASE
    assert _p4_const(text, "SHIM_PORT_MASK") == wire.SHIM_PORT_MASK
    assert _p4_const(text, "SHIM_VERSION") == wire.SHIM_VERSION
    assert _p4_const(text, "MSG_DATA") == wire.MsgType.DATA
    assert _p4_const(text, "MSG_ACK") == wire.MsgType.ACK
    assert _p4_const(text, "MSG_CNP") == wire.MsgType.CNP
    assert _p4_const(text, "IMPORTANCE_PROTECTED") == wire.IMPORTANCE_PROTECTED
    assert _p4_const(text, "PRIORITY_CONTROL") == contract.PRIORITY_CONTROL
    assert _p4_const(text, "PRIORITY_DEFAULT") == contract.PRIORITY_DEFAULT
