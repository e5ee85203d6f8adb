"""P4Runtime protobufs <-> the model's table entries, validated in PI's order with PI's error codes."""

from __future__ import annotations

from finsy.proto import p4i, p4r

from mlfc import contract
from mlfc.match import Exact, Lpm, Match, Range, Ternary
from mlfc.refswitch.errors import Code, P4RuntimeError, invalid
from mlfc.refswitch.p4info import P4InfoIndex
from mlfc.refswitch.tables import Entry, check_priority, compile_entry, make_match
from mlfc.refswitch.tables import make_params as _make_params

INVALID_ID = "Invalid P4 id"


def to_int(data: bytes, bitwidth: int, what: str) -> int:
    """A P4Runtime bytestring as an integer; PI accepts any length whose value fits the width."""
    value = int.from_bytes(data, "big")
    if value >> bitwidth:
        raise invalid(f"{what}: bytestring provided does not fit within {bitwidth} bits")
    return value


def to_bytes(value: int) -> bytes:
    """Canonical bytestring (P4Runtime 1.3, what PI returns): no leading zero bytes, at least one byte."""
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def table_spec(index: P4InfoIndex, table_id: int) -> contract.TableSpec:
    spec = index.tables.get(table_id)
    if spec is None:
        raise invalid(f"{INVALID_ID} (table {table_id:#x})")
    return spec


def decode_match(index: P4InfoIndex, te: p4r.TableEntry) -> dict[str, Match]:
    fields = index.fields[te.table_id]
    spec = index.tables[te.table_id]
    if len(te.match) > len(fields):
        raise invalid(f"{spec.name}: too many fields in match key")
    out: dict[str, Match] = {}
    for fm in te.match:
        found = fields.get(fm.field_id)
        if found is None or found[1].name in out:
            raise invalid(f"{spec.name}: unknown field in match key (id {fm.field_id})")
        f = found[1]
        kind = fm.WhichOneof("field_match_type")
        what = f"{spec.name}: {f.name}"
        if kind != f.kind:
            raise invalid(f"{what}: invalid match type {kind} (field is {f.kind})")
        if kind == "exact":
            out[f.name] = Exact(to_int(fm.exact.value, f.bitwidth, what))
        elif kind == "lpm":
            out[f.name] = Lpm(to_int(fm.lpm.value, f.bitwidth, what), fm.lpm.prefix_len)
        elif kind == "ternary":
            out[f.name] = Ternary(to_int(fm.ternary.value, f.bitwidth, what), to_int(fm.ternary.mask, f.bitwidth, what))
        else:
            out[f.name] = Range(to_int(fm.range.low, f.bitwidth, what), to_int(fm.range.high, f.bitwidth, what))
    return out


def decode_key(index: P4InfoIndex, te: p4r.TableEntry) -> tuple:
    spec = table_spec(index, te.table_id)
    key = make_match(spec, decode_match(index, te))
    check_priority(spec, te.priority)
    return (key, te.priority)


def decode_action(index: P4InfoIndex, te: p4r.TableEntry, default: bool) -> tuple[str, dict[str, int]]:
    spec = index.tables[te.table_id]
    kind = te.action.WhichOneof("type")
    if kind != "action":
        raise invalid(f"cannot provide indirect action for direct table {spec.name}")
    action_id = te.action.action.action_id
    aspec = index.actions.get(action_id)
    if aspec is None:
        raise invalid(f"{INVALID_ID} (action {action_id:#x})")
    scope = index.scopes.get((te.table_id, action_id))
    if scope is None:
        raise invalid(f"{spec.name}: invalid action for table: {aspec.name}")
    if scope == p4i.ActionRef.TABLE_ONLY and default:
        raise P4RuntimeError(Code.PERMISSION_DENIED, f"{aspec.name}: cannot use TABLE_ONLY action as default action")
    if scope == p4i.ActionRef.DEFAULT_ONLY and not default:
        raise P4RuntimeError(Code.PERMISSION_DENIED, f"{aspec.name}: cannot use DEFAULT_ONLY action in table entry")
    pids = index.params[action_id]
    params: dict[str, int] = {}
    if len(te.action.action.params) != len(aspec.params):
        raise invalid(f"{aspec.name}: unexpected number of action parameters")
    for p in te.action.action.params:
        found = pids.get(p.param_id)
        if found is None or found[1].name in params:
            raise invalid(f"{aspec.name}: unknown action parameter (id {p.param_id})")
        params[found[1].name] = to_int(p.value, found[1].bitwidth, f"{aspec.name}.{found[1].name}")
    return aspec.name, params


def check_entry_extras(spec: contract.TableSpec, te: p4r.TableEntry) -> None:
    if te.HasField("meter_config"):
        raise invalid(f"{spec.name}: table has no direct meters")
    if te.HasField("counter_data"):
        raise invalid(f"{spec.name}: table has no direct counters")
    if te.idle_timeout_ns < 0:
        raise invalid("idle_timeout_ns must be a positive value")
    if te.idle_timeout_ns > 0:
        raise invalid("idle_timeout_ns must be set to 0 for tables which do not support idle timeout")


def decode_entry(index: P4InfoIndex, te: p4r.TableEntry) -> Entry:
    """A full (non-default) entry for INSERT or MODIFY."""
    spec = table_spec(index, te.table_id)
    key, priority = decode_key(index, te)
    if not te.HasField("action"):
        raise invalid("'action' field must be set")
    action, params = decode_action(index, te, default=False)
    values = _make_params(spec, action, params)
    check_entry_extras(spec, te)
    return compile_entry(spec, Entry(key, priority, action, values, te.controller_metadata, te.metadata))


# ---- encoding (reads) ------------------------------------------------------------------------------


def encode_action(index: P4InfoIndex, action: str, params: tuple[int, ...], out: p4r.Action) -> None:
    action_id = index.action_ids[action]
    out.action_id = action_id
    for pid, value in zip(index.param_ids[action_id], params, strict=True):
        out.params.add(param_id=pid, value=to_bytes(value))


def encode_entry(index: P4InfoIndex, table: str, entry: Entry) -> p4r.TableEntry:
    table_id = index.table_ids[table]
    te = p4r.TableEntry(
        table_id=table_id,
        priority=entry.priority,
        controller_metadata=entry.controller_metadata,
        metadata=entry.metadata,
    )
    for fid, m in zip(index.field_ids[table_id], entry.match, strict=True):
        if m is None:
            continue
        fm = te.match.add(field_id=fid)
        if isinstance(m, Exact):
            fm.exact.value = to_bytes(m.value)
        elif isinstance(m, Lpm):
            fm.lpm.value, fm.lpm.prefix_len = to_bytes(m.value), m.prefix_len
        elif isinstance(m, Ternary):
            fm.ternary.value, fm.ternary.mask = to_bytes(m.value), to_bytes(m.mask)
        else:
            fm.range.low, fm.range.high = to_bytes(m.lo), to_bytes(m.hi)
    encode_action(index, entry.action, entry.params, te.action.action)
    return te


def encode_default(index: P4InfoIndex, table: str, action: str, params: tuple[int, ...]) -> p4r.TableEntry:
    te = p4r.TableEntry(table_id=index.table_ids[table], is_default_action=True)
    encode_action(index, action, params, te.action.action)
    return te
