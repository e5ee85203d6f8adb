"""The reference switch forwarding real packets on veths (needs root): what leaves each port is what
the pure pipeline decides, strict priority behind a shared port rate, ECN from real queue depths."""

from __future__ import annotations

import time

import pytest
from refswitch_helpers import (
    HOST_IP,
    drop_entries,
    ecn_entries,
    flow,
    forwarded,
    host_routes,
    job_priority,
    shim_packet,
    tcp_packet,
    truncated_shim,
)
from refswitch_net import wired
from scapy.layers.inet import IP
from scapy.layers.l2 import ARP, Ether

from mlfc import contract as P
from mlfc.controller.sync import SwitchConnection
from mlfc.launch.switches import RefSwitch
from mlfc.policy.drop import DropPolicy
from mlfc.policy.ecn import EcnProfile
from mlfc.refswitch import pipeline as pl
from mlfc.refswitch.state import SwitchState
from mlfc.refswitch.tables import Tables
from mlfc.testing.refswitch import counter_cells, counter_snapshot, install, pipeline
from mlfc.wire import MlfcShim, MsgType

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def rig():
    with (
        wired(3, "rsd") as (ports, wire),
        RefSwitch(name="rsd", ports=ports, seed=7) as sw,
        SwitchConnection(sw.grpc_addr, pipeline=pipeline(), election_id=1) as conn,
    ):
        yield sw, conn, wire


@pytest.fixture
def fresh(rig):
    """A freshly committed pipeline with host routes, queues back to defaults."""
    sw, conn, wire = rig
    conn.load_pipeline(force=True)
    sw.cli("set_queue_rate 0", "set_queue_depth 64")
    wire.flush()
    conn.write_entries(host_routes())
    return sw, conn, wire


def _model(entries) -> tuple[Tables, SwitchState]:
    tables, state = Tables(), SwitchState()
    install(tables, host_routes() + entries)
    return tables, state


def test_nothing_is_forwarded_until_a_pipeline_is_pushed():
    with wired(2, "rsn") as (ports, wire), RefSwitch(name="rsn", ports=ports) as sw:
        pkt = bytes(shim_packet(0, 1, job=1))
        wire.send(0, pkt)
        assert wire.collect(quiet=0.3) == [], "like simple_switch_grpc --no-p4: drop until configured"
        with SwitchConnection(sw.grpc_addr, pipeline=pipeline(), election_id=5) as conn:
            conn.load_pipeline(force=True)
            conn.write_entries(host_routes()[:2])
            wire.send(0, pkt)
            assert wire.collect(quiet=0.3) == [(1, forwarded(shim_packet(0, 1, job=1), 1))]


def test_forwarded_bytes_match_the_pipeline_model(fresh):
    _sw, conn, wire = fresh
    entries = [flow(42, dst=HOST_IP[2], protocol=6), job_priority(3, 5)]
    conn.write_entries(entries)
    tables, state = _model(entries)
    sends = [
        (0, shim_packet(0, 1, job=3, seq=1)),
        (0, shim_packet(0, 2, job=9, msg_type=MsgType.CNP)),
        (1, tcp_packet(1, 2, 1000, 80)),
        (2, tcp_packet(2, 0, 1000, 80)),
        (0, shim_packet(0, 1, version=3)),
        (2, truncated_shim(2, 1, 7)),
        (0, Ether() / IP(dst="10.9.9.9", ttl=9) / (b"x" * 30)),
        (0, Ether(dst="ff:ff:ff:ff:ff:ff") / ARP(pdst=HOST_IP[1])),
        (1, shim_packet(1, 0, job=60000, size=900)),
    ]
    for port, pkt in sends:
        wire.send(port, bytes(pkt))
        expected = pl.process(bytes(pkt), port, tables, state)
        got = wire.collect(quiet=0.15)
        if expected.dropped:
            assert got == [], f"{pkt.summary()} should be dropped ({expected.drop_reason})"
        else:
            assert got == [(expected.egress_port, expected.out)], pkt.summary()
    assert counter_snapshot(conn) == state.snapshot()


def test_strict_priority_behind_one_port_rate(fresh):
    sw, conn, wire = fresh
    conn.write_entries([job_priority(1, 1), job_priority(2, 5)])
    sw.cli("set_queue_rate 25 1")  # port 1 sends 25 packets/s, whatever the class
    lows = [shim_packet(0, 1, job=1, seq=i) for i in range(12)]
    highs = [shim_packet(0, 1, job=2, seq=100 + i) for i in range(5)]
    for p in lows + highs:
        wire.send(0, bytes(p))
    start = time.monotonic()
    got = wire.collect(quiet=0.5, expect=len(lows) + len(highs))
    elapsed = time.monotonic() - start
    order = [(Ether(f)[MlfcShim].job_id, Ether(f)[MlfcShim].chunk_seq) for _, f in got]
    assert len(order) == 17, order
    high_pos = [i for i, (j, _) in enumerate(order) if j == 2]
    assert max(high_pos) < 5 + 3, f"the high class overtook the queued lows: {order}"
    assert [s for j, s in order if j == 1] == list(range(12)), "FIFO within a class"
    assert elapsed >= 16 / 25 * 0.9, f"17 packets at 25 pkt/s took only {elapsed:.2f} s"


def test_ecn_marks_from_real_queue_depths(fresh):
    sw, conn, wire = fresh
    profile = EcnProfile(kmin=2, kmax=5, pmax=0.5)
    conn.write_entries(ecn_entries(profile, port=1))
    sw.cli("set_queue_rate 100 1")
    pkts = [shim_packet(0, 1, job=1, seq=i, ecn=2 if i % 2 == 0 else 0) for i in range(30)]
    for p in pkts:
        wire.send(0, bytes(p))
    got = sorted((Ether(f) for _, f in wire.collect(quiet=0.5, expect=30)), key=lambda e: e[MlfcShim].chunk_seq)
    assert len(got) == 30
    slack = 3  # packets that may leave the 100 pkt/s queue while the burst is being sent
    for i, p in enumerate(got):
        ce = p[IP].tos & 3 == 3
        if i % 2:
            assert not ce
        elif i > profile.kmax + slack + 1:
            assert ce, f"packet {i} above Kmax not marked"
        elif i <= profile.kmin:
            assert not ce
    marks = sum(p[IP].tos & 3 == 3 for p in got)
    assert counter_cells(conn, P.JOB_ECN_MARKS) == {1: (marks, 0)}


def test_selective_drop_under_real_congestion(fresh):
    sw, conn, wire = fresh
    policy = DropPolicy(level_depths=(4, 8, 12), min_importance=(0, 2, 4, 8))
    conn.write_entries(drop_entries(policy))
    sw.cli("set_queue_depth 4096 1 1", "set_queue_rate 20 1")
    for i in range(20):
        wire.send(0, bytes(shim_packet(0, 1, job=1, importance=15, seq=10_000 + i)))
    time.sleep(0.12)  # ~2 packets have left with ~18 behind: level 3
    for imp in range(16):
        wire.send(0, bytes(shim_packet(0, 1, job=1, importance=imp, seq=imp)))
    sw.cli("set_queue_rate 0 1")  # shared mode: a rate change applies to queued packets at once
    seqs = {Ether(f)[MlfcShim].chunk_seq for _, f in wire.collect(quiet=0.5)}
    assert {imp for imp in range(16) if imp not in seqs} == set(range(8)), sorted(seqs)
    assert conn.read_counter(P.JOB_DROPS, 1)[0] == 8
