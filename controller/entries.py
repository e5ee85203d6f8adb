"""Table entries as plain, hashable values: what the compiler produces and what the reconciler diffs.

A ``TableEntry`` names its table, match fields and action by their P4Info names and holds integers
only. Don't-care fields are simply absent from ``match`` (P4Runtime requires them to be omitted), so
two entries are the same P4Runtime entry exactly when their ``key`` is equal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from mlfc.match import Exact, Lpm, Match, Range, Ternary

# The match kinds are mlfc.match's (shared with the reference switch); importable from here too.
__all__ = [
    "EntryKey",
    "Exact",
    "Lpm",
    "Match",
    "MatchKey",
    "Range",
    "TableEntry",
    "Ternary",
    "entry",
    "range_to_ternaries",
    "ranges_as_ternaries",
]


MatchKey = tuple[tuple[str, Match], ...]
EntryKey = tuple[str, MatchKey, int]


@dataclass(frozen=True, slots=True)
class TableEntry:
    """One table entry. ``match`` and ``params`` are sorted by name (use ``entry()`` to build one)."""

    table: str
    match: MatchKey
    action: str
    params: tuple[tuple[str, int], ...] = ()
    priority: int = 0
    # Where the entry came from (e.g. "jobs[3].windows[0]"); not part of the switch state.
    origin: str = field(default="", compare=False)

    @property
    def key(self) -> EntryKey:
        """What identifies the entry on the switch: table, match and priority."""
        return (self.table, self.match, self.priority)

    @property
    def action_value(self) -> tuple[str, tuple[tuple[str, int], ...]]:
        return (self.action, self.params)

    def match_dict(self) -> dict[str, Match]:
        return dict(self.match)

    def params_dict(self) -> dict[str, int]:
        return dict(self.params)

    def __str__(self) -> str:
        short = self.table.rsplit(".", 1)[-1]
        fields = ", ".join(f"{k.rsplit('.', 1)[-1]}={_fmt(m)}" for k, m in self.match)
        args = ", ".join(f"{k}={v}" for k, v in self.params)
        prio = f" prio={self.priority}" if self.priority else ""
        return f"{short}[{fields}]{prio} -> {self.action}({args})"


def entry(
    table: str,
    match: Mapping[str, Match],
    action: str,
    params: Mapping[str, int] | None = None,
    priority: int = 0,
    origin: str = "",
) -> TableEntry:
    """Build a ``TableEntry`` in canonical form: fields sorted by name, ternary values masked (so an entry
    compares equal to the switch's read-back of it, which P4Runtime keeps in that form)."""
    return TableEntry(
        table=table,
        match=tuple(sorted((k, m.masked() if isinstance(m, Ternary) else m) for k, m in match.items())),
        action=action,
        params=tuple(sorted((params or {}).items())),
        priority=priority,
        origin=origin,
    )


def range_to_ternaries(r: Range, bits: int) -> list[Ternary]:
    """The fewest value/mask pairs that together match exactly ``r.lo..r.hi`` of a ``bits``-wide field
    (aligned power-of-two blocks, at most 2 * bits - 2): a range for a target that matches it ternary."""
    full = (1 << bits) - 1
    if not 0 <= r.lo <= r.hi <= full:
        raise ValueError(f"range {r.lo}..{r.hi} outside a {bits}-bit field")
    out = []
    lo = r.lo
    while lo <= r.hi:
        size = lo & -lo if lo else 1 << bits  # the largest block aligned at lo...
        while size > r.hi - lo + 1:  # ...that does not pass hi
            size >>= 1
        out.append(Ternary(lo, full & ~(size - 1)))
        lo += size
    return out


def ranges_as_ternaries(entries: list[TableEntry], fields: Mapping[str, Mapping[str, int]]) -> list[TableEntry]:
    """``entries`` with each Range on ``fields[table][name]`` (its width) replaced by ternary prefixes:
    one entry per prefix, same action and priority (the prefixes are disjoint, so no order among them)."""
    out: list[TableEntry] = []
    for e in entries:
        widths = fields.get(e.table, {})
        parts = [dict(e.match)]
        for name, m in e.match:
            if name in widths and isinstance(m, Range):
                parts = [{**p, name: t} for p in parts for t in range_to_ternaries(m, widths[name])]
        parts = [{k: v for k, v in p.items() if not (isinstance(v, Ternary) and v.mask == 0)} for p in parts]
        for k, p in enumerate(parts):
            origin = e.origin if len(parts) == 1 else f"{e.origin} prefix {k}".lstrip()
            out.append(TableEntry(e.table, tuple(sorted(p.items())), e.action, e.params, e.priority, origin))
    return out


def _fmt(m: Match) -> str:
    match m:
        case Exact(v):
            return str(v)
        case Lpm(v, p):
            return f"{v:#x}/{p}"
        case Ternary(v, mask):
            return f"{v:#x}&&&{mask:#x}"
        case Range(lo, hi):
            return f"{lo}..{hi}"
    return repr(m)
