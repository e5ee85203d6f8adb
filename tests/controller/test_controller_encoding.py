"""Entry encoding against the committed P4Info (offline: finsy's P4Schema, no switch)."""

from __future__ import annotations

from pathlib import Path

import pytest
from controller_helpers import make_config, needs_artifacts, switch_doc
from finsy.proto import p4r

from mlfc import contract
from mlfc.controller import compile as comp
from mlfc.controller.entries import Exact, Lpm, Range, Ternary, entry
from mlfc.controller.errors import ValidationError
from mlfc.controller.pipeline import Pipeline, PipelineError
from mlfc.controller.reconcile import Diff, to_updates
from mlfc.proto import intent_pb2 as pb

pytestmark = needs_artifacts

CONFIG = make_config(switch_doc("s1", 50051, 1), switch_doc("s2", 50052, 2))
RICH = pb.Intent(
    jobs=[
        pb.JobIntent(
            job_id=7,
            priority=5,
            windows=[pb.IterationWindow(first=3, last=9, priority=6), pb.IterationWindow(first=10, last=0xFFFFFFFF)],
            flows=[pb.Flow(src="10.0.1.0/24", dst="10.0.2.1", protocol=17, src_port=0, dst_port=4791)],
        ),
        pb.JobIntent(job_id=65535, priority=0),
    ],
    drop_policy=pb.DropPolicy(level_depths=[8, 16, 24], min_importance=[0, 1, 2, 3]),
    ecn=[pb.PortEcn(switch="s1", port=3, profile=pb.EcnProfile(kmin=2, kmax=10, pmax=0.5))],
    interleaving=True,
)


@pytest.fixture(scope="module")
def pipeline() -> Pipeline:
    return Pipeline.load(contract.P4INFO, contract.BMV2_JSON)


def test_contract_holds(pipeline: Pipeline) -> None:
    pipeline.check_contract()
    assert pipeline.table_size(contract.JOB_PRIORITY) == 1024
    assert pipeline.table_size(contract.ECN_PROFILE) == 4096
    assert pipeline.counter_size(contract.JOB_PACKETS) == 4096
    assert pipeline.field_width(contract.ECN_PROFILE, contract.ENQ_QDEPTH) == 19
    assert pipeline.name.startswith("mlfc@0x")


def test_every_compiled_entry_round_trips(pipeline: Pipeline) -> None:
    compiled = comp.compile_intent(RICH, CONFIG, pipeline)
    for entries in compiled.entries.values():
        assert {e.table for e in entries} == set(contract.TABLES)
        for e in entries:
            msg = pipeline.encode(e)
            assert pipeline.decode(msg) == e, str(e)


def test_wire_form_of_a_route_and_a_ternary_range_entry(pipeline: Pipeline) -> None:
    route = entry(
        contract.ROUTES_V4,
        {contract.IPV4_DST: Lpm(0x0A000200, 24)},
        contract.SET_NEXT_HOP,
        {"port": 3, "src_mac": 0x0A, "dst_mac": 0x0B0C, "rate_class": 0x21},
    )
    msg = pipeline.encode(route)
    table = pipeline.schema.tables[contract.ROUTES_V4]
    assert msg.table_id == table.id
    (fm,) = msg.match
    assert fm.field_id == table.match_fields[contract.IPV4_DST].id
    assert (fm.lpm.value, fm.lpm.prefix_len) == (bytes([10, 0, 2, 0]), 24)
    assert msg.action.action.action_id == pipeline.schema.actions[contract.SET_NEXT_HOP].id
    # P4Runtime canonical byte strings: no leading zero bytes.
    params = pipeline.schema.actions[contract.SET_NEXT_HOP].params
    got = {params[p.param_id].name: p.value for p in msg.action.action.params}
    assert got == {"port": b"\x03", "src_mac": b"\x0a", "dst_mac": b"\x0b\x0c", "rate_class": b"\x21"}

    jp = entry(
        contract.JOB_PRIORITY,
        {contract.JOB_ID: Ternary(7, 0xFFFF), contract.ITERATION: Range(3, 9)},
        contract.SET_PRIORITY,
        {"priority": 6},
        40,
    )
    msg = pipeline.encode(jp)
    assert msg.priority == 40
    kinds = sorted(fm.WhichOneof("field_match_type") for fm in msg.match)
    assert kinds == ["range", "ternary"]  # meta.progress is a don't-care: omitted


def test_values_that_do_not_fit_are_refused(pipeline: Pipeline) -> None:
    too_wide = entry(
        contract.ROUTES_V4,
        {contract.IPV4_DST: Lpm(1, 32)},
        contract.SET_NEXT_HOP,
        {"port": 512, "src_mac": 0, "dst_mac": 0, "rate_class": 0},
    )
    with pytest.raises(ValueError, match="bitwidth 9: 512"):
        pipeline.encode(too_wide)
    unknown = entry(contract.JOB_PRIORITY, {contract.JOB_ID: Exact(1)}, "MlfcIngress.queueing.nope", {}, 1)
    with pytest.raises(ValueError, match="nope"):
        pipeline.encode(unknown)


def test_updates_are_ordered_delete_modify_insert(pipeline: Pipeline) -> None:
    def jp(job: int):
        return entry(
            contract.JOB_PRIORITY, {contract.JOB_ID: Ternary(job, 0xFFFF)}, contract.SET_PRIORITY, {"priority": 1}, 30
        )

    ups = to_updates(Diff(inserts=(jp(1),), modifies=(jp(2),), deletes=(jp(3), jp(4))), pipeline)
    U = p4r.Update
    assert [u.type for u in ups] == [U.DELETE, U.DELETE, U.MODIFY, U.INSERT]


def test_capacity_is_checked_before_anything_is_written(pipeline: Pipeline) -> None:
    intent = pb.Intent(jobs=[pb.JobIntent(job_id=i, priority=1) for i in range(1, 1100)])
    with pytest.raises(ValidationError, match=r"^jobs: s1: 1099 entries .* exceed its size 1024"):
        comp.compile_intent(intent, CONFIG, pipeline)


def test_contract_violations_are_listed(tmp_path: Path) -> None:
    text = contract.P4INFO.read_text().replace("MlfcIngress.queueing.job_priority", "MlfcIngress.queueing.job_prio")
    bad = tmp_path / "bad.p4info.txtpb"
    bad.write_text(text)
    with pytest.raises(PipelineError, match=r"table MlfcIngress\.queueing\.job_priority missing"):
        Pipeline.load(bad, contract.BMV2_JSON)
    with pytest.raises(PipelineError, match="not found"):
        Pipeline.load(tmp_path / "missing.txtpb", contract.BMV2_JSON)
