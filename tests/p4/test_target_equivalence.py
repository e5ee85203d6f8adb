"""The v1model and TNA programs offer the controller the same thing: their committed P4Infos carry the
same tables (keys by name, width and kind; actions; sizes; const defaults), actions (parameters) and
counters (sizes, units) by name. The differences are listed here, each with its reason."""

from __future__ import annotations

import pytest
from finsy.proto import p4i
from google.protobuf import text_format

from mlfc import contract
from mlfc.testing.tofino import stale_committed_outputs

# What only one target has, and why. Anything else that differs fails the test.
KNOWN_DIFFERENCES = {
    f"register {contract.CONGESTION_LEVEL_REGISTER}: v1model only": (
        "BMv2's ingress reads the level egress wrote; Tofino 1's ingress cannot read an egress register, so "
        "the TNA program judges each packet in egress by its own queue's level (docs/dataplane.md, On Tofino)"
    ),
}


def _load(path) -> p4i.P4Info:  # type: ignore[no-untyped-def]
    msg = p4i.P4Info()
    text_format.Parse(path.read_text(), msg)
    return msg


def describe(info: p4i.P4Info) -> dict[str, object]:
    """Everything the controller relies on, keyed by name (ids may differ between compilers)."""
    actions = {a.preamble.id: a.preamble.name for a in info.actions}
    out: dict[str, object] = {}
    for t in info.tables:
        out[f"table {t.preamble.name}"] = (
            [(f.name, f.bitwidth, p4i.MatchField.MatchType.Name(f.match_type)) for f in t.match_fields],
            sorted(actions[r.id] for r in t.action_refs if not r.annotations),
            t.size,
            actions.get(t.const_default_action_id),
        )
    for a in info.actions:
        out[f"action {a.preamble.name}"] = [(p.name, p.bitwidth) for p in a.params]
    for c in info.counters:
        out[f"counter {c.preamble.name}"] = (c.size, p4i.CounterSpec.Unit.Name(c.spec.unit))
    for r in info.registers:
        out[f"register {r.preamble.name}"] = r.size
    return out


def differences(v1model: dict[str, object], tna: dict[str, object]) -> list[str]:
    out = []
    for key in sorted(v1model.keys() | tna.keys()):
        if key not in tna:
            out.append(f"{key}: v1model only")
        elif key not in v1model:
            out.append(f"{key}: tna only")
        elif v1model[key] != tna[key]:
            out.append(f"{key}: v1model {v1model[key]} != tna {tna[key]}")
    return out


@pytest.fixture(scope="module")
def infos() -> tuple[dict[str, object], dict[str, object]]:
    for path in (contract.P4INFO, contract.TOFINO_P4INFO):
        if not path.is_file():
            pytest.skip(f"{path} missing")
    return describe(_load(contract.P4INFO)), describe(_load(contract.TOFINO_P4INFO))


def _as_on_tofino(v1model: dict[str, object]) -> dict[str, object]:
    """The v1model description with the keys contract.TOFINO_TERNARY_FOR_RANGE names made ternary (the
    Tofino compiler takes range keys of at most 20 bits; the controller writes prefixes instead)."""
    out = dict(v1model)
    for table, fields in contract.TOFINO_TERNARY_FOR_RANGE.items():
        keys, *rest = out[f"table {table}"]  # type: ignore[misc]
        keys = [(n, w, "TERNARY" if n in fields and kind == "RANGE" else kind) for n, w, kind in keys]
        out[f"table {table}"] = (keys, *rest)
    return out


def test_only_the_known_differences(infos) -> None:  # type: ignore[no-untyped-def]
    if stale := stale_committed_outputs():
        pytest.skip(stale)
    v1model, tna = infos
    v1model = _as_on_tofino(v1model)
    # NoAction and other actions no table offers the controller do not count.
    offered = {a for key, t in {**v1model, **tna}.items() if key.startswith("table ") for a in t[1]}  # type: ignore[index]
    got = [d for d in differences(v1model, tna) if not d.startswith("action ") or d.split()[1] in offered]
    assert got == sorted(KNOWN_DIFFERENCES)


def test_the_contract_holds_for_both(infos) -> None:  # type: ignore[no-untyped-def]
    if stale := stale_committed_outputs():  # a table the contract gained is not in uncompiled Tofino outputs
        pytest.skip(stale)
    for described in infos:
        for name in contract.TABLES:
            assert f"table {name}" in described
        for name in contract.COUNTERS:
            assert f"counter {name}" in described
