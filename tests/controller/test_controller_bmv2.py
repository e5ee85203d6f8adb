"""Against real switch processes: the library client, and the daemon (as a child process) installing,
modifying and deleting via intents, restoring restarted switches, handling a rival primary, and exporting
counters of real packets. Every test runs twice (the ``switch_factory`` fixture, tests/controller/conftest.py):
``[bmv2]`` against simple_switch_grpc (skipped where BMv2 is absent) and ``[ref]`` against mlfc's reference
switch (deployment ``target: refswitch``, queue commands to its admin port), which needs nothing else."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import grpc
import pytest
from controller_helpers import (
    INTENT_A,
    INTENT_B,
    PIPELINE,
    config_doc,
    eventually,
    expected,
    metric,
    needs_artifacts,
    observer,
    read_back,
    target_doc,
    wait_restored,
)

from mlfc import contract, pipeline_sizes
from mlfc.controller import compile as comp
from mlfc.controller.config import parse_config
from mlfc.controller.entries import TableEntry, Ternary, entry
from mlfc.controller.sync import SwitchConnection
from mlfc.proto import intent_pb2 as pb

pytestmark = [needs_artifacts, pytest.mark.timeout(120)]  # [bmv2] params carry the bmv2 marker

# ---- the library client -----------------------------------------------------------------------------


def test_a_16k_flow_table_compiled_in_holds_on_the_switch(switch_factory, tmp_path) -> None:
    """A deployment's table size (mlfc/pipeline_sizes.py, issue 28): 16,384 flows fit, one more is refused."""
    p4info, device_config = pipeline_sizes.write_resized({contract.FLOWS: 16384}, tmp_path / "p4")
    sw = switch_factory(device_id=1)

    def flow(i: int) -> TableEntry:
        match = {contract.IPV4_SRC: Ternary(0x0A000000 + i, 0xFFFFFFFF)}
        return entry(contract.FLOWS, match, contract.SET_JOB, {"job_id": 1 + i % 100}, priority=1)

    with SwitchConnection(sw.grpc_addr, 1, p4info, device_config) as conn:
        conn.load_pipeline(force=True)
        conn.write_entries([flow(i) for i in range(16384)])
        # the reference switch says RESOURCE_EXHAUSTED; PI reports BMv2's full table as UNKNOWN
        with pytest.raises(Exception, match=r"RESOURCE_EXHAUSTED|Error when adding match entry"):
            conn.write_entries([flow(16384)])
        assert len(conn.read_entries([contract.FLOWS])) == 16384


def test_switch_connection_round_trip(switch_factory) -> None:
    sw = switch_factory(device_id=1)
    config = parse_config(config_doc(target_doc(sw)))
    desired_a = list(comp.compile_intent(INTENT_A, config, PIPELINE).entries["s1"])
    desired_b = list(comp.compile_intent(INTENT_B, config, PIPELINE).entries["s1"])
    with SwitchConnection(sw.grpc_addr, 1, contract.P4INFO, contract.BMV2_JSON) as conn:
        assert conn.primary
        assert conn.pipeline_cookie() is None
        assert conn.load_pipeline() is True
        assert conn.load_pipeline() is False  # same cookie: not reloaded
        assert conn.pipeline_cookie() == PIPELINE.cookie
        conn.write_entries(desired_a)
        assert set(conn.read_entries()) == set(desired_a)  # the switch's canonical form equals ours
        job7 = entry(
            contract.JOB_PRIORITY, {contract.JOB_ID: Ternary(7, 0xFFFF)}, contract.SET_PRIORITY, {"priority": 1}, 30
        )
        conn.modify_entries([job7])
        assert job7 in conn.read_entries([contract.JOB_PRIORITY])
        d = conn.reconcile(desired_b)
        assert len(d.inserts) and len(d.deletes) and len(d.modifies)
        assert set(conn.read_entries()) == set(desired_b)
        assert conn.reconcile(desired_b).empty  # idempotent
        assert conn.read_counter(contract.JOB_PACKETS, 7) == (0, 0)
        assert set(conn.read_counters(contract.SHIM_TRUNCATED_COUNTER)) == set(
            range(PIPELINE.counter_size(contract.SHIM_TRUNCATED_COUNTER))
        )
        with pytest.raises(Exception, match="ALREADY_EXISTS"):
            conn.write_entries([desired_b[0]])
        conn.delete_entries([desired_b[0]])
        assert desired_b[0] not in conn.read_entries()
        assert conn.clear_entries() == len(desired_b) - 1
        assert conn.read_entries() == []


# ---- the daemon ---------------------------------------------------------------------------------------


def test_daemon_installs_modifies_and_deletes_on_two_switches(switch_factory, controller_factory) -> None:
    s1, s2 = switch_factory(device_id=1), switch_factory(device_id=2)
    ctl = controller_factory([s1, s2])
    wait_restored(ctl)
    assert read_back(s1) == expected(ctl, pb.Intent(), "s1")  # routes + default policies

    reply = ctl.client.apply(INTENT_A)
    assert reply.generation == 1
    assert reply.entries == len(expected(ctl, INTENT_A, "s1"))
    # Apply returns once written: read straight away.
    assert read_back(s1) == expected(ctl, INTENT_A, "s1")
    assert read_back(s2) == expected(ctl, INTENT_A, "s2")
    assert expected(ctl, INTENT_A, "s1") != expected(ctl, INTENT_A, "s2")  # s1 has its own ECN port profile

    writes_before = metric(ctl, "mlfc_entry_writes_total", switch="s1", op="insert")
    reply = ctl.client.apply(INTENT_B)
    assert reply.generation == 2
    for sw, name in ((s1, "s1"), (s2, "s2")):
        assert read_back(sw) == expected(ctl, INTENT_B, name)
    # Only the difference was written: entries common to A and B were not re-inserted.
    a, b = expected(ctl, INTENT_A, "s1"), expected(ctl, INTENT_B, "s1")
    new_keys = {e.key for e in b} - {e.key for e in a}
    assert metric(ctl, "mlfc_entry_writes_total", switch="s1", op="insert") - writes_before == len(new_keys)

    # A bad intent is refused with the field named, and changes nothing anywhere.
    bad = pb.Intent(jobs=[pb.JobIntent(job_id=7, priority=3), pb.JobIntent(job_id=11, priority=7)])
    with pytest.raises(grpc.RpcError) as err:
        ctl.client.apply(bad)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details().startswith("jobs[1].priority:")
    assert ctl.client.get().generation == 2
    assert ctl.client.get().intent == INTENT_B
    assert read_back(s1) == expected(ctl, INTENT_B, "s1")

    # Re-applying the same intent writes nothing (idempotent).
    total = sum(metric(ctl, "mlfc_entry_writes_total", switch="s1", op=op) for op in ("insert", "modify", "delete"))
    assert ctl.client.apply(INTENT_B).generation == 3
    assert (
        sum(metric(ctl, "mlfc_entry_writes_total", switch="s1", op=op) for op in ("insert", "modify", "delete"))
        == total
    )

    st = ctl.client.status()
    s1_status = next(s for s in st.switches if s.name == "s1")
    assert s1_status.entries[contract.JOB_PRIORITY] == sum(1 for e in b if e.table == contract.JOB_PRIORITY)
    assert s1_status.last_error == ""  # queue settings (Thrift, or the refswitch admin port) went through too
    if s1.target == "refswitch":  # its admin port can show them: port 3 at 1000 pkt/s, 32 packets a queue
        port3 = next(line for line in s1.cli("show_queues").split(" | ") if line.startswith("port 3 "))
        assert port3.startswith("port 3 rate 1000 queues ") and "/32@" in port3, port3
    out = subprocess.run(
        [sys.executable, "-m", "mlfc.controller.cli", "status", "--addr", ctl.intent_addr],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "switch s1: IN_SYNC, connected, primary" in out and "switch s2: IN_SYNC, connected, primary" in out
    assert "job_priority=" in out


def test_restarted_switch_is_restored_in_full(switch_factory, controller_factory) -> None:
    s1, s2 = switch_factory(device_id=1), switch_factory(device_id=2)
    ctl = controller_factory([s1, s2])
    wait_restored(ctl)
    generation = ctl.client.apply(INTENT_A).generation
    assert metric(ctl, "mlfc_pipeline_loads_total", switch="s1") == 1

    s1.restart()  # SIGKILL + start: comes back with no pipeline and no entries
    started = time.monotonic()
    # Until the daemon has noticed and reloaded s1: before it notices, its status still says in sync.
    eventually(lambda: metric(ctl, "mlfc_pipeline_loads_total", switch="s1") == 2, 20, "s1's pipeline reloaded")
    ctl.client.wait_synced(generation, timeout_s=20)
    restore_s = time.monotonic() - started
    with observer(s1) as conn:
        assert conn.pipeline_cookie() == PIPELINE.cookie
        assert set(conn.read_entries()) == expected(ctl, INTENT_A, "s1")
    assert metric(ctl, "mlfc_pipeline_loads_total", switch="s1") == 2
    assert metric(ctl, "mlfc_pipeline_loads_total", switch="s2") == 1  # the other switch was left alone
    assert read_back(s2) == expected(ctl, INTENT_A, "s2")
    print(f"restore after restart: {restore_s * 1000:.0f} ms")

    # An intent sent while a switch is down is applied when it comes back.
    s2.kill()
    reply = ctl.client.apply(INTENT_B, timeout_s=10)
    assert read_back(s1) == expected(ctl, INTENT_B, "s1")
    s2.start()
    ctl.client.wait_synced(reply.generation, timeout_s=20)
    assert read_back(s2) == expected(ctl, INTENT_B, "s2")


def test_lost_primary_role_is_retried_and_state_repaired(switch_factory, controller_factory) -> None:
    s1 = switch_factory(device_id=1)
    ctl = controller_factory([s1])
    generation = ctl.client.apply(INTENT_A).generation
    ctl.client.wait_synced(generation)

    rival = SwitchConnection(s1.grpc_addr, 1, pipeline=PIPELINE, election_id=1000).connect()
    try:
        assert rival.primary
        eventually(
            lambda: not ctl.client.status().switches[0].primary, what="daemon to notice it lost the primary role"
        )
        # Logged, then retried: it reconnects and re-arbitrates (as backup) with backoff.
        eventually(lambda: "not primary" in ctl.client.status().switches[0].last_error, what="re-arbitration as backup")
        rival.clear_entries()  # the rival wipes the tables while it is primary
    finally:
        rival.close()
    ctl.client.wait_synced(generation, timeout_s=20)
    eventually(lambda: read_back(s1) == expected(ctl, INTENT_A, "s1"), what="entries repaired after regaining primary")


def test_start_up_reconciles_what_the_switch_already_holds(switch_factory, controller_factory) -> None:
    s1 = switch_factory(device_id=1)
    config = parse_config(config_doc(target_doc(s1)))
    defaults = list(comp.compile_intent(pb.Intent(), config, PIPELINE).entries["s1"])
    stray = entry(
        contract.JOB_PRIORITY, {contract.JOB_ID: Ternary(99, 0xFFFF)}, contract.SET_PRIORITY, {"priority": 6}, 30
    )
    route = next(e for e in defaults if e.table == contract.ROUTES_V4)
    wrong_route = entry(route.table, route.match_dict(), route.action, {**route.params_dict(), "port": 2})
    with SwitchConnection(s1.grpc_addr, 1, pipeline=PIPELINE) as conn:
        conn.load_pipeline()
        conn.write_entries([e for e in defaults if e is not route] + [wrong_route, stray])

    ctl = controller_factory([s1])
    wait_restored(ctl)
    assert read_back(s1) == set(defaults)
    assert metric(ctl, "mlfc_pipeline_loads_total", switch="s1") == 0  # same cookie: kept, not reloaded
    assert metric(ctl, "mlfc_entry_writes_total", switch="s1", op="delete") == 1
    assert metric(ctl, "mlfc_entry_writes_total", switch="s1", op="modify") == 1
    assert metric(ctl, "mlfc_entry_writes_total", switch="s1", op="insert") == 0


# ---- telemetry of real packets (veth pair, needs root) ---------------------------------------------------


@pytest.fixture
def veth_pair() -> Iterator[tuple[str, str]]:
    a, b = f"mlfcv{time.monotonic_ns() % 100000}a", f"mlfcv{time.monotonic_ns() % 100000}b"
    subprocess.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b], check=True)
    try:
        for dev in (a, b):
            subprocess.run(["ip", "link", "set", dev, "up"], check=True)
            subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1"], check=False)
        yield a, b
    finally:
        subprocess.run(["ip", "link", "del", a], check=False)


@pytest.mark.root
def test_counters_of_real_packets_reach_status_and_metrics(switch_factory, controller_factory, veth_pair) -> None:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from scapy.sendrecv import sendp

    from mlfc.wire import SHIM_PORT_BASE, MlfcShim

    switch_side, host_side = veth_pair
    s1 = switch_factory(device_id=1, ports={1: switch_side})
    ctl = controller_factory([s1])
    ctl.client.apply(pb.Intent(jobs=[pb.JobIntent(job_id=7, priority=5)]))
    ctl.client.wait_synced()

    tagged = (
        Ether()
        / IP(src="10.0.1.1", dst="10.0.2.1")
        / UDP(sport=SHIM_PORT_BASE, dport=SHIM_PORT_BASE)
        / MlfcShim(job_id=7, iteration=1)
        / (b"x" * 100)
    )
    bad_shim = Ether() / IP(src="10.0.1.1", dst="10.0.2.1") / UDP(sport=1, dport=SHIM_PORT_BASE) / MlfcShim(version=3)
    sendp([tagged] * 5 + [bad_shim] * 2, iface=host_side, verbose=False)

    eventually(lambda: any(j.job_id == 7 and j.packets == 5 for j in ctl.client.status().jobs), what="job 7 counters")
    job7 = next(j for j in ctl.client.status().jobs if j.job_id == 7)
    assert job7.bytes == 5 * len(tagged)
    eventually(lambda: metric(ctl, "mlfc_port_shim_errors_total", switch="s1", port="1", kind="bad_header") == 2)
    assert metric(ctl, "mlfc_job_packets_total", switch="s1", job="7") == 5
