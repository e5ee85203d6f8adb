"""Byte-rate ports (a link of R bit/s: a packet of L bytes takes L*8/R s) and byte capacities in the
traffic manager, on a virtual clock; the packets-per-second model beside them, unchanged; the admin
commands that set them (set_queue_rate_bps, set_queue_depth_bytes)."""

from __future__ import annotations

import itertools

import pytest
from refswitch_helpers import host_routes, job_priority, shim_packet

from mlfc.controller.queues import RefSwitchAdminQueues
from mlfc.refswitch.admin import execute
from mlfc.refswitch.server import RefSwitchServer, SwitchOptions
from mlfc.refswitch.sim import VirtualSwitch
from mlfc.refswitch.tm import PER_QUEUE, SHARED, QueueConfigError, TrafficManager
from mlfc.testing.refswitch import install
from mlfc.wire import MsgType

R = 12_000_000  # bit/s: a 1500-byte packet takes 1 ms
DATA, ACK = 1500, 86


def gaps(deps) -> list[float]:
    return [b.time - a.time for a, b in itertools.pairwise(deps)]


@pytest.mark.parametrize("mode", [SHARED, PER_QUEUE])
@pytest.mark.parametrize(("size", "gap"), [(DATA, 12_000 / R), (ACK, 688 / R)])
def test_packets_leave_their_serialisation_time_apart(mode: str, size: int, gap: float) -> None:
    tm = TrafficManager(8, mode)
    tm.set_rate_bps(R, port=1)
    for i in range(10):
        assert tm.enqueue(1, 3, i, 0.0, size) == (True, i)
    out = tm.drain(1.0)
    assert [d.item for d in out] == list(range(10))
    assert out[0].time == 0.0, "an idle link starts sending at once"
    assert gaps(out) == pytest.approx([gap] * 9)
    assert [d.size for d in out] == [size] * 10


def test_mixed_sizes_leave_in_priority_order_each_after_the_one_before() -> None:
    """Shared port: the high class goes first; each packet starts when the previous one has been sent."""
    tm = TrafficManager(8, SHARED)
    tm.set_rate_bps(R, port=1)
    for i in range(3):
        tm.enqueue(1, 1, ("ack", i), 0.0, ACK)
    for i in range(3):
        tm.enqueue(1, 5, ("data", i), 0.0, DATA)
    out = tm.drain(1.0)
    assert [d.item for d in out] == [("data", 0), ("data", 1), ("data", 2), ("ack", 0), ("ack", 1), ("ack", 2)]
    d, a = 12_000 / R, 688 / R
    assert [d.time for d in out] == pytest.approx([0, d, 2 * d, 3 * d, 3 * d + a, 3 * d + 2 * a])


def test_a_high_packet_waits_for_the_low_one_on_the_wire() -> None:
    """No pre-emption: an ACK arriving while a data packet is being sent leaves when it is done, and the
    next data packet only 688/R after the ACK."""
    tm = TrafficManager(8, SHARED)
    tm.set_rate_bps(R, port=1)
    tm.enqueue(1, 1, "data0", 0.0, DATA)
    tm.enqueue(1, 1, "data1", 0.0, DATA)
    assert [d.item for d in tm.drain(0.0)] == ["data0"]
    tm.enqueue(1, 6, "ack", 0.0001, ACK)
    out = tm.drain(1.0)
    assert [(d.item, d.time) for d in out] == [("ack", pytest.approx(12_000 / R)), ("data1", pytest.approx(12_688 / R))]


def test_per_queue_mode_limits_each_queue_in_bytes_like_bmv2_does_in_packets() -> None:
    tm = TrafficManager(8, PER_QUEUE)
    tm.set_rate_bps(R, port=1)  # every priority queue of port 1 gets its own limiter at R
    for i, size in enumerate([DATA, ACK, DATA]):
        tm.enqueue(1, 1, ("low", i), 0.0, size)
        tm.enqueue(1, 6, ("high", i), 0.0, size)
    tm.set_rate_bps(1, 1, 1)  # as BMv2: departure times were fixed at enqueue
    out = tm.drain(1.0)
    low = [d.time for d in out if d.item[0] == "low"]
    high = [d.time for d in out if d.item[0] == "high"]
    assert low == high == pytest.approx([0, 12_000 / R, 12_688 / R]), "both queues at R, in parallel"


def test_queue_cap_in_bytes_inside_a_byte_port_rate() -> None:
    tm = TrafficManager(8, SHARED)
    tm.set_rate_bps(R, port=1)
    tm.set_rate_bps(R // 10, 1, 6)  # class 6 alone: a tenth of the link
    for i in range(2):
        tm.enqueue(1, 6, ("high", i), 0.0, DATA)
    for i in range(5):
        tm.enqueue(1, 1, ("low", i), 0.0, DATA)
    out = tm.drain(0.0095)
    assert [d.item for d in out] == [("high", 0)] + [("low", i) for i in range(5)], "low fills the link meanwhile"
    assert [d.time for d in out] == pytest.approx([i * 12_000 / R for i in range(6)])
    again = tm.drain(1.0)
    assert [(d.item, d.time) for d in again] == [(("high", 1), pytest.approx(10 * 12_000 / R))], "10x the gap"


def test_shared_mode_byte_rate_change_applies_at_once() -> None:
    tm = TrafficManager(8, SHARED)
    tm.set_rate_bps(8 * DATA, port=1)  # one data packet per second
    for i in range(5):
        tm.enqueue(1, 1, i, 0.0, DATA)
    assert len(tm.drain(0.5)) == 1
    tm.set_rate_bps(0, port=1)  # 0: unlimited
    assert len(tm.drain(0.5)) == 4


def test_packets_per_second_ignore_the_length() -> None:
    """The BMv2 unit, unchanged: an ACK costs a full slot."""
    for mode in (SHARED, PER_QUEUE):
        tm = TrafficManager(8, mode)
        tm.set_rate(10, port=1)
        for i, size in enumerate([DATA, ACK, ACK, DATA]):
            tm.enqueue(1, 2, i, 0.0, size)
        assert [d.time for d in tm.drain(1.0)] == pytest.approx([0.0, 0.1, 0.2, 0.3])


def test_the_last_rate_command_sets_the_unit() -> None:
    tm = TrafficManager(8, SHARED)
    tm.set_rate_bps(R)
    assert (tm.port(1).rate_pps, tm.port(1).rate_bps) == (0, R), "a new port takes the default in bit/s"
    tm.set_rate(100, port=1)
    assert (tm.port(1).rate_pps, tm.port(1).rate_bps) == (100, 0)
    tm.set_rate_bps(R, 1, 2)
    assert (tm.port(1).queues[2].rate_pps, tm.port(1).queues[2].rate_bps) == (0, R)
    tm.set_rate(5)
    assert (tm.default_rate, tm.default_rate_bps) == (5, 0)
    assert (tm.port(1).rate_pps, tm.port(1).rate_bps) == (5, 0)
    with pytest.raises(QueueConfigError):
        tm.set_rate_bps(-1)
    with pytest.raises(QueueConfigError):
        tm.set_rate_bps(R, 1, 8)


def test_byte_capacity_tail_drops_and_reports_byte_depths() -> None:
    tm = TrafficManager(8, SHARED)
    tm.set_rate_bps(R, port=1)
    tm.set_depth_bytes(2 * DATA + ACK, 1, 3)
    accepted = [tm.enqueue(1, 3, i, 0.0, s)[0] for i, s in enumerate([DATA, DATA, ACK, ACK, DATA])]
    assert accepted == [True, True, True, False, False], "queued bytes + the packet must fit"
    assert tm.depth(1, 3) == 3 and tm.depth_bytes(1, 3) == 2 * DATA + ACK
    assert tm.enqueue(1, 4, "other queue", 0.0, DATA)[0], "the capacity is per queue"
    out = [d for d in tm.drain(1.0) if d.priority == 3]
    assert [(d.enq_depth, d.deq_depth) for d in out] == [(0, 2), (1, 1), (2, 0)], "packets, as before"
    assert [(d.enq_bytes, d.deq_bytes) for d in out] == [(0, DATA + ACK), (DATA, ACK), (2 * DATA, 0)]
    assert tm.depth_bytes(1, 3) == 0


def test_the_packet_capacity_still_applies_beside_a_byte_capacity() -> None:
    tm = TrafficManager(8, SHARED, default_depth=2)
    tm.set_depth_bytes(1_000_000)
    assert tm.port(1).queues[0].capacity_bytes == 1_000_000, "new ports take the default byte capacity"
    assert [tm.enqueue(1, 0, i, 0.0, ACK)[0] for i in range(3)] == [True, True, False]
    tm.set_depth_bytes(0, 1)  # 0: no byte limit
    assert tm.port(1).queues[0].capacity_bytes == 0
    with pytest.raises(QueueConfigError):
        tm.set_depth_bytes(-1)


def test_virtual_switch_counts_the_frame_length() -> None:
    """Through the pipeline: 1500-byte data frames and 86-byte ACK frames of one job on a byte-rate port."""
    vs = VirtualSwitch(tm=TrafficManager(8, SHARED))
    install(vs.tables, [*host_routes(), job_priority(1, 1)])
    vs.tm.set_rate_bps(R, port=1)
    for i in range(4):
        vs.send(bytes(shim_packet(0, 1, job=1, seq=i, size=DATA)), 0, at=0.0)
    for i in range(4):
        ack = shim_packet(0, 1, job=1, msg_type=MsgType.ACK, seq=100 + i, size=ACK)
        vs.send(bytes(ack), 0, at=0.0)
    vs.run_all()
    assert [e.size for e in vs.emitted] == [DATA] * 4 + [ACK] * 4
    assert [len(e.decision.out) for e in vs.emitted] == [e.size for e in vs.emitted]
    assert gaps(vs.emitted) == pytest.approx([12_000 / R] * 4 + [688 / R] * 3)
    # the first frame found the link idle and left at once; the others queued behind the second
    assert [(e.decision.enq_depth, e.enq_bytes) for e in vs.emitted][:4] == [(0, 0), (0, 0), (1, DATA), (2, 2 * DATA)]
    assert [e.deq_bytes for e in vs.emitted][:3] == [0, 2 * DATA + 4 * ACK, DATA + 4 * ACK]


# ---- the admin commands --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "check"),
    [
        ("set_queue_rate_bps 1000000000", lambda tm: tm.default_rate_bps == 10**9 and tm.port(3).rate_bps == 10**9),
        ("set_queue_rate_bps 10000000 2", lambda tm: tm.port(2).rate_bps == 10**7 and tm.port(2).rate_pps == 0),
        (
            "set_queue_rate_bps 5000 2 5",
            lambda tm: tm.port(2).queues[5].rate_bps == 5000 and tm.port(2).rate_bps == 0,
        ),
        ("set_queue_rate_bps 0x10 1", lambda tm: tm.port(1).rate_bps == 16),
        ("set_queue_depth_bytes 30000", lambda tm: tm.port(9).queues[7].capacity_bytes == 30000),
        ("set_queue_depth_bytes 9000 1", lambda tm: all(q.capacity_bytes == 9000 for q in tm.port(1).queues)),
        (
            "set_queue_depth_bytes 4500 1 2",
            lambda tm: tm.port(1).queues[2].capacity_bytes == 4500 and tm.port(1).queues[3].capacity_bytes == 0,
        ),
    ],
)
def test_byte_commands(line, check) -> None:
    tm = TrafficManager(8, SHARED)
    assert execute(line, tm) == "OK"
    assert check(tm)


def test_byte_rate_in_per_queue_mode_sets_every_queue() -> None:
    tm = TrafficManager(8, PER_QUEUE)
    assert execute("set_queue_rate_bps 8000 4", tm) == "OK"
    assert [q.rate_bps for q in tm.port(4).queues] == [8000] * 8 and tm.port(4).rate_bps == 0


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("set_queue_rate_bps", "usage: set_queue_rate_bps <rate_bps>"),
        ("set_queue_rate_bps 1e9 1", "invalid rate_bps '1e9'"),
        ("set_queue_rate_bps 1 2 3 4", "usage"),
        ("set_queue_rate_bps 1 600", "egress_port 600 out of range"),
        ("set_queue_rate_bps 1 1 8", "priority 8 out of range"),
        ("set_queue_rate_bps -5", "must be >= 0"),
        ("set_queue_depth_bytes x", "invalid nb_bytes 'x'"),
        ("set_queue_depth_bytes -1 1", "must be >= 0"),
    ],
)
def test_bad_byte_commands_say_why(line: str, why: str) -> None:
    reply = execute(line, TrafficManager(8, SHARED))
    assert reply.startswith("Error: ") and why in reply, reply


def test_show_queues_names_the_units() -> None:
    tm = TrafficManager(8, SHARED)
    for line in ("set_queue_rate 500 1", "set_queue_rate_bps 100000000 2", "set_queue_depth_bytes 9000 2 1"):
        assert execute(line, tm) == "OK"
    lines = execute("show_queues", tm).split(" | ")
    assert lines[1].startswith("port 1 rate 500 queues 0:0/64@- "), "packets/s as simple_switch_CLI's unit"
    assert lines[2].startswith("port 2 rate 100000000bit/s queues 0:0/64@- 1:0/64+0/9000B@- "), lines[2]
    assert "set_queue_rate_bps" in execute("help", tm)


def test_byte_commands_over_the_admin_endpoint() -> None:
    with RefSwitchServer(SwitchOptions(grpc_addr="127.0.0.1:0", admin_port=0)) as sw:
        queues = RefSwitchAdminQueues(sw.admin_port)
        queues.set_rate_bps(10**8, 1)
        queues.set_depth_bytes(30_000, 1, 2)
        assert sw.tm.port(1).rate_bps == 10**8 and sw.tm.port(1).queues[2].capacity_bytes == 30_000
        assert "port 1 rate 100000000bit/s" in queues.run(["show_queues"])[0]
