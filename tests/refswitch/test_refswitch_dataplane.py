"""The reference switch forwarding real packets on veths (needs root): what leaves each port is what
the pure pipeline decides, strict priority behind a shared port rate, ECN from real queue depths.

Bursts are queued behind a held port (``hold_burst``) and released once the switch holds all of them,
so what the tests assert does not depend on how fast this machine sends or the switch receives."""

from __future__ import annotations

import re
import time
from pathlib import Path

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

from mlfc import contract
from mlfc.controller.sync import SwitchConnection
from mlfc.launch.switches import RefSwitch
from mlfc.policy.drop import DropPolicy
from mlfc.policy.ecn import EcnProfile
from mlfc.refswitch import pipeline as pl
from mlfc.refswitch.state import SwitchState
from mlfc.refswitch.tables import Tables
from mlfc.testing.refswitch import counter_cells, counter_snapshot, install, pipeline
from mlfc.testing.veth import run
from mlfc.testing.waiting import eventually
from mlfc.wire import MlfcShim, MsgType

pytestmark = pytest.mark.root

HOLD_PPS = 2  # a held port sends one packet per 0.5 s while a burst is being queued behind it


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


def occupancy(sw: RefSwitch, port: int) -> int:
    """Packets queued at ``port`` (all its priority queues), from the admin endpoint's show_queues."""
    for line in sw.cli("show_queues").split(" | "):
        m = re.fullmatch(rf"port {port} rate \S+ queues (.*)", line.strip())
        if m:
            return sum(int(n) for n in re.findall(r"\d+:(\d+)/", m.group(1)))
    return 0


def hold_burst(sw: RefSwitch, wire, frames: list[bytes], port: int = 1) -> list[tuple[int, bytes]]:
    """Send ``frames`` (all routed to ``port``) from host 0 while ``port`` is held at HOLD_PPS. Returns once
    the switch has every one of them (queued, or sent), with the frames that had left by then."""
    sw.cli(f"set_queue_rate {HOLD_PPS} {port}")
    for f in frames:
        wire.send(0, f)
    left: list[tuple[int, bytes]] = []

    def all_held() -> bool:
        left.extend(wire.collect(quiet=0.02))  # what has left first, then what is queued: none counted twice
        return len(left) + occupancy(sw, port) == len(frames)

    eventually(all_held, 30, f"{len(frames)} packets held at port {port}")
    return left


def test_nothing_is_forwarded_until_a_pipeline_is_pushed():
    with wired(2, "rsn") as (ports, wire), RefSwitch(name="rsn", ports=ports) as sw:
        pkt = bytes(shim_packet(0, 1, job=1))
        wire.send(0, pkt)
        assert wire.expect(0, quiet=0.3) == [], "like simple_switch_grpc --no-p4: drop until configured"
        with SwitchConnection(sw.grpc_addr, pipeline=pipeline(), election_id=5) as conn:
            conn.load_pipeline(force=True)
            conn.write_entries(host_routes()[:2])
            wire.send(0, pkt)
            assert wire.expect(1) == [(1, forwarded(shim_packet(0, 1, job=1), 1))]


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
        got = wire.expect(0 if expected.dropped else 1)
        if expected.dropped:
            assert got == [], f"{pkt.summary()} should be dropped ({expected.drop_reason})"
        else:
            assert got == [(expected.egress_port, expected.out)], pkt.summary()
    assert counter_snapshot(conn) == state.snapshot()


def test_strict_priority_behind_one_port_rate(fresh):
    sw, conn, wire = fresh
    conn.write_entries([job_priority(1, 1), job_priority(2, 5)])
    lows = [bytes(shim_packet(0, 1, job=1, seq=i)) for i in range(12)]
    highs = [bytes(shim_packet(0, 1, job=2, seq=100 + i)) for i in range(5)]
    early = hold_burst(sw, wire, lows + highs)
    start = time.monotonic()
    sw.cli("set_queue_rate 25 1")  # port 1 sends 25 packets/s, whatever the class
    got = early + wire.expect(17 - len(early))
    elapsed = time.monotonic() - start
    order = [(Ether(f)[MlfcShim].job_id, Ether(f)[MlfcShim].chunk_seq) for _, f in got]
    assert len(order) == 17, order
    high_pos = [i for i, (j, _) in enumerate(order) if j == 2]
    # Only the lows that left before the highs arrived may precede them, plus at most the one the port was
    # already sending when the check ran (it counts as queued; priority does not preempt); then the five
    # highs leave in a row.
    assert high_pos == list(range(high_pos[0], high_pos[0] + 5)) and high_pos[0] <= len(early) + 1, (
        f"the high class overtook the queued lows ({len(early)} left before the burst was queued): {order}"
    )
    assert [s for j, s in order if j == 1] == list(range(12)), "FIFO within a class"
    queued = 17 - len(early)
    assert elapsed >= (queued - 1) / 25 * 0.9, f"{queued} queued packets at 25 pkt/s took only {elapsed:.2f} s"


def test_a_byte_rate_port_serialises_each_frames_length(fresh):
    """set_queue_rate_bps on real packets: the switch counts each frame's bytes (at 150 kbit/s a 1500-byte
    frame takes 80 ms, an 86-byte one 4.6 ms), so a held burst drains no faster than its bytes allow."""
    sw, _conn, wire = fresh
    rate = 150_000
    sizes = [1500 if i % 4 == 0 else 86 for i in range(24)]
    frames = [bytes(shim_packet(0, 1, job=1, seq=i, size=size)) for i, size in enumerate(sizes)]
    early = hold_burst(sw, wire, frames)
    start = time.monotonic()
    sw.cli(f"set_queue_rate_bps {rate} 1")
    got = early + wire.expect(len(frames) - len(early))
    elapsed = time.monotonic() - start
    assert [Ether(f)[MlfcShim].chunk_seq for _, f in got] == list(range(24)), "FIFO"
    assert [len(f) for _, f in got] == sizes
    least = sum(size * 8 / rate for size in sizes[len(early) : -1])
    assert elapsed >= least * 0.9, f"{len(frames) - len(early)} queued frames took {elapsed:.3f} s < {least:.3f} s"
    assert f"port 1 rate {rate}bit/s" in sw.cli("show_queues")


def test_ecn_marks_from_real_queue_depths(fresh):
    sw, conn, wire = fresh
    profile = EcnProfile(kmin=2, kmax=5, pmax=0.5)
    conn.write_entries(ecn_entries(profile, port=1))
    pkts = [bytes(shim_packet(0, 1, job=1, seq=i, ecn=2 if i % 2 == 0 else 0)) for i in range(30)]
    early = hold_burst(sw, wire, pkts)
    sw.cli("set_queue_rate 100 1")
    out = early + wire.expect(30 - len(early))
    got = sorted((Ether(f) for _, f in out), key=lambda e: e[MlfcShim].chunk_seq)
    assert len(got) == 30
    slack = 3  # packets that may leave the held queue while the burst is being sent
    for i, p in enumerate(got):
        ce = p[IP].tos & 3 == 3
        if i % 2:
            assert not ce
        elif i > profile.kmax + slack + 1:
            assert ce, f"packet {i} above Kmax not marked"
        elif i <= profile.kmin:
            assert not ce
    marks = sum(p[IP].tos & 3 == 3 for p in got)
    assert counter_cells(conn, contract.JOB_ECN_MARKS) == {1: (marks, 0)}


def test_selective_drop_under_real_congestion(fresh):
    sw, conn, wire = fresh
    policy = DropPolicy(level_depths=(4, 8, 12), min_importance=(0, 2, 4, 8))
    conn.write_entries(drop_entries(policy))
    sw.cli("set_queue_depth 4096 1 1")
    backlog = [bytes(shim_packet(0, 1, job=1, importance=15, seq=10_000 + i)) for i in range(20)]
    probes = [bytes(shim_packet(0, 1, job=1, importance=imp, seq=imp)) for imp in range(16)]
    left = hold_burst(sw, wire, backlog)
    # Egress records a queue's level when a packet leaves it: wait for one to leave the whole backlog
    # behind it (>= 12 packets: level 3).
    left += wire.expect(1)
    assert len(backlog) - len(left) >= 12, f"the backlog drained to {len(backlog) - len(left)} before the probes"
    for f in probes:
        wire.send(0, f)
    sw.cli("set_queue_rate 0 1")  # shared mode: a rate change applies to queued packets at once
    eventually(lambda: occupancy(sw, 1) == 0, 30, "port 1 drained")
    seqs = {Ether(f)[MlfcShim].chunk_seq for _, f in left + wire.collect(quiet=0.5)}
    assert {imp for imp in range(16) if imp not in seqs} == set(range(8)), sorted(seqs)
    assert conn.read_counter(contract.JOB_DROPS, 1)[0] == 8


def test_a_port_forwards_again_once_its_link_is_back_up():
    """`ip link set down` makes the kernel report ENETDOWN on the port's socket (poll says POLLERR): the
    switch keeps the port and forwards on it once the link is back (the chaos run's link fault)."""
    with (
        wired(2, "rsl") as (ports, wire),
        RefSwitch(name="rsl", ports=ports) as sw,
        SwitchConnection(sw.grpc_addr, pipeline=pipeline(), election_id=5) as conn,
    ):
        conn.load_pipeline(force=True)
        conn.write_entries(host_routes()[:2])
        for iface in ports.values():
            run("ip", "link", "set", iface, "down")
        time.sleep(0.3)  # the switch's loop sees the error
        for iface in ports.values():
            run("ip", "link", "set", iface, "up")
        for iface in ports.values():
            eventually(lambda i=iface: Path(f"/sys/class/net/{i}/operstate").read_text().strip() == "up",
                       10, f"{iface} up")  # fmt: skip
        pkt = shim_packet(0, 1, job=1)
        wire.send(0, bytes(pkt))
        assert wire.expect(1) == [(1, forwarded(pkt, 1))], "both ports still forward"
