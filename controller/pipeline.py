"""The compiled pipeline (P4Info + device config) as the controller uses it.

``Pipeline`` loads the artifacts once into a finsy ``P4Schema`` (the v1model program's P4Info and BMv2
JSON, or the TNA program's P4Info with its device config packed for a Tofino P4Runtime server by
controller/tofino_pipeline.py), checks the dataplane contract
(mlfc/contract.py) against the P4Info, so a renamed table fails at start-up, not at the first write,
and converts ``TableEntry`` values to and from P4Runtime protobufs: encoding goes through finsy
(``P4TableEntry.encode_entry``), decoding reads the protobuf ids directly because it is on the hot
path of every read-back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import finsy as fy
from finsy.p4schema import P4MatchType
from finsy.proto import p4r

from mlfc import contract, pipeline_sizes
from mlfc.controller.entries import Exact, Lpm, Match, Range, TableEntry, Ternary
from mlfc.controller.tofino_pipeline import TofinoArtifacts

_KINDS = {
    P4MatchType.EXACT: "exact",
    P4MatchType.LPM: "lpm",
    P4MatchType.TERNARY: "ternary",
    P4MatchType.RANGE: "range",
    P4MatchType.OPTIONAL: "optional",
}


class PipelineError(RuntimeError):
    """The artifacts are missing or do not carry the tables/actions/counters the controller needs."""


@dataclass(frozen=True)
class Pipeline:
    """Loaded artifacts: the P4Info schema (names, ids, widths) and the device config bytes."""

    p4info_path: Path
    device_config_path: Path
    schema: fy.P4Schema

    @classmethod
    def load(
        cls, p4info: Path | str | None = None, device_config: Path | str | None = None, *, checked: bool = True
    ) -> Pipeline:
        """``checked=False`` loads another program (e.g. the l3fwd baseline of the benchmarks) without
        checking it carries mlfc's tables."""
        p4info_path = Path(p4info) if p4info else contract.P4INFO
        config_path = Path(device_config) if device_config else contract.BMV2_JSON
        for what, path in (("P4Info", p4info_path), ("BMv2 JSON", config_path)):
            if not path.is_file():
                raise PipelineError(f"{what} not found: {path} (run `make p4`)")
        try:
            schema = fy.P4Schema(p4info_path, config_path)
            schema.p4info  # noqa: B018 - parse now so a bad file fails here
        except Exception as exc:
            raise PipelineError(f"cannot load {p4info_path}: {exc}") from exc
        pipeline = cls(p4info_path, config_path, schema)
        if checked:
            pipeline.check_contract()
        return pipeline

    @classmethod
    def load_tofino(cls, artifacts: TofinoArtifacts | None = None, *, device_config: bool = True) -> Pipeline:
        """The TNA program. ``device_config=False`` loads the P4Info alone: enough to compile and encode
        entries offline, not to push the pipeline to a switch."""
        a = artifacts or TofinoArtifacts()
        missing = a.missing() if device_config else [str(a.p4info)] * (not a.p4info.is_file())
        if missing:
            raise PipelineError(f"Tofino artifacts not found: {', '.join(missing)} (bf-p4c outputs, docs/tofino.md)")
        try:
            schema = fy.P4Schema(a.p4info, a.device_config() if device_config else None)
            schema.p4info  # noqa: B018 - parse now so a bad file fails here
        except Exception as exc:
            raise PipelineError(f"cannot load {a.p4info}: {exc}") from exc
        pipeline = cls(a.p4info, a.binary, schema)
        pipeline.check_contract(ternary_for_range=contract.TOFINO_TERNARY_FOR_RANGE)
        return pipeline

    @property
    def name(self) -> str:
        """What the switch reports as loaded: the P4Info package name (or file stem) and cookie."""
        return f"{self.schema.name or self.p4info_path.name.split('.')[0]}@{self.cookie:#018x}"

    @property
    def cookie(self) -> int:
        return self.schema.p4cookie

    # ---- contract ---------------------------------------------------------------------------

    def check_contract(self, ternary_for_range: Mapping[str, tuple[str, ...]] | None = None) -> None:
        """Fail early with every missing or changed name listed (the P4Info may carry more).
        ``ternary_for_range``: per table, the range keys this target matches ternary instead."""
        problems: list[str] = []
        for spec in contract.TABLES.values():
            table = self.schema.tables.get(spec.name)
            if table is None:
                problems.append(f"table {spec.name} missing")
                continue
            as_ternary = (ternary_for_range or {}).get(spec.name, ())
            for want in spec.fields:
                fld = table.match_fields.get(want.name)
                kind = "ternary" if want.name in as_ternary and want.kind == "range" else want.kind
                if fld is None:
                    problems.append(f"{spec.name}: match field {want.name} missing")
                elif _KINDS.get(fld.match_type) != kind:
                    problems.append(f"{spec.name}: {want.name} is {fld.match_type}, expected {kind}")
            for action in spec.actions:
                if table.actions.get(action) is None:
                    problems.append(f"{spec.name}: action {action} missing")
            if problem := pipeline_sizes.size_problem(spec.name, table.size):
                problems.append(problem)
        for counter in contract.COUNTERS:
            if self.schema.counters.get(counter) is None:
                problems.append(f"counter {counter} missing")
        if problems:
            raise PipelineError(f"{self.p4info_path} does not match mlfc/contract.py: " + "; ".join(problems))

    def table_size(self, table: str) -> int:
        return self.schema.tables[table].size

    def counter_size(self, counter: str) -> int:
        return self.schema.counters[counter].size

    def field_width(self, table: str, field_name: str) -> int:
        return self.schema.tables[table].match_fields[field_name].bitwidth

    # ---- encoding -----------------------------------------------------------------------------

    def encode(self, e: TableEntry) -> p4r.TableEntry:
        """``TableEntry`` -> P4Runtime ``TableEntry`` (finsy checks names and widths)."""
        match = fy.P4TableMatch({name: _finsy_value(m) for name, m in e.match})
        action = fy.P4TableAction(e.action, **dict(e.params))
        return fy.P4TableEntry(e.table, match=match, action=action, priority=e.priority).encode_entry(self.schema)

    @cached_property
    def _names_by_id(
        self,
    ) -> tuple[dict[int, tuple[str, dict[int, tuple[str, int]]]], dict[int, tuple[str, dict[int, str]]]]:
        """table id -> (name, {field id: (name, max value)}), action id -> (name, {param id: name})."""
        tables = {
            t.id: (t.name, {f.id: (f.name, (1 << f.bitwidth) - 1) for f in t.match_fields}) for t in self.schema.tables
        }
        actions = {a.id: (a.name, {p.id: p.name for p in a.params}) for a in self.schema.actions}
        return tables, actions

    def decode(self, msg: p4r.TableEntry) -> TableEntry:
        """P4Runtime ``TableEntry`` -> ``TableEntry`` with full P4Info names."""
        tables, actions = self._names_by_id
        table_name, fields = tables[msg.table_id]
        match: list[tuple[str, Match]] = []
        for fm in msg.match:
            name, full = fields[fm.field_id]
            kind = fm.WhichOneof("field_match_type")
            # BMv2 reads back omitted (don't-care) fields as full ranges / zero masks: drop them again.
            if kind == "ternary":
                mask = _int(fm.ternary.mask)
                if mask:
                    match.append((name, Ternary(_int(fm.ternary.value), mask)))
            elif kind == "range":
                lo, hi = _int(fm.range.low), _int(fm.range.high)
                if (lo, hi) != (0, full):
                    match.append((name, Range(lo, hi)))
            elif kind == "exact":
                match.append((name, Exact(_int(fm.exact.value))))
            elif kind == "lpm":
                if fm.lpm.prefix_len:
                    match.append((name, Lpm(_int(fm.lpm.value), fm.lpm.prefix_len)))
            else:
                raise PipelineError(f"{table_name}: unsupported match kind {kind}")
        action_msg = msg.action.action
        action_name, params = actions[action_msg.action_id]
        values = tuple(sorted((params[p.param_id], _int(p.value)) for p in action_msg.params))
        return TableEntry(table_name, tuple(sorted(match)), action_name, values, msg.priority)


def _int(data: bytes) -> int:
    return int.from_bytes(data, "big")


def _finsy_value(m: Match) -> object:
    match m:
        case Exact(v):
            return v
        case Lpm(v, p):
            return (v, p)
        case Ternary(v, mask):
            return (v, mask)
        case Range(lo, hi):
            return (lo, hi)
    raise TypeError(f"not a match: {m!r}")
