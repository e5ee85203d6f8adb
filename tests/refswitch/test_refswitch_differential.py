"""Differential tests: BMv2 running the compiled mlfc.p4 against the reference model, packet by packet.

The same entries (the controller's ``TableEntry`` values) go to both: to BMv2 through SwitchConnection,
into the model through the committed P4Info and the reference switch's codec. The same frames go into BMv2 on
veths one at a time (so every queue is empty, as ``pipeline.process`` assumes), and for each frame the
egress port and the exact bytes out (which carry TTL, MACs, checksum and the ECN mark) must agree, as
must every counter and the congestion register afterwards. The priority class is made visible by a
probe entry in ``congestion_levels`` (every departing packet records a non-zero level at port x 8 +
class), read from BMv2 over Thrift. Timing is not compared (docs/refswitch.md).

Every disagreement is a bug in one of the two; the P4 bugs found so far are fixed in p4src/ and their tests
are plain expectations.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from refswitch_helpers import (
    HOST_IP,
    HOST_MAC,
    PORT_MASK,
    drop_entries,
    flow,
    host_routes,
    ip,
    job_priority,
    route,
    shim_packet,
    tcp_packet,
    truncated_shim,
)
from refswitch_net import wired
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import ARP, Ether

from mlfc import contract
from mlfc.controller.entries import Exact, Range, TableEntry, Ternary, entry
from mlfc.controller.sync import SwitchConnection
from mlfc.launch.switches import Bmv2Switch, RefSwitch
from mlfc.policy.drop import DropPolicy
from mlfc.refswitch import pipeline as pl
from mlfc.refswitch.p4info import COMMITTED_DEVICE_CONFIG
from mlfc.refswitch.packet import ones_complement_sum
from mlfc.refswitch.state import SwitchState
from mlfc.refswitch.tables import Tables as ModelTables
from mlfc.testing.refswitch import counter_snapshot, install, pipeline
from mlfc.wire import SHIM_LEN, SHIM_PORT_BASE, SHIM_VERSION, MlfcShim, MsgType

V = SHIM_VERSION

pytestmark = [
    pytest.mark.bmv2,
    pytest.mark.root,
    pytest.mark.skipif(not COMMITTED_DEVICE_CONFIG.is_file(), reason="p4src/build/mlfc.json missing: run `make p4`"),
]

QUIET = 0.12  # nothing out for this long after a frame the model drops: dropped (BMv2 forwards far faster)


class Rig:
    """BMv2 on three veths, loaded with mlfc.p4, plus the model with the same entries."""

    def __init__(self, bmv2: Bmv2Switch, conn: SwitchConnection, wire) -> None:
        self.bmv2, self.conn, self.wire = bmv2, conn, wire
        self.tables, self.state = ModelTables(), SwitchState()

    def reset(self, entries: list[TableEntry]) -> list[TableEntry]:
        """Fresh pipeline on BMv2 (zero counters and registers) and in the model, same entries."""
        self.conn.load_pipeline(force=True)
        self.tables, self.state = ModelTables(), SwitchState()
        self.wire.flush()
        first: dict[tuple, TableEntry] = {}
        for e in entries + host_routes():  # a drawn host route (its port's rate class) before the plain one
            first.setdefault(e.key, e)  # a later entry with the same key would be refused: skip it
        installed = list(first.values())
        self.conn.write_entries(installed)
        install(self.tables, installed)
        return installed

    def exchange(self, port: int, frame: bytes) -> tuple[pl.Decision, list[tuple[int, bytes]]]:
        expected = pl.process(frame, port, self.tables, self.state)
        self.wire.send(port, frame)
        return expected, self.wire.expect(0 if expected.dropped else 1, quiet=QUIET)

    def check(self, port: int, frame: bytes, *, classes: bool = False) -> None:
        """``classes``: also compare (and then clear) the congestion register, which the class probe
        fills: the (port, class) this packet took."""
        expected, got = self.exchange(port, frame)
        want = [] if expected.dropped else [(expected.egress_port, expected.out)]
        assert got == want, (
            f"in port {port}: {Ether(frame).summary()}\nmodel: {expected}\n"
            f"bmv2: {[(p, Ether(f).summary()) for p, f in got]}"
        )
        if classes:
            assert self.bmv2_levels(reset=True) == self.model_levels(reset=True), Ether(frame).summary()

    def bmv2_levels(self, *, reset: bool = False) -> dict[int, int]:
        """Non-zero cells of BMv2's congestion register (P4Runtime cannot read registers on BMv2)."""
        cmds = [f"register_read {contract.CONGESTION_LEVEL_REGISTER}"] + (
            [f"register_reset {contract.CONGESTION_LEVEL_REGISTER}"] if reset else []
        )
        line = next(s for s in self.bmv2.cli(*cmds).splitlines() if f"{contract.CONGESTION_LEVEL_REGISTER}=" in s)
        values = [int(v) for v in line.split("=", 1)[1].split(",")]
        return {i: v for i, v in enumerate(values) if v}

    def model_levels(self, *, reset: bool = False) -> dict[int, int]:
        levels = {i: v for i, v in enumerate(self.state.congestion_level) if v}
        if reset:
            self.state.congestion_level[:] = [0] * len(self.state.congestion_level)
        return levels

    def check_counters(self) -> None:
        """Compared on the unit the P4Info declares: BMv2 also reports bytes for packets-only counters."""
        got = counter_snapshot(self.conn)
        for name, spec in contract.COUNTERS.items():
            if spec.unit == "PACKETS":
                got[name] = {i: (pk, 0) for i, (pk, _) in got[name].items()}
        assert got == self.state.snapshot()
        assert self.bmv2_levels() == self.model_levels()


@pytest.fixture(scope="module")
def rig():
    with wired(3, "rdf") as (ports, wire):
        bmv2 = Bmv2Switch(name="rdf", ports=ports)
        with bmv2, SwitchConnection(bmv2.grpc_addr, pipeline=pipeline(), election_id=1) as conn:
            yield Rig(bmv2, conn, wire)


def probe_entries(level: int = 3) -> list[TableEntry]:
    """Class probe: every departing packet records ``level`` at congestion_level[port x 8 + class] (no
    drop threshold comes with it), so the classes packets took show in the register."""
    return [entry(contract.CONGESTION_LEVELS, {}, contract.SET_LEVEL, {"l": level}, priority=1)]


# ---- the PTF scenarios, packet by packet -----------------------------------------------------------

SCENARIO_ENTRIES = [
    route("10.1.0.0/16", 1, HOST_MAC[1]),
    route("10.1.2.0/24", 2, HOST_MAC[2]),
    flow(42, 2, src=HOST_IP[0], dst=HOST_IP[1], protocol=6, dst_port=5001),
    flow(7, 1, dst=HOST_IP[2]),
    job_priority(1, 1),
    job_priority(2, 5),
    job_priority(1, 6, iterations=(10, 20), priority=2),
    job_priority(3, 7),
    job_priority(42, 4),
]

SCENARIO_PACKETS = [
    (0, tcp_packet(0, 1, 1234, 80)),
    (1, tcp_packet(1, 2, 1234, 80)),
    (2, tcp_packet(2, 0, 1234, 80)),
    (0, Ether() / IP(src=HOST_IP[0], dst="10.1.9.9") / UDP(dport=9) / (b"y" * 40)),
    (0, Ether() / IP(src=HOST_IP[0], dst="10.1.2.3") / UDP(dport=9) / (b"y" * 40)),
    (0, Ether() / IP(src=HOST_IP[0], dst="10.9.9.9") / UDP() / (b"x" * 40)),
    (0, Ether() / IP(src=HOST_IP[0], dst=HOST_IP[1], ttl=1) / UDP() / b"x"),
    (0, Ether(dst="ff:ff:ff:ff:ff:ff") / ARP(pdst=HOST_IP[1])),
    *[(0, shim_packet(0, 1, job=21, seq=i, size=150 + i)) for i in range(3)],
    *[(0, tcp_packet(0, 1, 40000 + i, 5001, size=300)) for i in range(2)],
    (0, tcp_packet(0, 2, 1000, 80)),
    (0, shim_packet(0, 1, job=60000)),
    (0, shim_packet(0, 1, job=5, version=1)),
    (0, shim_packet(0, 1, job=5, msg_type=9)),
    (0, shim_packet(0, 1, job=1, iteration=15)),
    (0, shim_packet(0, 1, job=1, iteration=21)),
    (0, shim_packet(0, 1, job=2)),
    (0, shim_packet(0, 1, job=3)),
    (0, shim_packet(0, 1, job=2, msg_type=MsgType.ACK, payload=b"\x00" * 4)),
    (0, shim_packet(0, 1, job=2, msg_type=MsgType.CNP)),
    (0, shim_packet(0, 1, job=2, ecn=1)),
    (0, shim_packet(0, 1, job=2, ecn=3)),
]


def test_ptf_scenarios_agree(rig):
    rig.reset(SCENARIO_ENTRIES + probe_entries())
    for port, pkt in SCENARIO_PACKETS:
        rig.check(port, bytes(pkt), classes=True)
    rig.check_counters()


def test_selective_drop_and_ecn_agree(rig):
    """Deterministic on an idle switch: egress records the level of the range holding depth 0, and the
    ECN entry covering depth 0 marks nothing there (both skip an empty queue's lookup)."""
    policy = DropPolicy(level_depths=(4, 8, 12), min_importance=(0, 2, 4, 8))
    level_at_zero = entry(
        contract.CONGESTION_LEVELS,
        {contract.DEQ_QDEPTH: Range(0, 3)},
        contract.SET_LEVEL,
        {"l": 2},
        5,
    )
    always = entry(
        contract.ECN_PROFILE,
        {contract.EGRESS_PORT: Ternary(2, PORT_MASK), contract.ENQ_QDEPTH: Range(0, 9)},
        contract.MARK_ALWAYS,
        priority=3,
    )
    rig.reset([*drop_entries(policy), level_at_zero, always])
    for imp in range(16):
        rig.check(0, bytes(shim_packet(0, 1, job=1, importance=imp, seq=imp)))
        rig.check(0, bytes(shim_packet(0, 2, job=4, importance=imp, seq=imp)))
    rig.check(0, bytes(shim_packet(0, 1, job=1, msg_type=MsgType.CNP)))
    rig.check(0, bytes(tcp_packet(0, 1, 1, 2, ecn=2)))
    rig.check_counters()


# ---- formerly known disagreements (P4 bugs, fixed in p4src/): plain expectations now ------------------


def test_bad_ipv4_checksum(rig):
    """Dropped in ingress before any counter (docs/dataplane.md: verified on input)."""
    rig.reset([])
    frame = bytearray(bytes(tcp_packet(0, 1, 1, 2)))
    frame[24] ^= 0x5A
    rig.check(0, bytes(frame))
    rig.check_counters()


@pytest.mark.parametrize("length", [0, 5, 16, SHIM_LEN])
def test_bad_ipv4_checksum_with_a_shim_cut_short(rig, length):
    """The checksum is verified even when the parser stopped with an error further on."""
    rig.reset([])
    frame = bytearray(bytes(truncated_shim(0, 1, length)))
    frame[24] ^= 0x5A
    rig.check(0, bytes(frame))
    rig.check_counters()


@pytest.mark.parametrize("ihl_options", [b"\x01\x01\x01\x00", b"\x00" * 40])
def test_ipv4_options_are_dropped(rig, ihl_options):
    rig.reset([])
    rig.check(0, bytes(Ether() / IP(src=HOST_IP[0], dst=HOST_IP[1], options=ihl_options) / UDP() / (b"z" * 30)))
    rig.check_counters()


def test_ihl_below_five_is_dropped(rig):
    rig.reset([])
    frame = bytearray(bytes(tcp_packet(0, 1, 1, 2)))
    frame[14] = 0x44
    frame[24:26] = b"\x00\x00"
    frame[24:26] = (0xFFFF ^ ones_complement_sum(bytes(frame[14:34]))).to_bytes(2, "big")
    rig.check(0, bytes(frame))
    rig.check_counters()


@pytest.mark.parametrize("length", [0, 1, 8, 15, SHIM_LEN - 1])
def test_truncated_shims_are_counted_and_never_classified(rig, length):
    rig.reset([flow(9, dst=HOST_IP[1], protocol=17), job_priority(9, 6), *probe_entries()])
    pkt = truncated_shim(2, 1, length)  # the class probe tells class 6 (job 9) from the default class 1
    rig.check(2, bytes(Ether(bytes(pkt))))
    rig.check_counters()


def test_short_payload_with_a_bad_first_byte(rig):
    rig.reset([])
    rig.check(0, bytes(truncated_shim(0, 1, 5, first=0x30)))
    rig.check_counters()


@pytest.mark.parametrize("first", [V << 4, (V << 4) | 2, 0x30, 0x10, 0x00])
@pytest.mark.parametrize("length", [0, 5, 15, SHIM_LEN - 1])
def test_padded_short_frames_are_truncated_by_the_udp_length(rig, first, length):
    """Padded to 60 bytes as real Ethernet does: the UDP length, not the frame, says truncated."""
    rig.reset(
        [
            flow(9, dst=HOST_IP[1], protocol=17),
            job_priority(9, 6),
            job_priority(0x1010, 6),
            *probe_entries(),
        ]
    )
    pkt = truncated_shim(2, 1, length, first=first)
    rig.check(2, bytes(pkt).ljust(60, b"\x10"))
    rig.check_counters()


@pytest.mark.parametrize(
    ("first", "length", "udp_len"),
    [
        (V << 4, SHIM_LEN, 8 + SHIM_LEN - 1),
        (V << 4, 16, 8 + 16),  # a version-1-sized shim: short of this version's
        (V << 4, 40, 8),
        (V << 4, 40, 0),  # whole shim in the frame, UDP length too short
        (V << 4, 5, 8 + SHIM_LEN),
        (0x30, 5, 8 + SHIM_LEN),
        (0x30, 5, 200),  # frame ends inside the shim, UDP length claims more
        (V << 4, 0, 100),  # nothing after the UDP header
    ],
)
def test_udp_length_and_frame_length_disagree(rig, first, length, udp_len):
    rig.reset([flow(9, dst=HOST_IP[1], protocol=17), job_priority(0x1010, 6), *probe_entries()])
    frame = bytearray(bytes(truncated_shim(0, 1, length, first=first)))
    frame[38:40] = udp_len.to_bytes(2, "big")
    frame[24:26] = b"\x00\x00"
    frame[24:26] = (0xFFFF ^ ones_complement_sum(bytes(frame[14:34]))).to_bytes(2, "big")
    rig.check(0, bytes(frame))
    rig.check_counters()


# ---- generated entries and packet sequences ------------------------------------------------------------

ADDRS = [HOST_IP[0], HOST_IP[1], HOST_IP[2], "10.1.2.3", "10.200.0.1"]


def _ternary(draw, width: int, values: list[int]) -> Ternary | None:
    if draw(st.booleans()):
        return None
    value = draw(st.sampled_from(values))
    mask = draw(st.sampled_from([(1 << width) - 1, ((1 << width) - 1) ^ 1, 1 << (width - 1)]))
    return Ternary(value & mask, mask)


def _range(draw, hi_max: int) -> Range | None:
    if draw(st.booleans()):
        return None
    lo = draw(st.integers(0, min(20, hi_max)))
    hi = draw(st.integers(lo, min(hi_max, lo + 40)))
    return None if (lo, hi) == (0, hi_max) else Range(lo, hi)


@st.composite
def entry_sets(draw) -> list[TableEntry]:
    out: list[TableEntry] = []
    prios = iter(range(1000, 1, -7))  # unique priorities: ties are target-defined
    for _ in range(draw(st.integers(0, 3))):
        m = {
            k: t
            for k, t in {
                contract.IPV4_SRC: _ternary(draw, 32, [ip(a) for a in ADDRS]),
                contract.IP_PROTOCOL: _ternary(draw, 8, [6, 17]),
                contract.L4_DST_PORT: _ternary(draw, 16, [80, SHIM_PORT_BASE + 1, 5001]),
            }.items()
            if t is not None
        }
        out.append(
            entry(contract.FLOWS, m, contract.SET_JOB, {"job_id": draw(st.sampled_from([1, 2, 5000]))}, next(prios))
        )
    for _ in range(draw(st.integers(0, 4))):
        m = {
            k: v
            for k, v in {
                contract.JOB_ID: _ternary(draw, contract.JOB_ID_BITS, [0, 1, 2, 5000]),
                contract.ITERATION: _range(draw, contract.MAX_ITERATION),
                contract.PROGRESS: _range(draw, (1 << contract.PROGRESS_BITS) - 1),
            }.items()
            if v is not None
        }
        klass = draw(st.sampled_from([0, 1, 5, 6, 7, 7]))
        out.append(entry(contract.JOB_PRIORITY, m, contract.SET_PRIORITY, {"priority": klass}, next(prios)))
    for level in range(4):
        if draw(st.booleans()):
            m = {contract.LEVEL: Exact(level)}
            importance = draw(st.integers(0, 15))
            out.append(entry(contract.DROP_THRESHOLD, m, contract.SET_MIN_IMPORTANCE, {"importance": importance}, 0))
    for _ in range(draw(st.integers(0, 2))):
        m = {contract.DEQ_QDEPTH: Range(0, draw(st.integers(0, 30)))}
        out.append(
            entry(contract.CONGESTION_LEVELS, m, contract.SET_LEVEL, {"l": draw(st.integers(0, 3))}, next(prios))
        )
    for _ in range(draw(st.integers(0, 3))):
        m = {
            k: v
            for k, v in {
                contract.EGRESS_PORT: _ternary(draw, contract.PORT_BITS, [0, 1, 2]),
                contract.ENQ_QDEPTH: _range(draw, contract.MAX_QDEPTH),
            }.items()
            if v is not None
        }
        action = draw(st.sampled_from([contract.MARK_ALWAYS, contract.NO_MARK, contract.MARK_WITH_PROBABILITY]))
        params = {"threshold": 0} if action == contract.MARK_WITH_PROBABILITY else {}  # 0: deterministic (never)
        out.append(entry(contract.ECN_PROFILE, m, action, params, next(prios)))
    for port in range(3):  # the host route through the port with the port's rate class (the telemetry's)
        if draw(st.booleans()):
            klass = draw(st.integers(0, contract.MAX_RATE_CLASS))
            out.append(route(f"{HOST_IP[port]}/32", port, HOST_MAC[port], rate_class=klass))
    if draw(st.booleans()):
        port = draw(st.sampled_from([0, 1, 2, contract.V1MODEL_DROP_PORT]))
        out.append(route("10.1.0.0/16", port, HOST_MAC[1], rate_class=draw(st.integers(0, contract.MAX_RATE_CLASS))))
    return out + probe_entries(draw(st.sampled_from([1, 2, 3])))


@st.composite
def frames(draw) -> tuple[int, bytes]:
    port = draw(st.integers(0, 2))
    dst = draw(st.sampled_from(ADDRS))
    kind = draw(st.sampled_from(["shim", "shim", "ctrl", "bad", "short", "tcp", "udp"]))
    ecn, ttl = draw(st.sampled_from([0, 1, 2, 2, 2, 3])), draw(st.sampled_from([1, 2, 64, 64]))
    ip_hdr = IP(src=HOST_IP[port], dst=dst, ttl=ttl, tos=ecn | draw(st.sampled_from([0, 0x28])))
    base = Ether(src=HOST_MAC[port], dst="00:aa:bb:00:00:01") / ip_hdr
    if kind in ("shim", "ctrl", "bad"):
        msg = MsgType.DATA if kind == "shim" else draw(st.sampled_from([MsgType.ACK, MsgType.CNP]))
        version = V if kind != "bad" else draw(st.sampled_from([0, 1, 15]))
        shim = MlfcShim(
            version=version,
            msg_type=msg if kind != "bad" else draw(st.integers(0, 15)),
            job_id=draw(st.sampled_from([0, 1, 2, 3, 5000])),
            iteration=draw(st.integers(0, 40)),
            importance=draw(st.integers(0, 15)),
            progress=draw(st.integers(0, 15)),
            # telemetry already on board: a hop writes its own only when at least as deep (max along the path)
            rate_class=draw(st.integers(0, 255)),
            queue_bytes=draw(st.sampled_from([0, 0, 1, 1500, 1 << 31])),
        )
        # with and without a UDP checksum: a hop that writes the telemetry updates a non-zero one
        chksum = draw(st.sampled_from([0, None]))
        dport = SHIM_PORT_BASE + draw(st.integers(0, 255))
        pkt = base / UDP(sport=SHIM_PORT_BASE + 2, dport=dport, chksum=chksum) / shim
        pkt = pkt / (b"\x00" * draw(st.integers(0, 60)))
    elif kind == "short":
        # a shim cut short, sometimes padded to Ethernet's minimum as real links do
        payload = bytes([draw(st.sampled_from([V << 4, (V << 4) | 1, (V << 4) | 2, 0x10, (V << 4) | 3]))])
        payload += b"\x10" * (SHIM_LEN - 1)
        pkt = (
            base
            / UDP(sport=1000, dport=SHIM_PORT_BASE + draw(st.integers(0, 255)), chksum=0)
            / (payload[: draw(st.integers(0, SHIM_LEN - 1))])
        )
        if draw(st.booleans()):
            return port, bytes(pkt).ljust(60, b"\x00")
    elif kind == "tcp":
        pkt = (
            base
            / TCP(sport=draw(st.sampled_from([1000, 40000])), dport=draw(st.sampled_from([80, 5001])))
            / (b"t" * 20)
        )
    else:
        pkt = (
            base
            / UDP(sport=draw(st.sampled_from([53, 5001])), dport=draw(st.sampled_from([80, 5001, 4791])))
            / (b"u" * draw(st.integers(0, 50)))
        )
    return port, bytes(pkt)


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(entries=entry_sets(), sequence=st.lists(frames(), min_size=1, max_size=8))
def test_generated_sequences_agree(rig, entries, sequence):
    rig.reset(entries)
    for port, frame in sequence:
        rig.check(port, frame)
    rig.check_counters()


# ---- queueing, like with like: BMv2 vs the reference switch in per-queue (BMv2) mode -----------------------


def _run_two_classes(cli, conn: SwitchConnection, wire, rate_cmds: list[str]) -> list[int]:
    conn.load_pipeline(force=True)
    conn.write_entries([*host_routes(), job_priority(1, 1), job_priority(2, 5)])
    cli(*rate_cmds)
    wire.flush()
    # Built before sending, so the 20 frames arrive as one burst however slow this machine is.
    burst = [bytes(shim_packet(0, 1, job=job, seq=i)) for job in (1, 2) for i in range(10)]
    for frame in burst:
        wire.send(0, frame)
    return [Ether(f)[MlfcShim].job_id for _, f in wire.expect(len(burst), within=20)]


def test_equal_rates_interleave_on_bmv2_and_in_per_queue_mode_but_starve_when_shared(rig):
    rates = ["set_queue_rate 20 1 1", "set_queue_rate 20 1 5"]
    bmv2 = _run_two_classes(rig.bmv2.cli, rig.conn, rig.wire, rates)
    rig.bmv2.cli("set_queue_rate 0 1 1", "set_queue_rate 0 1 5")
    results = {}
    for mode in ("per-queue", "shared"):
        with (
            wired(3, "rdq") as (ports, wire),
            RefSwitch(name="rdq", ports=ports, queue_mode=mode) as sw,
            SwitchConnection(sw.grpc_addr, pipeline=pipeline(), election_id=1) as conn,
        ):
            cmds = rates if mode == "per-queue" else ["set_queue_rate 20 1"]
            results[mode] = _run_two_classes(sw.cli, conn, wire, cmds)
    for name, order in (("bmv2", bmv2), ("per-queue", results["per-queue"])):
        assert len(order) == 20, (name, order)
        first_half = order[:10]
        assert 3 <= first_half.count(2) <= 7, f"{name}: two classes at equal per-queue rates interleave: {order}"
    shared = results["shared"]
    assert len(shared) == 20
    assert shared[1:11] == [2] * 10, f"shared port rate: the high class goes first, entirely: {shared}"
