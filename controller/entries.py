"""Table entries as plain, hashable values: what the compiler produces and what the reconciler diffs.

A ``TableEntry`` names its table, match fields and action by their P4Info names and holds integers
only. Don't-care fields are simply absent from ``match`` (P4Runtime requires them to be omitted), so
two entries are the same P4Runtime entry exactly when their ``key`` is equal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True, order=True)
class Exact:
    value: int


@dataclass(frozen=True, slots=True, order=True)
class Lpm:
    value: int
    prefix_len: int


@dataclass(frozen=True, slots=True, order=True)
class Ternary:
    value: int
    mask: int

    def __post_init__(self) -> None:
        # P4Runtime rejects value bits outside the mask; normalise so equal matches compare equal.
        object.__setattr__(self, "value", self.value & self.mask)


@dataclass(frozen=True, slots=True, order=True)
class Range:
    lo: int
    hi: int


Match = Exact | Lpm | Ternary | Range
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
    """Build a ``TableEntry`` with its fields in canonical (sorted) order."""
    return TableEntry(
        table=table,
        match=tuple(sorted(match.items())),
        action=action,
        params=tuple(sorted((params or {}).items())),
        priority=priority,
        origin=origin,
    )


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
