"""A reference model of how a switch looks up compiled entries (highest priority among matches wins),
so compilation tests check behaviour (which class/level/probability a packet gets), not just shapes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from mlfc.controller.entries import Exact, Lpm, Match, Range, TableEntry, Ternary


def matches(m: Match, value: int, width: int = 32) -> bool:
    match m:
        case Exact(v):
            return value == v
        case Lpm(v, p):
            mask = ((1 << p) - 1) << (width - p) if p else 0
            return value & mask == v & mask
        case Ternary(v, mask):
            return value & mask == v
        case Range(lo, hi):
            return lo <= value <= hi
    raise TypeError(m)


def lookup(entries: Iterable[TableEntry], table: str, fields: Mapping[str, int]) -> TableEntry | None:
    """The entry a switch would pick for a packet with ``fields`` (None: the default action)."""
    best: TableEntry | None = None
    for e in entries:
        if e.table != table:
            continue
        if all(matches(m, fields[name]) for name, m in e.match):
            if best is None or e.priority > best.priority:
                best = e
            elif e.priority == best.priority:
                raise AssertionError(f"ambiguous match: {best} and {e}")
    return best
