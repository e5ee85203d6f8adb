"""Desired vs actual table entries -> the fewest P4Runtime updates, in as few Write RPCs as possible.

Entries are identified by ``TableEntry.key`` (table, match, priority). A key only in the desired set
is an INSERT, only on the switch a DELETE, in both with a different action or parameters a MODIFY
(in place, so traffic never sees the entry missing). Applying the diff and diffing again yields an
empty diff: reconciliation is idempotent.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from finsy.proto import p4r

from mlfc.controller.entries import EntryKey, TableEntry
from mlfc.controller.pipeline import Pipeline


@dataclass(frozen=True, slots=True)
class Diff:
    inserts: tuple[TableEntry, ...] = ()
    modifies: tuple[TableEntry, ...] = ()
    deletes: tuple[TableEntry, ...] = ()

    def __len__(self) -> int:
        return len(self.inserts) + len(self.modifies) + len(self.deletes)

    @property
    def empty(self) -> bool:
        return len(self) == 0

    def summary(self) -> str:
        return f"+{len(self.inserts)} ~{len(self.modifies)} -{len(self.deletes)}"


def index(entries: Iterable[TableEntry]) -> dict[EntryKey, TableEntry]:
    """Entries by key; two desired entries with one key would be a compiler bug, so it raises."""
    out: dict[EntryKey, TableEntry] = {}
    for e in entries:
        if e.key in out:
            raise ValueError(f"two entries with the same key: {out[e.key]} ({out[e.key].origin}) and {e} ({e.origin})")
        out[e.key] = e
    return out


def diff(desired: Iterable[TableEntry], actual: Iterable[TableEntry]) -> Diff:
    want = index(desired)
    have = {e.key: e for e in actual}
    inserts, modifies, deletes = [], [], []
    for key, e in want.items():
        cur = have.get(key)
        if cur is None:
            inserts.append(e)
        elif cur.action_value != e.action_value:
            modifies.append(e)
    for key, e in have.items():
        if key not in want:
            deletes.append(e)
    return Diff(tuple(inserts), tuple(modifies), tuple(deletes))


def apply_diff(actual: Iterable[TableEntry], d: Diff) -> dict[EntryKey, TableEntry]:
    """What the switch holds after ``d`` succeeded (the reconciler's model of the switch)."""
    state = {e.key: e for e in actual}
    for e in d.deletes:
        state.pop(e.key, None)
    for e in (*d.modifies, *d.inserts):
        state[e.key] = e
    return state


def to_updates(d: Diff, pipeline: Pipeline) -> list[p4r.Update]:
    """DELETEs first, then MODIFYs, then INSERTs: a full table frees space before it is refilled
    (BMv2 applies a batch in order; the keys of the three groups are disjoint anyway)."""
    ups = [p4r.Update(type=p4r.Update.DELETE, entity=p4r.Entity(table_entry=pipeline.encode(e))) for e in d.deletes]
    ups += [p4r.Update(type=p4r.Update.MODIFY, entity=p4r.Entity(table_entry=pipeline.encode(e))) for e in d.modifies]
    ups += [p4r.Update(type=p4r.Update.INSERT, entity=p4r.Entity(table_entry=pipeline.encode(e))) for e in d.inserts]
    return ups


def batches(updates: list[p4r.Update], size: int) -> Iterator[list[p4r.Update]]:
    for i in range(0, len(updates), size):
        yield updates[i : i + size]


def count_by_table(entries: Iterable[TableEntry]) -> dict[str, int]:
    return dict(Counter(e.table for e in entries))
