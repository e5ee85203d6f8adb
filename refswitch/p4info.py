"""P4Info for the reference switch: check a pushed P4Info against the model, index its ids, and build
one from the model (with p4c's id scheme) where the compiled artifact is absent."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from finsy.proto import p4i
from google.protobuf import text_format

from mlfc import contract, pipeline_sizes
from mlfc.refswitch.errors import invalid

COMMITTED_P4INFO = contract.P4INFO
COMMITTED_DEVICE_CONFIG = contract.BMV2_JSON

_MATCH_TYPES = {
    "exact": p4i.MatchField.EXACT,
    "lpm": p4i.MatchField.LPM,
    "ternary": p4i.MatchField.TERNARY,
    "range": p4i.MatchField.RANGE,
}
_UNITS = {"PACKETS": p4i.CounterSpec.PACKETS, "BYTES": p4i.CounterSpec.BYTES, "BOTH": p4i.CounterSpec.BOTH}
# Id prefixes (p4info.proto P4Ids.Prefix)
ACTION_PREFIX, TABLE_PREFIX, COUNTER_PREFIX, REGISTER_PREFIX = 0x01, 0x02, 0x12, 0x16


def load_p4info(path: Path) -> p4i.P4Info:
    msg = p4i.P4Info()
    text_format.Parse(path.read_text(), msg)
    return msg


def committed_p4info() -> p4i.P4Info | None:
    return load_p4info(COMMITTED_P4INFO) if COMMITTED_P4INFO.is_file() else None


def committed_device_config() -> bytes | None:
    return COMMITTED_DEVICE_CONFIG.read_bytes() if COMMITTED_DEVICE_CONFIG.is_file() else None


# ---- building (p4c's scheme: prefix << 24 | 24-bit Jenkins one-at-a-time hash, probing on collision) ----


def _jenkins(name: str) -> int:
    h = 0
    for b in name.encode():
        h = (h + b) & 0xFFFFFFFF
        h = (h + (h << 10)) & 0xFFFFFFFF
        h ^= h >> 6
    h = (h + (h << 3)) & 0xFFFFFFFF
    h ^= h >> 11
    h = (h + (h << 15)) & 0xFFFFFFFF
    return h


def _assign_ids(names: list[str], prefix: int, taken: set[int]) -> dict[str, int]:
    ids = {}
    for name in sorted(names):
        h = _jenkins(name)
        while True:
            pid = (prefix << 24) | (h & 0xFFFFFF)
            if pid not in taken and pid & 0xFFFFFF:
                break
            h += 1
        taken.add(pid)
        ids[name] = pid
    return ids


def _alias(name: str, all_names: list[str]) -> str:
    """Shortest dotted suffix of ``name`` unique among ``all_names`` (p4c's default alias)."""
    parts = name.split(".")
    for n in range(1, len(parts) + 1):
        suffix = ".".join(parts[-n:])
        if sum(1 for other in all_names if other == suffix or other.endswith("." + suffix)) == 1:
            return suffix
    return name


def build_p4info() -> p4i.P4Info:
    """The model's tables, actions, counters and register as a P4Info: what p4c emits for mlfc.p4
    (same ids, names, aliases and order; a test compares the two when the artifact exists)."""
    taken: set[int] = set()
    action_ids = _assign_ids(list(contract.ACTIONS), ACTION_PREFIX, taken)
    table_ids = _assign_ids(list(contract.TABLES), TABLE_PREFIX, taken)
    counter_ids = _assign_ids(list(contract.COUNTERS), COUNTER_PREFIX, taken)
    register_ids = _assign_ids(list(contract.REGISTERS), REGISTER_PREFIX, taken)
    info = p4i.P4Info()
    info.pkg_info.name, info.pkg_info.version, info.pkg_info.arch = (
        contract.PKG_NAME,
        contract.PKG_VERSION,
        contract.PKG_ARCH,
    )
    for name in contract.TABLES:
        t = contract.TABLES[name]
        msg = info.tables.add()
        msg.preamble.id, msg.preamble.name, msg.preamble.alias = (
            table_ids[name],
            name,
            _alias(name, list(contract.TABLES)),
        )
        for i, f in enumerate(t.fields, start=1):
            msg.match_fields.add(id=i, name=f.name, bitwidth=f.bitwidth, match_type=_MATCH_TYPES[f.kind])
        for a in t.actions:
            msg.action_refs.add(id=action_ids[a])
        if t.const_default:
            msg.const_default_action_id = action_ids[t.default_action]
        msg.size = t.size
    for name in contract.ACTIONS:
        msg = info.actions.add()
        msg.preamble.id, msg.preamble.name, msg.preamble.alias = (
            action_ids[name],
            name,
            _alias(name, list(contract.ACTIONS)),
        )
        for i, p in enumerate(contract.ACTIONS[name].params, start=1):
            msg.params.add(id=i, name=p.name, bitwidth=p.bitwidth)
    for name in contract.COUNTERS:
        c = contract.COUNTERS[name]
        msg = info.counters.add()
        msg.preamble.id, msg.preamble.name, msg.preamble.alias = (
            counter_ids[name],
            name,
            _alias(name, list(contract.COUNTERS)),
        )
        msg.spec.unit = _UNITS[c.unit]
        msg.size = c.size
    for name in contract.REGISTERS:
        r = contract.REGISTERS[name]
        msg = info.registers.add()
        msg.preamble.id, msg.preamble.name, msg.preamble.alias = (
            register_ids[name],
            name,
            _alias(name, list(contract.REGISTERS)),
        )
        msg.type_spec.bitstring.bit.bitwidth = r.bitwidth
        msg.size = r.size
    info.type_info.SetInParent()
    return info


def default_p4info() -> p4i.P4Info:
    """The committed artifact when present, else the model's own P4Info."""
    return committed_p4info() or build_p4info()


# ---- checking and indexing ---------------------------------------------------------------------


@dataclass(frozen=True)
class P4InfoIndex:
    """Ids of an accepted P4Info, mapped onto the model's specs."""

    p4info: p4i.P4Info
    tables: dict[int, contract.TableSpec]
    table_ids: dict[str, int]
    fields: dict[int, dict[int, tuple[int, contract.MatchField]]]  # table id -> field id -> (position, field)
    field_ids: dict[int, tuple[int, ...]]  # table id -> field ids in position order
    actions: dict[int, contract.ActionSpec]
    action_ids: dict[str, int]
    params: dict[int, dict[int, tuple[int, contract.Param]]]  # action id -> param id -> (position, param)
    param_ids: dict[int, tuple[int, ...]]
    counters: dict[int, contract.CounterSpec]
    registers: dict[int, contract.RegisterSpec]
    scopes: dict[tuple[int, int], int]  # (table id, action id) -> ActionRef scope


def index_p4info(info: p4i.P4Info) -> P4InfoIndex:
    """Check ``info`` describes exactly the model's program and index its ids.

    Raises INVALID_ARGUMENT listing every difference: the reference switch cannot run a program
    it does not implement."""
    problems: list[str] = []
    if info.pkg_info.name and info.pkg_info.name != contract.PKG_NAME:
        problems.append(f"program {info.pkg_info.name!r}, the model is {contract.PKG_NAME!r}")
    actions: dict[int, contract.ActionSpec] = {}
    params: dict[int, dict[int, tuple[int, contract.Param]]] = {}
    param_ids: dict[int, tuple[int, ...]] = {}
    for a in info.actions:
        spec = contract.ACTIONS.get(a.preamble.name)
        if spec is None:
            problems.append(f"action {a.preamble.name} is not in the model")
            continue
        got = [(p.name, p.bitwidth) for p in a.params]
        want = [(p.name, p.bitwidth) for p in spec.params]
        if got != want:
            problems.append(f"action {spec.name}: params {got}, model has {want}")
        actions[a.preamble.id] = spec
        params[a.preamble.id] = {p.id: (i, spec.params[i]) for i, p in enumerate(a.params) if i < len(spec.params)}
        param_ids[a.preamble.id] = tuple(p.id for p in a.params)
    action_ids = {s.name: i for i, s in actions.items()}

    tables: dict[int, contract.TableSpec] = {}
    fields: dict[int, dict[int, tuple[int, contract.MatchField]]] = {}
    field_ids: dict[int, tuple[int, ...]] = {}
    scopes: dict[tuple[int, int], int] = {}
    for t in info.tables:
        spec = contract.TABLES.get(t.preamble.name)
        if spec is None:
            problems.append(f"table {t.preamble.name} is not in the model")
            continue
        got = [(f.name, f.bitwidth, f.match_type) for f in t.match_fields]
        want = [(f.name, f.bitwidth, _MATCH_TYPES[f.kind]) for f in spec.fields]
        if got != want:
            problems.append(f"table {spec.name}: match fields {got}, model has {want}")
        refs = {actions[r.id].name for r in t.action_refs if r.id in actions}
        if refs != set(spec.actions):
            problems.append(f"table {spec.name}: actions {sorted(refs)}, model has {sorted(spec.actions)}")
        const_default = actions[t.const_default_action_id].name if t.const_default_action_id in actions else None
        if const_default != (spec.default_action if spec.const_default else None):
            problems.append(f"table {spec.name}: const default action {const_default}")
        if problem := pipeline_sizes.size_problem(spec.name, t.size):
            problems.append(f"table {problem}")
        if t.implementation_id or t.direct_resource_ids:
            problems.append(f"table {spec.name}: action profiles and direct resources are not in the model")
        tables[t.preamble.id] = spec
        fields[t.preamble.id] = {
            f.id: (i, spec.fields[i]) for i, f in enumerate(t.match_fields) if i < len(spec.fields)
        }
        field_ids[t.preamble.id] = tuple(f.id for f in t.match_fields)
        for r in t.action_refs:
            scopes[(t.preamble.id, r.id)] = r.scope

    counters: dict[int, contract.CounterSpec] = {}
    for c in info.counters:
        spec = contract.COUNTERS.get(c.preamble.name)
        if spec is None:
            problems.append(f"counter {c.preamble.name} is not in the model")
            continue
        if c.size != spec.size or c.spec.unit != _UNITS[spec.unit]:
            problems.append(f"counter {spec.name}: size {c.size} unit {c.spec.unit}, model has {spec.size} {spec.unit}")
        counters[c.preamble.id] = spec
    registers: dict[int, contract.RegisterSpec] = {}
    for r in info.registers:
        spec = contract.REGISTERS.get(r.preamble.name)
        if spec is None:
            problems.append(f"register {r.preamble.name} is not in the model")
            continue
        registers[r.preamble.id] = spec

    for what, present, model in (
        ("table", {s.name for s in tables.values()}, set(contract.TABLES)),
        ("action", {s.name for s in actions.values()}, set(contract.ACTIONS)),
        ("counter", {s.name for s in counters.values()}, set(contract.COUNTERS)),
        ("register", {s.name for s in registers.values()}, set(contract.REGISTERS)),
    ):
        for name in sorted(model - present):
            problems.append(f"{what} {name} missing from the P4Info")
    for kind in (
        "action_profiles",
        "direct_counters",
        "meters",
        "direct_meters",
        "controller_packet_metadata",
        "value_sets",
        "digests",
        "externs",
    ):
        for item in getattr(info, kind):
            problems.append(f"{kind} {getattr(item, 'preamble', item)} is not in the model")
    if problems:
        raise invalid("P4Info does not match the reference switch's program (mlfc.p4): " + "; ".join(problems))
    return P4InfoIndex(
        info,
        tables,
        {s.name: i for i, s in tables.items()},
        fields,
        field_ids,
        actions,
        action_ids,
        params,
        param_ids,
        counters,
        registers,
        scopes,
    )
