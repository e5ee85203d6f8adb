"""The dataplane contract (mlfc/contract.py) against what p4c emitted and what the P4 sources say.

The reference switch implements exactly the contract and refuses any other P4Info, listing every
difference; the P4Info half of this test asks it.

A table, field, width, action parameter, size or counter that P4 and Python disagree on fails here,
naming every difference, before the controller or the reference switch meets it on a switch.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from finsy.proto import p4i

from mlfc import contract
from mlfc.policy import depth
from mlfc.refswitch.errors import P4RuntimeError
from mlfc.refswitch.p4info import index_p4info, load_p4info

P4SRC = Path(__file__).resolve().parents[2] / "p4src"


def contract_problems(info: p4i.P4Info) -> str:
    """How ``info`` differs from the contract, as the reference switch (which implements exactly the
    contract) reports it when refusing a pipeline; "" when they agree."""
    try:
        index_p4info(info)
    except P4RuntimeError as exc:
        return exc.message
    return ""


@pytest.mark.skipif(not contract.P4INFO.is_file(), reason=f"{contract.P4INFO} missing: run `make p4`")
def test_committed_p4info_matches_the_contract() -> None:
    assert contract_problems(load_p4info(contract.P4INFO)) == ""


@pytest.mark.skipif(not contract.P4INFO.is_file(), reason=f"{contract.P4INFO} missing: run `make p4`")
def test_a_changed_p4info_is_caught() -> None:
    info = load_p4info(contract.P4INFO)
    next(t for t in info.tables if t.preamble.name == contract.ECN_PROFILE).match_fields[0].bitwidth = 8
    info.counters[0].size = 7
    problems = contract_problems(info)
    assert f"table {contract.ECN_PROFILE}: match fields" in problems
    assert f"counter {info.counters[0].preamble.name}: size 7" in problems


def _consts(path: Path) -> dict[str, int]:
    text = path.read_text()
    out = {m[0]: int(m[1], 0) for m in re.findall(r"const\s+\w+(?:<\d+>)?\s+(\w+)\s*=\s*(0x[0-9a-fA-F]+|\d+)", text)}
    out |= {m[0]: int(m[1], 0) for m in re.findall(r"#define\s+(\w+)\s+(0x[0-9a-fA-F]+|\d+)", text)}
    return out


def _typedef_widths(path: Path) -> dict[str, int]:
    return {name: int(w) for w, name in re.findall(r"typedef\s+bit<(\d+)>\s+(\w+)\s*;", path.read_text())}


def test_define_and_size_p4_match_the_contract() -> None:
    define = _consts(P4SRC / "shared" / "define.p4")
    size = _consts(P4SRC / "shared" / "size.p4")
    v1model = _consts(P4SRC / "v1model" / "include" / "define_v1model.p4")
    want_define = {
        "PRIORITY_CONTROL": contract.PRIORITY_CONTROL,
        "PRIORITY_DEFAULT": contract.PRIORITY_DEFAULT,
        "ECN_NOT_ECT": contract.ECN_NOT_ECT,
        "ECN_CE": contract.ECN_CE,
        "SHIM_NONE": contract.SHIM_NONE,
        "SHIM_OK": contract.SHIM_OK,
        "SHIM_BAD_HEADER": contract.SHIM_BAD_HEADER,
        "SHIM_TRUNCATED": contract.SHIM_TRUNCATED,
        "UNCONGESTED_LEVEL": contract.UNCONGESTED_LEVEL,
    }
    want_size = {
        "ROUTES_V4_SIZE": contract.ROUTES_V4_SIZE,
        "FLOW_CLASSIFIER_SIZE": contract.FLOW_CLASSIFIER_SIZE,
        "JOB_PRIORITY_SIZE": contract.JOB_PRIORITY_SIZE,
        "ECN_PROFILE_SIZE": contract.ECN_PROFILE_SIZE,
        "CONGESTION_LEVEL_SIZE": contract.CONGESTION_LEVEL_SIZE,
        "DROP_THRESHOLD_SIZE": contract.DROP_THRESHOLD_SIZE,
        "MAX_JOBS": contract.MAX_JOBS,
        "MAX_PORTS": contract.MAX_PORTS,
    }
    want_v1model = {
        "NUM_QUEUES": contract.NUM_QUEUES,
        "CONGESTION_SLOTS": contract.CONGESTION_SLOTS,
        "DROP_PORT": contract.V1MODEL_DROP_PORT,
        # the telemetry's bytes per queued packet: the one conversion (mlfc.policy.depth)
        "QDEPTH_UNIT_BYTES": depth.PACKETS.unit_bytes,
    }
    assert {k: define.get(k) for k in want_define} == want_define
    assert {k: size.get(k) for k in want_size} == want_size
    assert {k: v1model.get(k) for k in want_v1model} == want_v1model
    widths = _typedef_widths(P4SRC / "shared" / "define.p4")
    assert widths.get("job_id_t") == contract.JOB_ID_BITS
    assert widths.get("iteration_t") == contract.ITERATION_BITS
    assert widths.get("priority_t") == contract.PRIORITY_BITS
    assert widths.get("importance_t") == contract.IMPORTANCE_BITS
    assert widths.get("progress_t") == contract.PROGRESS_BITS
    assert widths.get("congestion_level_t") == contract.LEVEL_BITS
    assert widths.get("mark_threshold_t") == contract.THRESHOLD_BITS
    assert 1 << widths["job_slot_t"] == contract.MAX_JOBS
    assert widths.get("rate_class_t") == contract.RATE_CLASS_BITS
    assert widths.get("queue_bytes_t") == contract.QUEUE_BYTES_BITS
    v1model_widths = _typedef_widths(P4SRC / "v1model" / "include" / "define_v1model.p4")
    assert v1model_widths.get("PortId_t") == contract.PORT_BITS
    assert v1model_widths.get("QueueDepth_t") == contract.QDEPTH_BITS


def test_tna_telemetry_unit_is_the_cell() -> None:
    """The TNA program reports a queue of d cells as d * 80 bytes, made of two shifts (Tofino multiplies by
    no constant): the shifts must add up to the cell the contract's depth unit names."""
    tna = P4SRC / "tna" / "include"
    assert _consts(tna / "define_tna.p4").get("QDEPTH_UNIT_BYTES") == depth.CELLS.unit_bytes
    text = (tna / "control" / "telemetry.p4").read_text()
    shifts = [int(m) for m in re.findall(r"cells\s*<<\s*(\d+)", text)]
    assert shifts and sum(1 << s for s in shifts) == depth.CELLS.unit_bytes
