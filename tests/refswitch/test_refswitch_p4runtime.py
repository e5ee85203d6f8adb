"""The P4Runtime service: arbitration, pipeline config, table writes/reads with PI's error codes,
counters, and the controller's own client (SwitchConnection) driving it.

Conformance checks send requests no real client sends, through the bare caller in raw_p4runtime.py;
everything a client does send goes through SwitchConnection."""

from __future__ import annotations

import time

import finsy as fy
import grpc
import pytest
from finsy.proto import p4r
from raw_p4runtime import RawError, RawP4Runtime
from refswitch_helpers import HOST_IP, HOST_MAC, flow, host_routes, job_priority, route, shim_packet

from mlfc import contract, pipeline_sizes
from mlfc.controller.entries import Exact, Range, entry
from mlfc.controller.pipeline import Pipeline
from mlfc.controller.sync import SwitchConnection
from mlfc.refswitch import pipeline as pl
from mlfc.refswitch.errors import Code
from mlfc.refswitch.p4info import (
    build_p4info,
    committed_device_config,
    committed_p4info,
    default_p4info,
    load_p4info,
)
from mlfc.refswitch.server import RefSwitchServer, SwitchOptions
from mlfc.testing.refswitch import install, model_entry, pipeline

DEVICE_CONFIG = committed_device_config() or b""
INSERT, MODIFY, DELETE = p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE


@pytest.fixture
def switch():
    with RefSwitchServer(SwitchOptions(grpc_addr="127.0.0.1:0", admin_port=0)) as sw:
        yield sw


def raw(switch, **kw) -> RawP4Runtime:
    return RawP4Runtime(switch.grpc_addr, pipeline(), **kw)


@pytest.fixture
def client(switch):
    """A bare caller, primary with election id 10, the pipeline loaded."""
    c = raw(switch, election_id=10)
    assert c.arbitrate().status.code == Code.OK
    c.set_pipeline(default_p4info(), DEVICE_CONFIG)
    yield c
    c.close()


@pytest.fixture
def conn(switch):
    """The controller's client, primary, with a freshly loaded pipeline."""
    with SwitchConnection(switch.grpc_addr, pipeline=pipeline(), election_id=10) as c:
        c.load_pipeline(force=True)
        yield c


def codes(err: RawError) -> list[int]:
    return [d.canonical_code for d in err.details]


def test_capabilities(switch):
    with raw(switch) as c:
        assert c.stub.Capabilities(p4r.CapabilitiesRequest()).p4runtime_api_version == "1.3.0"


def test_without_a_pipeline_everything_is_a_failed_precondition(switch):
    with raw(switch) as c:
        for call in (
            c.get_pipeline,
            lambda: c.read([p4r.Entity(table_entry=p4r.TableEntry())]),
            lambda: c.write([], election=False),
        ):
            with pytest.raises(RawError) as exc:
                call()
            assert exc.value.code == grpc.StatusCode.FAILED_PRECONDITION
            assert "No forwarding pipeline config" in exc.value.message


def test_arbitration_primary_backup_duplicate_and_failover(switch):
    a, b, c = (raw(switch) for _ in range(3))
    try:
        up = a.arbitrate(10)
        assert (up.status.code, up.election_id.low) == (Code.OK, 10)
        up = b.arbitrate(5)
        assert (up.status.code, up.election_id.low) == (Code.ALREADY_EXISTS, 10), "backup, told the primary's id"
        with pytest.raises(RawError) as exc:
            c.arbitrate(10)
        assert exc.value.code == grpc.StatusCode.INVALID_ARGUMENT and "Election id already exists" in exc.value.message
        # A backup's writes and pipeline pushes are refused.
        b.election_id = 5
        with pytest.raises(RawError) as exc:
            b.set_pipeline(default_p4info(), DEVICE_CONFIG)
        assert exc.value.code == grpc.StatusCode.PERMISSION_DENIED
        # The backup raises its id: it becomes primary and both streams hear about it.
        up = b.arbitrate(20)
        assert (up.status.code, up.election_id.low) == (Code.OK, 20)
        note = a.next_arbitration()
        assert (note.status.code, note.election_id.low) == (Code.ALREADY_EXISTS, 20)
        b.set_pipeline(default_p4info(), DEVICE_CONFIG)
        # The primary goes away: the remaining stream is primary again.
        b.close()
        note = a.next_arbitration()
        assert (note.status.code, note.election_id.low) == (Code.OK, 10)
        a.insert(host_routes())  # the new primary's writes are accepted
    finally:
        for x in (a, b, c):
            x.close()


def test_arbitration_with_a_wrong_device_id(switch):
    with raw(switch, device_id=7) as c, pytest.raises(RawError) as exc:
        c.arbitrate(1)
    assert exc.value.code == grpc.StatusCode.NOT_FOUND


def test_pipeline_must_be_ours(client):
    info = default_p4info()
    info.tables[0].match_fields[0].bitwidth += 1
    with pytest.raises(RawError) as exc:
        client.set_pipeline(info, DEVICE_CONFIG)
    assert exc.value.code == grpc.StatusCode.INVALID_ARGUMENT
    extra = default_p4info()
    extra.tables.add().preamble.name = "MlfcIngress.other"
    with pytest.raises(RawError) as exc:
        client.set_pipeline(extra, DEVICE_CONFIG)
    assert exc.value.code == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(RawError) as exc:
        client.set_pipeline(default_p4info(), DEVICE_CONFIG, action=p4r.SetForwardingPipelineConfigRequest.UNSPECIFIED)
    assert exc.value.code == grpc.StatusCode.INVALID_ARGUMENT
    if DEVICE_CONFIG:
        with pytest.raises(RawError) as exc:
            client.set_pipeline(default_p4info(), b'{"program": "something else"}')
        assert exc.value.code == grpc.StatusCode.INVALID_ARGUMENT


def test_a_deployment_sized_pipeline_is_accepted_and_its_sizes_hold(switch, tmp_path):
    """The committed program compiled at other table sizes (mlfc/pipeline_sizes.py) is ours: the switch
    takes its sizes from it; more than a table holds is RESOURCE_EXHAUSTED; sizes beyond the tested
    maximum, or a P4Info and JSON that disagree, are refused."""
    p4info_path, json_path = pipeline_sizes.write_resized({contract.FLOWS: 16384}, tmp_path)
    sized = Pipeline.load(p4info_path, json_path)
    with SwitchConnection(switch.grpc_addr, pipeline=sized, election_id=10) as conn:
        conn.load_pipeline(force=True)
        assert switch.device.tables[contract.FLOWS].size == 16384
        flows = [flow(1, src=f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}") for i in range(16384)]
        conn.write_entries(flows)
        assert len(switch.device.tables[contract.FLOWS]) == 16384
        with pytest.raises(Exception, match="RESOURCE_EXHAUSTED"):
            conn.write_entries([flow(1, src="11.0.0.1")])
    c = raw(switch, election_id=11)
    try:
        assert c.arbitrate().status.code == Code.OK
        info = load_p4info(p4info_path)
        too_big = pipeline_sizes.resize_p4info(info, {contract.FLOWS: 16385})
        with pytest.raises(RawError) as exc:
            c.set_pipeline(too_big)
        assert exc.value.code == grpc.StatusCode.INVALID_ARGUMENT and "16384" in exc.value.message
        if DEVICE_CONFIG:
            with pytest.raises(RawError) as exc:
                c.set_pipeline(info, DEVICE_CONFIG)  # the JSON still says 1024
            assert exc.value.code == grpc.StatusCode.INVALID_ARGUMENT and "disagree" in exc.value.message
    finally:
        c.close()


def test_pipeline_actions_and_get_config(client):
    req = p4r.SetForwardingPipelineConfigRequest
    client.set_pipeline(default_p4info(), DEVICE_CONFIG, cookie=0x1234)
    client.insert(host_routes())
    got = client.get_pipeline(p4r.GetForwardingPipelineConfigRequest.COOKIE_ONLY)
    assert got.cookie.cookie == 0x1234 and not got.HasField("p4info")
    assert client.get_pipeline().p4info == default_p4info()
    client.set_pipeline(default_p4info(), DEVICE_CONFIG, action=req.VERIFY)
    client.set_pipeline(default_p4info(), DEVICE_CONFIG, action=req.RECONCILE_AND_COMMIT, cookie=0x1234)
    assert len(client.read_table(contract.ROUTES_V4)) == 3, "reconcile keeps the forwarding state"
    client.set_pipeline(default_p4info(), DEVICE_CONFIG, action=req.VERIFY_AND_SAVE)
    assert len(client.read_table(contract.ROUTES_V4)) == 3, "saved, not yet committed"
    client.set_pipeline(p4r.ForwardingPipelineConfig().p4info, action=req.COMMIT)
    assert client.read_table(contract.ROUTES_V4) == [], "a committed pipeline starts empty"


def _entries():
    return [
        route("10.1.0.0/16", 1, HOST_MAC[1]),
        flow(42, 3, src=HOST_IP[0], dst=HOST_IP[1], protocol=6, dst_port=5001),
        job_priority(7, 5, iterations=(10, 20), progress=(0, 3), priority=9),
        entry(
            contract.DROP_THRESHOLD,
            {contract.LEVEL: Exact(2)},
            contract.SET_MIN_IMPORTANCE,
            {"importance": 4},
            0,
        ),
        entry(contract.CONGESTION_LEVELS, {contract.DEQ_QDEPTH: Range(16, 31)}, contract.SET_LEVEL, {"l": 1}, 1),
        entry(
            contract.ECN_PROFILE,
            {contract.ENQ_QDEPTH: Range(33, contract.MAX_QDEPTH)},
            contract.MARK_ALWAYS,
            priority=2,
        ),
        entry(
            contract.ECN_PROFILE,
            {contract.ENQ_QDEPTH: Range(5, 32)},
            contract.MARK_WITH_PROBABILITY,
            {"threshold": 1000},
            1,
        ),
    ]


def test_write_and_read_back_every_match_kind(conn, switch):
    for te in _entries():
        conn.write_entries([te])
    for te in _entries():
        assert te in conn.read_entries([te.table])
        stored = model_entry(te)
        assert switch.device.tables[te.table].get(stored.key) == stored
    assert len(conn.read_entries()) == len(_entries())


def test_duplicate_missing_and_batch_errors(client, switch):
    r1, r2 = route("10.1.0.0/16", 1, HOST_MAC[1]), route("10.2.0.0/16", 2, HOST_MAC[2])
    client.insert([r1])
    with pytest.raises(RawError) as exc:
        client.insert([r1])
    assert exc.value.code == grpc.StatusCode.UNKNOWN and codes(exc.value) == [Code.ALREADY_EXISTS]
    with pytest.raises(RawError) as exc:
        client.write([client.table_update(MODIFY, r2)])
    assert codes(exc.value) == [Code.NOT_FOUND]
    r3 = route("10.3.0.0/16", 0, HOST_MAC[0])
    with pytest.raises(RawError) as exc:
        client.write(
            [
                client.table_update(INSERT, r2),
                client.table_update(INSERT, r1),
                client.table_update(DELETE, r3),
                client.table_update(INSERT, r3),
            ]
        )
    assert codes(exc.value) == [Code.OK, Code.ALREADY_EXISTS, Code.NOT_FOUND, Code.OK]
    assert len(client.read_table(contract.ROUTES_V4)) == 3, "updates that succeeded in a failed batch are applied"
    client.write([client.table_update(MODIFY, route("10.3.0.0/16", 2, HOST_MAC[2]))])
    assert switch.device.tables[contract.ROUTES_V4].lookup((0x0A030001,))[1][0] == 2
    client.write([client.table_update(DELETE, r3)])
    assert len(client.read_table(contract.ROUTES_V4)) == 2


def _raw_update(client, te, mutate) -> p4r.Update:
    update = client.table_update(INSERT, te)
    mutate(update.entity.table_entry)
    return update


@pytest.mark.parametrize(
    ("table", "mutate", "code"),
    [
        (
            contract.ROUTES_V4,
            lambda te: setattr(te.match[0].lpm, "prefix_len", 8),
            Code.INVALID_ARGUMENT,
        ),  # trailing bits
        (contract.ROUTES_V4, lambda te: setattr(te.match[0].lpm, "prefix_len", 0), Code.INVALID_ARGUMENT),
        (contract.ROUTES_V4, lambda te: setattr(te, "priority", 5), Code.INVALID_ARGUMENT),
        (contract.ROUTES_V4, lambda te: setattr(te, "table_id", 0x02FFFFFF), Code.INVALID_ARGUMENT),
        (contract.ROUTES_V4, lambda te: setattr(te.match[0], "field_id", 9), Code.INVALID_ARGUMENT),
        (contract.ROUTES_V4, lambda te: setattr(te.match[0].lpm, "value", b"\x01" * 5), Code.INVALID_ARGUMENT),
        (contract.ROUTES_V4, lambda te: te.action.action.params.pop(), Code.INVALID_ARGUMENT),
        (
            contract.ROUTES_V4,
            lambda te: setattr(te.action.action.params[0], "value", b"\x02\x00"),
            Code.INVALID_ARGUMENT,
        ),
        (contract.ROUTES_V4, lambda te: setattr(te.action.action, "action_id", 0x01FFFFFF), Code.INVALID_ARGUMENT),
        (contract.ROUTES_V4, lambda te: te.ClearField("action"), Code.INVALID_ARGUMENT),
        (contract.ROUTES_V4, lambda te: setattr(te, "idle_timeout_ns", 1000), Code.INVALID_ARGUMENT),
        (contract.FLOWS, lambda te: setattr(te, "priority", 0), Code.INVALID_ARGUMENT),
        (contract.FLOWS, lambda te: setattr(te.match[0].ternary, "mask", b"\x00"), Code.INVALID_ARGUMENT),
        (contract.FLOWS, lambda te: setattr(te.match[0].ternary, "mask", b"\xff\x00\x00\x00"), Code.INVALID_ARGUMENT),
        (
            contract.JOB_PRIORITY,
            lambda te: setattr(te.match[1].range, "low", b"\x30"),
            Code.INVALID_ARGUMENT,
        ),  # low > high
        (
            contract.JOB_PRIORITY,
            lambda te: (setattr(te.match[1].range, "low", b"\x00"), setattr(te.match[1].range, "high", b"\xff" * 4)),
            Code.INVALID_ARGUMENT,
        ),
        (contract.DROP_THRESHOLD, lambda te: te.match.pop(), Code.INVALID_ARGUMENT),  # the exact field is missing
        (
            contract.DROP_THRESHOLD,
            lambda te: te.match[0].ClearField("exact") or te.match[0].ternary.SetInParent(),  # wrong match kind
            Code.INVALID_ARGUMENT,
        ),
    ],
)
def test_invalid_entries_are_rejected_like_pi(client, table, mutate, code):
    te = {e.table: e for e in _entries()}[table]
    with pytest.raises(RawError) as exc:
        client.write([_raw_update(client, te, mutate)])
    assert codes(exc.value) == [code], exc.value


def test_wrong_action_for_table(client):
    update = client.table_update(INSERT, route("10.1.0.0/16", 1, HOST_MAC[1]))
    update.entity.table_entry.action.action.action_id = pipeline().schema.actions[contract.MARK_ALWAYS].id
    del update.entity.table_entry.action.action.params[:]
    with pytest.raises(RawError) as exc:
        client.write([update])
    assert codes(exc.value) == [Code.INVALID_ARGUMENT]


def _default_entry(table: str, action: str, **params: int) -> p4r.TableEntry:
    return fy.P4TableEntry(table, action=fy.P4TableAction(action, **params), is_default_action=True).encode_entry(
        pipeline().schema
    )


def test_default_actions(client, switch):
    te = _default_entry(contract.JOB_PRIORITY, contract.SET_PRIORITY, priority=3)
    client.write([p4r.Update(type=MODIFY, entity=p4r.Entity(table_entry=te))])
    read = client.read([p4r.Entity(table_entry=p4r.TableEntry(table_id=te.table_id, is_default_action=True))])
    assert read[0].table_entry == te
    assert switch.device.tables[contract.JOB_PRIORITY].default == (contract.SET_PRIORITY, (3,))
    reset = p4r.TableEntry(table_id=te.table_id, is_default_action=True)
    client.write([p4r.Update(type=MODIFY, entity=p4r.Entity(table_entry=reset))])
    assert switch.device.tables[contract.JOB_PRIORITY].default == (contract.SET_PRIORITY, (1,))
    const = _default_entry(contract.ROUTES_V4, contract.DROP)
    for utype, code in (
        (MODIFY, Code.PERMISSION_DENIED),
        (INSERT, Code.INVALID_ARGUMENT),
        (DELETE, Code.INVALID_ARGUMENT),
    ):
        with pytest.raises(RawError) as exc:
            client.write([p4r.Update(type=utype, entity=p4r.Entity(table_entry=const))])
        assert codes(exc.value) == [code]


def test_counters_read_and_write(client, switch):
    dev = switch.device
    install(dev.tables, host_routes())
    pkts = [bytes(shim_packet(0, 1, job=21, size=150 + i)) for i in range(3)]
    for p in pkts:
        pl.process(p, 0, dev.tables, dev.state)
    assert client.read_counter(contract.JOB_PACKETS) == {21: (3, sum(map(len, pkts)))}
    assert client.read_counter(contract.JOB_PACKETS, 21) == {21: (3, sum(map(len, pkts)))}
    wildcard = client.read(
        [p4r.Entity(counter_entry=p4r.CounterEntry(counter_id=client.counter_id(contract.JOB_PACKETS)))]
    )
    assert len(wildcard) == contract.MAX_JOBS, "a wildcard index returns every cell"
    everything = client.read([p4r.Entity(counter_entry=p4r.CounterEntry())])
    assert len(everything) == sum(s.size for s in contract.COUNTERS.values())
    with pytest.raises(RawError) as exc:
        client.read_counter(contract.JOB_PACKETS, contract.MAX_JOBS)
    assert exc.value.code == grpc.StatusCode.OUT_OF_RANGE
    reset = p4r.CounterEntry(counter_id=client.counter_id(contract.JOB_PACKETS))
    reset.index.index = 21
    client.write([p4r.Update(type=MODIFY, entity=p4r.Entity(counter_entry=reset))])
    assert client.read_counter(contract.JOB_PACKETS) == {}


def test_registers_and_things_outside_our_p4info(client):
    for entity in (p4r.Entity(register_entry=p4r.RegisterEntry(register_id=0x16000001)),):
        with pytest.raises(RawError) as exc:
            client.read([entity])
        assert exc.value.code == grpc.StatusCode.UNIMPLEMENTED
        with pytest.raises(RawError) as exc:
            client.write([p4r.Update(type=MODIFY, entity=entity)])
        assert codes(exc.value) == [Code.UNIMPLEMENTED]
    with pytest.raises(RawError) as exc:
        client.read([p4r.Entity(meter_entry=p4r.MeterEntry(meter_id=0x14000001))])
    assert exc.value.code == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(RawError) as exc:
        client.read([p4r.Entity(table_entry=p4r.TableEntry(table_id=0x02000001))])
    assert exc.value.code == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(RawError) as exc:
        client.read([p4r.Entity(counter_entry=p4r.CounterEntry(counter_id=0x12000001))])
    assert exc.value.code == grpc.StatusCode.INVALID_ARGUMENT
    req = p4r.WriteRequest(device_id=1, atomicity=p4r.WriteRequest.DATAPLANE_ATOMIC)
    req.election_id.low = 10
    with pytest.raises(grpc.RpcError) as rpc:
        client.stub.Write(req)
    assert rpc.value.code() == grpc.StatusCode.UNIMPLEMENTED
    with pytest.raises(grpc.RpcError) as rpc:
        client.stub.Write(p4r.WriteRequest(device_id=3))
    assert rpc.value.code() == grpc.StatusCode.NOT_FOUND


def test_the_controllers_client_drives_it(switch):
    """SwitchConnection (the controller's client, on finsy): arbitration, pipeline push, writes, reads."""
    with SwitchConnection(switch.grpc_addr, pipeline=pipeline()) as conn:
        assert conn.load_pipeline(), "a switch without a pipeline gets ours"
        conn.write_entries([route(f"{HOST_IP[1]}/32", 1, "00:00:00:00:00:02", src_mac="00:00:00:00:00:01")])
        entries = conn.read_entries([contract.ROUTES_V4])
        counters = conn.read_counters(contract.JOB_PACKETS, [5])
        primary = conn.primary
    assert primary
    assert len(entries) == 1 and entries[0].params_dict() == {"port": 1, "src_mac": 1, "dst_mac": 2, "rate_class": 0}
    assert len(counters) == 1
    deadline = time.monotonic() + 5
    while switch.p4runtime.arbiter.count() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert switch.p4runtime.arbiter.count() == 0, "the stream is cleaned up when the client leaves"
    assert switch.device.tables[contract.ROUTES_V4].lookup((0x0A00000B,)) == (contract.SET_NEXT_HOP, (1, 1, 2, 0))


@pytest.mark.skipif(committed_p4info() is None, reason="p4src/build/mlfc.p4info.txtpb missing: run `make p4`")
def test_model_p4info_is_what_p4c_emits():
    """The contract (mlfc/contract.py) built into a P4Info by refswitch/p4info.py equals p4c's P4Info:
    same names, ids, aliases, match fields, widths, actions, counters, register and order."""
    assert build_p4info() == committed_p4info()
