"""The phantom-queue ECN marker (mlfc.hosts.kernel.marker): the program's arithmetic on crafted frames
(BPF_PROG_TEST_RUN), then the attached marker on a veth pair shaped by htb: CE on ECT packets only, when
the offered load exceeds the rate, counted per source, with checksums the receiver accepts.

Needs root, kernel BTF, clang, libbpf-dev and bpftool; each test that needs them skips with the missing
piece named."""

from __future__ import annotations

import json
import os
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from mlfc.hosts.kernel import KernelMltcpError, build, cli, libbpf, marker
from mlfc.testing.netns import NetnsLab, in_netns


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root (BPF, network namespaces)"
    if not build.BTF_PATH.exists():
        return f"{build.BTF_PATH} missing: kernel without BTF"
    try:
        build.find_toolchain()
        libbpf.lib()
    except KernelMltcpError as exc:
        return str(exc)
    return None


needs_kernel = pytest.mark.skipif(bool(_missing()), reason=f"[kernel] {_missing()}")
NOT_ECT, ECT1, ECT0, CE = 0, 1, 2, 3


# ---- no kernel needed ---------------------------------------------------------------------------


def test_config_encodes_step_as_red_with_kmin_equal_kmax():
    step = marker.MarkerConfig(50_000_000, 30_000, 300_000)
    assert step.thresholds == (30_000, 30_000, 1 << 32)
    assert marker.MarkerConfig.decode(step.encode()) == step
    red = marker.MarkerConfig(50_000_000, 10_000, 300_000, "red", 100_000, 0.25)
    assert red.thresholds == (10_000, 100_000, 1 << 30)
    assert marker.MarkerConfig.decode(red.encode()) == red


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"mode": "fifo"}, "mode"),
        ({"k_bytes": 400_000}, "threshold"),
        ({"limit_bytes": 1 << 32}, "limit"),
        ({"rate_bps": 0}, "rate"),
        ({"mode": "red"}, "kmax"),
        ({"mode": "red", "kmax_bytes": 50_000, "pmax": 1.5}, "pmax"),
    ],
)
def test_bad_config_is_refused(kwargs, match):
    args = {"rate_bps": 50_000_000, "k_bytes": 30_000, "limit_bytes": 300_000} | kwargs
    with pytest.raises(KernelMltcpError, match=match):
        marker.MarkerConfig(**args)


def test_attach_needs_root(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(KernelMltcpError, match="root"):
        marker.attach("root", "lo", 50e6, 30_000, 300_000)


# ---- the program on crafted frames --------------------------------------------------------------


def _v4(src: str, ecn: int, size: int = 1000) -> bytes:
    head = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src=src, dst="10.99.0.9", tos=0x20 | ecn)
    pkt = head / UDP(sport=4000, dport=5000)
    return bytes(pkt / (b"x" * (size - len(pkt))))


def _v6(src: str, ecn: int, size: int = 1000) -> bytes:
    head = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IPv6(src=src, dst="fd00::9", tc=0x20 | ecn,
                                                                          fl=0xABCDE)  # fmt: skip
    pkt = head / UDP(sport=4000, dport=5000)
    return bytes(pkt / (b"x" * (size - len(pkt))))


def _ip_checksum_ok(frame: bytes) -> bool:
    ihl = (frame[14] & 0xF) * 4
    words = struct.unpack(f"!{ihl // 2}H", frame[14 : 14 + ihl])
    total = sum(words)
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total == 0xFFFF


class Loaded:
    """An ecn_marker object loaded (not attached) with a config, run on frames with BPF_PROG_TEST_RUN."""

    def __init__(self, cfg: marker.MarkerConfig) -> None:
        build.ensure_built()
        self.obj = libbpf.BpfObject(str(build.object_path(marker.OBJECT)))
        self.obj.load()
        self.fds = {n: self.obj.map_fd(n) for n in ("ecn_config", "ecn_state", "ecn_sources")}
        libbpf.map_update(self.fds["ecn_config"], struct.pack("<I", 0), cfg.encode())
        self.prog = self.obj.prog_fd(marker.PROGRAM)

    def run(self, frame: bytes) -> bytes:
        verdict, out = libbpf.prog_test_run_skb(self.prog, frame)
        assert verdict == 0  # TC_ACT_OK: the marker never drops
        assert len(out) == len(frame)
        return out

    def stats(self) -> marker.MarkerStats:
        return marker.read_stats(self.fds)


@pytest.fixture
def loaded() -> Iterator[type[Loaded]]:
    reason = _missing()
    if reason:
        pytest.skip(f"[kernel] {reason}")
    made: list[Loaded] = []

    def make(cfg: marker.MarkerConfig) -> Loaded:
        made.append(Loaded(cfg))
        return made[-1]

    yield make  # type: ignore[misc]
    for m in made:
        m.obj.close()


def test_step_marks_ect_above_k_fixes_the_checksum_and_caps_at_the_limit(loaded):
    # 1000 bit/s drains 0.125 B/ms: the virtual queue only grows during the test (margins of 500 B).
    m = loaded(marker.MarkerConfig(1000, 3500, 8000))
    seq = [  # (frame, marked?) with the queue each joins
        (_v4("10.0.0.1", ECT0), False),  # 0
        (_v4("10.0.0.2", NOT_ECT), False),  # 1000
        (_v4("10.0.0.1", ECT1), False),  # 2000
        (_v4("10.0.0.1", CE), False),  # 3000: CE already, counted as such
        (_v4("10.0.0.2", NOT_ECT), False),  # 4000 > K, but not ECT
        (_v4("10.0.0.1", ECT0), True),  # 5000
        (_v6("fd00::1", ECT0), True),  # 6000
        (_v4("10.0.0.3", ECT1), True),  # 7000, fills the 8000 B limit
        (_v4("10.0.0.1", ECT0), False),  # would overflow the real queue: dropped there, not counted here
    ]
    for frame, want in seq:
        out = m.run(frame)
        if frame[12:14] == b"\x08\x00":
            assert _ip_checksum_ok(out)
            assert out[15] == (frame[15] | CE if want else frame[15])
            assert out[:15] + out[16:24] + out[26:] == frame[:15] + frame[16:24] + frame[26:]  # only tos, csum
        else:
            tc_ecn = (out[15] >> 4) & 3
            assert tc_ecn == (CE if want else frame[15] >> 4 & 3)
            assert out[15] & 0xF == frame[15] & 0xF and out[16:] == frame[16:]  # flow label, addresses intact
    s = m.stats()
    assert (s.seen, s.bytes, s.ect, s.marked, s.ce, s.overflow) == (9, 9000, 6, 3, 1, 1)
    assert s.overflow_bytes == 1000
    assert 7990 <= s.max_vq_bytes <= 8000 and 7990 <= s.vq_bytes <= 8000
    assert s.marks_by_source == {"10.0.0.1": 1, "10.0.0.2": 0, "10.0.0.3": 1, "fd00::1": 1}
    assert s.packets_by_source == {"10.0.0.1": 5, "10.0.0.2": 2, "10.0.0.3": 1, "fd00::1": 1}


def test_queue_drains_at_the_rate(loaded):
    rate = 800_000  # 100 B/ms
    m = loaded(marker.MarkerConfig(rate, 3000, 100_000))
    t0 = time.monotonic_ns()
    m.run(_v4("10.0.0.1", ECT0))
    t1 = time.monotonic_ns()
    time.sleep(0.004)
    t2 = time.monotonic_ns()
    m.run(_v4("10.0.0.1", ECT0))
    t3 = time.monotonic_ns()
    # vq = max(0, 1000 - R * dt) + 1000, dt between the two runs (bpf_ktime_get_ns is CLOCK_MONOTONIC)
    vq = m.stats().vq_bytes
    assert 2000 - rate * (t3 - t0) / 8e9 - 1e-6 <= vq <= 2000 - rate * (t2 - t1) / 8e9 + 1e-6
    assert vq < 1700  # it did drain (about 400 B in 4 ms)
    time.sleep(0.1)  # drains 10 kB: empty
    m.run(_v4("10.0.0.1", ECT0))
    assert m.stats().vq_bytes == 1000.0 and m.stats().marked == 0


def test_red_marks_with_the_profile_probability(loaded):
    # kmin 0, kmax 400 kB, pmax 1, a queue that does not drain (1 bit/s): the i-th 100-byte packet joins
    # i * 100 B and is marked with probability i / 4000; 2000 packets: 499.75 marks expected (sd ~18).
    m = loaded(marker.MarkerConfig(1, 0, 400_000, "red", 400_000, 1.0))
    frame = _v4("10.0.0.1", ECT0, size=100)
    marked = sum(m.run(frame)[15] & 3 == CE for _ in range(2000))
    assert 400 <= marked <= 600
    assert m.stats().marked == marked


# ---- attached on a veth pair through htb --------------------------------------------------------

RATE = 50_000_000
K = 30_000
LIMIT = 2_000_000  # above what the senders' socket buffers can queue: nothing is dropped, so every
# mark reaches the receiver and the marker's counts must equal what the receiver saw


@pytest.fixture
def shaped() -> Iterator[tuple[NetnsLab, str, str, str]]:
    reason = _missing()
    if reason:
        pytest.skip(f"[kernel] {reason}")
    with NetnsLab("mk") as lab:
        a, b = lab.namespace("a"), lab.namespace("b")
        dev, peer = lab.link(a, "10.82.1.1", b, "10.82.1.2")
        for addr in ("10.82.1.3", "10.82.1.4"):
            lab.run_in(a, "ip", "addr", "add", f"{addr}/24", "dev", dev)
        for ns, d in ((a, dev), (b, peer)):
            lab.run_in(ns, "ethtool", "-K", d, "tso", "off", "gso", "off", "gro", "off")
            lab.run_in(ns, "sysctl", "-qw", "net.ipv4.tcp_ecn=1")
        lab.tc(a, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1")
        lab.tc(a, "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", f"{RATE}bit",
               "ceil", f"{RATE}bit")  # fmt: skip
        lab.tc(a, "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "bfifo", "limit", str(LIMIT))
        yield lab, a, b, dev


class Receiver:
    """A UDP socket in namespace ``ns`` counting packets and CE marks (IP_RECVTOS) on a thread."""

    def __init__(self, ns: str, port: int) -> None:
        def make() -> socket.socket:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)  # SO_RCVBUFFORCE
            s.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
            s.bind(("10.82.1.2", port))
            s.settimeout(0.5)
            return s

        self.sock = in_netns(ns, make)
        self.packets = self.ce = self.ect = 0
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            try:
                _, anc, _, _ = self.sock.recvmsg(2048, socket.CMSG_SPACE(1))
            except (TimeoutError, OSError):
                return
            tos = next((d[0] for lvl, typ, d in anc if lvl == socket.IPPROTO_IP and typ == socket.IP_TOS), 0)
            self.packets += 1
            self.ce += tos & 3 == CE
            self.ect += tos & 3 in (ECT0, ECT1)

    def wait(self) -> None:
        self.thread.join(10)
        self.sock.close()


def _send(ns: str, src: str, port: int, tos: int, seconds: float, gap: float = 0.0) -> int:
    """UDP datagrams of 1400 B from ``src`` with ``tos`` for ``seconds``: back to back (blocking when the
    socket buffer is full, as the shaper drains it), or one per ``gap`` seconds; returns how many."""

    def make() -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
        s.bind((src, 0))
        return s

    s = in_netns(ns, make)
    payload, n = b"d" * 1400, 0
    end = time.monotonic() + seconds
    with s:
        while time.monotonic() < end:
            s.sendto(payload, ("10.82.1.2", port))
            n += 1
            if gap:
                time.sleep(gap)
    return n


@needs_kernel
def test_marks_ect_traffic_above_the_rate_per_source_and_never_below(shaped):
    lab, a, b, dev = shaped
    with marker.attach(a, dev, RATE, K, LIMIT) as m:
        assert "clsact" in lab.run_in(a, "tc", "qdisc", "show", "dev", dev).stdout
        assert f"id {m.prog_id}" in lab.run_in(a, "tc", "filter", "show", "dev", dev, "egress").stdout

        # Well below the rate: 10 Mbit/s of ECT(0), one datagram at a time: the queue never reaches K.
        rx = Receiver(b, 6000)
        sent = _send(a, "10.82.1.1", 6000, ECT0, 0.5, gap=0.0011)
        rx.wait()
        s = m.stats()
        assert rx.packets == sent > 100 and s.marked == 0 and rx.ce == 0 and s.max_vq_bytes < K

        # Above the rate: three senders at once, back to back: ECT(0) from .1, ECT(1) from .3, not-ECT from .4.
        flows = {"10.82.1.1": (6001, ECT0), "10.82.1.3": (6002, ECT1), "10.82.1.4": (6003, NOT_ECT)}
        rxs = {src: Receiver(b, port) for src, (port, _) in flows.items()}
        sent_by: dict[str, int] = {}
        threads = [threading.Thread(target=lambda src=src, port=port, tos=tos: sent_by.__setitem__(
            src, _send(a, src, port, tos, 0.6))) for src, (port, tos) in flows.items()]  # fmt: skip
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for r in rxs.values():
            r.wait()
        after = m.stats()

    assert after.overflow == 0  # nothing the real queue would drop (the socket buffers hold the rest)
    assert after.max_vq_bytes > K
    for src, r in rxs.items():
        # every datagram arrived: a mark with a bad IP checksum would have been dropped by the receiver
        assert r.packets == sent_by[src], src
    # CE only on ECT traffic, and each source's marks are exactly the CE its receiver saw
    assert rxs["10.82.1.4"].ce == 0 and after.marks_by_source.get("10.82.1.4", 0) == 0
    for src in ("10.82.1.1", "10.82.1.3"):
        assert rxs[src].ce > 0, src
        assert after.marks_by_source[src] == rxs[src].ce, src
    assert after.marked == sum(after.marks_by_source.values()) == rxs["10.82.1.1"].ce + rxs["10.82.1.3"].ce
    # Detached: the filter and the clsact qdisc it created are gone.
    assert "clsact" not in lab.run_in(a, "tc", "qdisc", "show", "dev", dev).stdout


def _tcp_info(sock: socket.socket) -> bytes:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232)


@needs_kernel
def test_tcp_with_ecn_gets_marks_and_echoes_them(shaped):
    _, a, b, dev = shaped
    srv = in_netns(b, lambda: socket.create_server(("10.82.1.2", 6100)))
    got = []

    def serve() -> None:
        conn, _ = srv.accept()
        with conn:
            n = 0
            while chunk := conn.recv(1 << 16):
                n += len(chunk)
            got.append(n)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    with marker.attach(a, dev, RATE, K, LIMIT) as m:
        cli = in_netns(a, lambda: socket.create_connection(("10.82.1.2", 6100)))
        payload = b"t" * (1 << 16)
        end, sent = time.monotonic() + 1.0, 0
        while time.monotonic() < end:
            cli.sendall(payload)
            sent += len(payload)
        info = _tcp_info(cli)
        cli.close()
        t.join(10)
        srv.close()
        s = m.stats()
    assert got == [sent]
    assert info[5] & 8  # TCPI_OPT_ECN: negotiated
    delivered_ce = struct.unpack_from("<I", info, 196)[0]  # tcpi_delivered_ce: the sender heard ECE
    assert s.marks_by_source.get("10.82.1.1", 0) > 0 and delivered_ce > 0


@needs_kernel
def test_find_reaches_an_attached_marker_and_one_marker_per_device(shaped):
    lab, a, _, dev = shaped
    m = marker.attach(a, dev, RATE, K, 300_000, "red", kmax_bytes=100_000, pmax=0.5)
    try:
        with pytest.raises(KernelMltcpError, match="has a marker already"):
            marker.attach(a, dev, RATE, K, 300_000)
        found = marker.find(a, dev)
        assert found is not None and found.prog_id == m.prog_id
        assert found.config() == marker.MarkerConfig(RATE, K, 300_000, "red", 100_000, 0.5)
        in_netns(a, lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("10.82.1.2", 9)))
        assert found.stats().seen == m.stats().seen >= 1
        found.detach()  # as another process would after attach's has exited: the filter and its clsact go
        assert marker.find(a, dev) is None
        assert "clsact" not in lab.run_in(a, "tc", "qdisc", "show", "dev", dev).stdout
    finally:
        m.detach()  # nothing left to remove: quiet
    # A clsact that was there before stays, with its other filters.
    lab.tc(a, "qdisc", "add", "dev", dev, "clsact")
    lab.tc(a, "filter", "add", "dev", dev, "egress", "pref", "1", "protocol", "all", "u32", "match", "u32", "0", "0",
           "flowid", "1:1")  # fmt: skip
    with marker.attach(a, dev, RATE, K, LIMIT):
        pass
    assert "u32" in lab.run_in(a, "tc", "filter", "show", "dev", dev, "egress").stdout
    with pytest.raises(KernelMltcpError, match="no device"):
        marker.attach(a, "nosuchdev", RATE, K, LIMIT)


@needs_kernel
def test_cli_attach_stats_detach_across_invocations(shaped, capsys):
    lab, a, _, dev = shaped
    where = ["--netns", a, "--dev", dev]
    assert cli.main(["marker", "attach", *where, "--rate", "50e6", "--k", "30000", "--limit", "300000"]) == 0
    assert "CE above 30000 B of a 300000 B queue drained at 5e+07 bit/s" in capsys.readouterr().out
    in_netns(a, lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("10.82.1.2", 9)))
    assert cli.main(["marker", "stats", *where, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["config"]["k_bytes"] == 30_000 and out["stats"]["packets_by_source"]["10.82.1.1"] >= 1
    assert cli.main(["marker", "detach", *where]) == 0
    assert "clsact" not in lab.run_in(a, "tc", "qdisc", "show", "dev", dev).stdout
    assert cli.main(["marker", "stats", *where]) == 1
    assert "no marker" in capsys.readouterr().err
