"""Match-action tables with P4Runtime semantics: exact/lpm/ternary/range keys, priorities, defaults.

Entries are validated as PI (BMv2's P4Runtime server) validates them, so an entry the model accepts is
one BMv2 accepts and vice versa. Writes update the lookup order incrementally (no re-sort per write);
lookups read an immutable snapshot copied from it, refreshed by the first lookup after writes outside a
batch (briefly taking the table's lock) or once at the end of a batch (lookups during a batch see the
table as it was before it).
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from mlfc import contract
from mlfc.match import Exact, Lpm, Match, Range, Ternary
from mlfc.refswitch.errors import Code, P4RuntimeError, invalid

MatchKey = tuple[Match | None, ...]  # one per table field, None = don't care (omitted in P4Runtime)


@dataclass(frozen=True, slots=True)
class Entry:
    match: MatchKey
    priority: int
    action: str
    params: tuple[int, ...]  # in the action's parameter order
    controller_metadata: int = 0
    metadata: bytes = b""
    # Compiled form for lookups: (field index, mask, value) and (field index, lo, hi) checks.
    masked: tuple[tuple[int, int, int], ...] = field(default=(), compare=False, repr=False)
    ranged: tuple[tuple[int, int, int], ...] = field(default=(), compare=False, repr=False)

    @property
    def key(self) -> tuple[MatchKey, int]:
        return (self.match, self.priority)

    def params_dict(self) -> dict[str, int]:
        return {p.name: v for p, v in zip(contract.ACTIONS[self.action].params, self.params, strict=True)}


def _full(width: int) -> int:
    return (1 << width) - 1


def _check_width(value: int, width: int, what: str) -> None:
    if not 0 <= value <= _full(width):
        raise invalid(f"{what}: value {value:#x} does not fit within {width} bits")


def make_match(spec: contract.TableSpec, match: Mapping[str, Match]) -> MatchKey:
    """Validate a match (field name -> Match, don't-care fields absent) the way PI does."""
    names = {f.name for f in spec.fields}
    for name in match:
        if name not in names:
            raise invalid(f"{spec.name}: unknown field in match key: {name}")
    key: list[Match | None] = []
    for f in spec.fields:
        m = match.get(f.name)
        what = f"{spec.name}: {f.name}"
        if m is None:
            if f.kind == "exact":
                raise invalid(f"{what}: missing non-ternary field in match key")
            key.append(None)
            continue
        expected = {"exact": Exact, "lpm": Lpm, "ternary": Ternary, "range": Range}[f.kind]
        if not isinstance(m, expected):
            raise invalid(f"{what}: invalid match type (field is {f.kind})")
        if isinstance(m, Exact):
            _check_width(m.value, f.bitwidth, what)
        elif isinstance(m, Lpm):
            _check_width(m.value, f.bitwidth, what)
            if m.prefix_len < 0 or m.prefix_len > f.bitwidth:
                raise invalid(f"{what}: prefix length {m.prefix_len} out of range 1..{f.bitwidth}")
            if m.prefix_len == 0:
                raise invalid(f"{what}: invalid representation of 'don't care' LPM match, omit the field instead")
            if m.value & _full(f.bitwidth - m.prefix_len):
                raise invalid(f"{what}: invalid LPM value, incorrect number of trailing zeros")
        elif isinstance(m, Ternary):
            _check_width(m.value, f.bitwidth, what)
            _check_width(m.mask, f.bitwidth, what)
            if m.mask == 0:
                raise invalid(f"{what}: invalid representation of 'don't care' ternary match, omit the field")
            if m.value & ~m.mask:
                raise invalid(f"{what}: invalid ternary value, make sure value & mask == value")
        else:
            _check_width(m.lo, f.bitwidth, what)
            _check_width(m.hi, f.bitwidth, what)
            if m.lo == 0 and m.hi == _full(f.bitwidth):
                raise invalid(f"{what}: invalid representation of 'don't care' range match, omit the field")
            if m.lo > m.hi:
                raise invalid(f"{what}: invalid range value, make sure low <= high")
        key.append(m)
    return tuple(key)


def check_priority(spec: contract.TableSpec, priority: int) -> None:
    if spec.needs_priority and priority <= 0:
        raise invalid(f"{spec.name}: zero priority for ternary match")
    if not spec.needs_priority and priority != 0:
        raise invalid(f"{spec.name}: non-zero priority for non-ternary match")
    if priority > 0x7FFFFFFF:
        raise invalid(f"{spec.name}: priority {priority} out of range (int32)")


def make_params(spec: contract.TableSpec, action: str, params: Mapping[str, int]) -> tuple[int, ...]:
    if action not in contract.ACTIONS:
        raise invalid(f"unknown action {action}")
    if action not in spec.actions:
        raise invalid(f"{spec.name}: invalid action for table: {action}")
    aspec = contract.ACTIONS[action]
    if len(params) != len(aspec.params):
        raise invalid(f"{action}: unexpected number of action parameters ({len(params)}, expected {len(aspec.params)})")
    out = []
    for p in aspec.params:
        if p.name not in params:
            raise invalid(f"{action}: unknown action parameter (missing {p.name})")
        _check_width(params[p.name], p.bitwidth, f"{action}.{p.name}")
        out.append(params[p.name])
    return tuple(out)


def compile_entry(spec: contract.TableSpec, entry: Entry) -> Entry:
    masked, ranged = [], []
    for i, (f, m) in enumerate(zip(spec.fields, entry.match, strict=True)):
        if m is None:
            continue
        if isinstance(m, Exact):
            masked.append((i, _full(f.bitwidth), m.value))
        elif isinstance(m, Lpm):
            mask = _full(f.bitwidth) ^ _full(f.bitwidth - m.prefix_len)
            masked.append((i, mask, m.value))
        elif isinstance(m, Ternary):
            masked.append((i, m.mask, m.value))
        else:
            ranged.append((i, m.lo, m.hi))
    return Entry(
        entry.match,
        entry.priority,
        entry.action,
        entry.params,
        entry.controller_metadata,
        entry.metadata,
        tuple(masked),
        tuple(ranged),
    )


def _lpm_slot(entry: Entry) -> tuple[int, int]:
    m = entry.match[0]
    return (m.prefix_len, m.value) if isinstance(m, Lpm) else (0, 0)


class Table:
    """One table's entries and default action.

    Writes keep the lookup order up to date incrementally: the entries sorted by (priority falling,
    insertion order) in a list that a write updates by bisection (O(log n) comparisons and one move of
    the list's tail), and for single-field LPM tables a dict per prefix length. The immutable snapshot
    that lookups read is copied from them (no sort) only when a lookup finds it out of date, or once at
    the end of a batch, so n writes cost O(n log n) comparisons, not a sort of the whole table each.
    """

    def __init__(self, spec: contract.TableSpec, size: int | None = None) -> None:
        self.spec = spec
        self.size = spec.size if size is None else size
        self._lock = threading.Lock()
        # key -> (insertion seq, entry); dict order is insertion order (a modify keeps its place)
        self._entries: dict[tuple[MatchKey, int], tuple[int, Entry]] = {}
        self._seq = 0
        self._deferred = 0  # > 0 inside Tables.batch(): lookups keep the old snapshot until it ends
        self._dirty = False  # written since the snapshot was taken
        self._order_keys: list[tuple[int, int]] = []  # (-priority, seq), sorted
        self._order: list[Entry] = []  # the entries in that order
        self._snapshot: tuple[Entry, ...] = ()
        self._lpm_only = all(f.kind == "lpm" for f in spec.fields) and len(spec.fields) == 1
        self._by_len: dict[int, dict[int, Entry]] = {}  # LPM-only: prefix len -> value -> entry
        self._lpm: tuple[tuple[int, int, dict[int, Entry]], ...] = ()  # (prefix len, mask, value -> entry)
        self.default: tuple[str, tuple[int, ...]] = self.initial_default

    @property
    def initial_default(self) -> tuple[str, tuple[int, ...]]:
        return (
            self.spec.default_action,
            make_params(self.spec, self.spec.default_action, dict(self.spec.default_params)),
        )

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> list[Entry]:
        return [e for _, e in self._entries.values()]

    def get(self, key: tuple[MatchKey, int]) -> Entry | None:
        found = self._entries.get(key)
        return found[1] if found else None

    def insert(self, entry: Entry) -> None:
        with self._lock:
            if entry.key in self._entries:
                raise P4RuntimeError(Code.ALREADY_EXISTS, f"{self.spec.name}: match entry exists, use MODIFY")
            if len(self._entries) >= self.size:
                raise P4RuntimeError(Code.RESOURCE_EXHAUSTED, f"{self.spec.name}: table full ({self.size})")
            self._seq += 1
            self._entries[entry.key] = (self._seq, entry)
            k = (-entry.priority, self._seq)
            i = bisect.bisect_right(self._order_keys, k)
            self._order_keys.insert(i, k)
            self._order.insert(i, entry)
            if self._lpm_only:
                plen, value = _lpm_slot(entry)
                self._by_len.setdefault(plen, {})[value] = entry
            self._dirty = True

    def modify(self, entry: Entry) -> None:
        with self._lock:
            old = self._entries.get(entry.key)
            if old is None:
                raise P4RuntimeError(Code.NOT_FOUND, f"{self.spec.name}: cannot find match entry")
            self._entries[entry.key] = (old[0], entry)
            self._order[self._position(old[0], entry.priority)] = entry
            if self._lpm_only:
                plen, value = _lpm_slot(entry)
                self._by_len[plen][value] = entry
            self._dirty = True

    def delete(self, key: tuple[MatchKey, int]) -> None:
        with self._lock:
            old = self._entries.pop(key, None)
            if old is None:
                raise P4RuntimeError(Code.NOT_FOUND, f"{self.spec.name}: cannot find match entry")
            i = self._position(old[0], old[1].priority)
            del self._order_keys[i]
            del self._order[i]
            if self._lpm_only:
                plen, value = _lpm_slot(old[1])
                slot = self._by_len[plen]
                del slot[value]
                if not slot:
                    del self._by_len[plen]
            self._dirty = True

    def _position(self, seq: int, priority: int) -> int:
        i = bisect.bisect_left(self._order_keys, (-priority, seq))
        assert self._order_keys[i] == (-priority, seq)
        return i

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._order_keys.clear()
            self._order.clear()
            self._by_len.clear()
            self.default = self.initial_default
            self._dirty = True
            if not self._deferred:
                self._publish()

    def set_default(self, action: str, params: Mapping[str, int]) -> None:
        if self.spec.const_default:
            raise P4RuntimeError(
                Code.PERMISSION_DENIED,
                f"cannot set / reset default action for {self.spec.name}, which has a const default",
            )
        self.default = (action, make_params(self.spec, action, params))

    def reset_default(self) -> None:
        if self.spec.const_default:
            raise P4RuntimeError(
                Code.PERMISSION_DENIED,
                f"cannot set / reset default action for {self.spec.name}, which has a const default",
            )
        self.default = self.initial_default

    def _publish(self) -> None:
        """Copy the lookup order into a fresh snapshot (caller holds the lock). O(n), no sort."""
        self._dirty = False
        if self._lpm_only:
            width = self.spec.fields[0].bitwidth
            self._lpm = tuple(
                (plen, _full(width) ^ _full(width - plen), dict(self._by_len[plen]))
                for plen in sorted(self._by_len, reverse=True)
            )
        self._snapshot = tuple(self._order)

    def _current(self) -> None:
        """Bring the snapshot up to date before a lookup if writes happened outside a batch since."""
        if self._dirty and not self._deferred:
            with self._lock:
                if self._dirty and not self._deferred:
                    self._publish()

    def lookup(self, values: tuple[int, ...]) -> tuple[str, tuple[int, ...]]:
        """The action (name, params) the table applies to a key: hit entry or default."""
        if self._dirty:
            self._current()
        if self._lpm_only:
            v = values[0]
            for _, mask, by_value in self._lpm:
                e = by_value.get(v & mask)
                if e is not None:
                    return (e.action, e.params)
            return self.default
        for e in self._snapshot:  # highest priority first; equal priorities: first inserted wins
            for i, mask, value in e.masked:
                if values[i] & mask != value:
                    break
            else:
                for i, lo, hi in e.ranged:
                    if not lo <= values[i] <= hi:
                        break
                else:
                    return (e.action, e.params)
        return self.default


class Tables:
    """Every table of the program, by name."""

    def __init__(
        self, specs: Iterable[contract.TableSpec] = contract.TABLES.values(), sizes: Mapping[str, int] | None = None
    ) -> None:
        sizes = sizes or {}
        self.by_name: dict[str, Table] = {s.name: Table(s, sizes.get(s.name)) for s in specs}

    def __getitem__(self, name: str) -> Table:
        return self.by_name[name]

    @property
    def sizes(self) -> dict[str, int]:
        return {name: t.size for name, t in self.by_name.items()}

    def clear(self) -> None:
        for t in self.by_name.values():
            t.clear()

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Apply many changes, then publish each changed table's lookup snapshot once (a Write request)."""
        tables = list(self.by_name.values())
        for t in tables:
            with t._lock:
                if not t._deferred and t._dirty:  # writes before the batch are visible during it
                    t._publish()
                t._deferred += 1
        try:
            yield
        finally:
            for t in tables:
                with t._lock:
                    t._deferred -= 1
                    if not t._deferred and t._dirty:
                        t._publish()
