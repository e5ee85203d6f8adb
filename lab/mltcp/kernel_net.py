"""The kernel lab's network and jobs (``make kernel-mltcp``, mlfc.lab.mltcp.kernel): root only.

Network: one namespace per worker (``w1`` .. ``w8``), a router namespace and a server namespace;
every worker's traffic to the server crosses the router's egress veth toward the server, shaped by
``htb`` (rate R) over a ``bfifo`` of B bytes: the shared bottleneck. Offloads are off so the queue
holds MTU-sized packets; ``tcp_no_metrics_save=1`` in every worker namespace so a connection does
not inherit the previous run's ssthresh.

Jobs: a small compute/communication emulator on plain TCP sockets, one or more connections per job.
Each iteration the worker sleeps its compute time, then sends its gradient bytes and waits for the
server's 8-byte reply (sent once all bytes arrived). All jobs start their first iteration at the
same instant (the worst case: every first communication phase collides). The workers' congestion
control is chosen as a user would: ``net.ipv4.tcp_congestion_control`` in their namespaces
(:func:`mlfc.hosts.kernel.namespaces.set_default_cc`), checked on every socket with
``TCP_CONGESTION``.
"""

from __future__ import annotations

import shutil
import socket
import struct
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from mlfc.hosts.kernel import KernelMltcpError, namespaces
from mlfc.lab.results import IterationRecord, summarise
from mlfc.lab.scenarios import interleaving_iteration
from mlfc.policy.mltcp import MltcpParams
from mlfc.testing.netns import NetnsLab, in_netns, run

# The kernel lab's default regime (issue 45; docs/results.md "MLTCP's regime"): a 200 Mbit/s link whose switch
# marks CE above 60 KB (2.4 ms) of a 300 KB buffer, DCTCP's step: congestion is signalled hundreds of times per
# communication phase while bursts still fit. The marking threshold, not the buffer, sets the regime.
DEFAULT_RATE_MBPS = 200.0
DEFAULT_BUFFER = 300_000
DEFAULT_MARK_THRESHOLD = 60_000

MAX_WORKERS = 8
SERVER_ADDR = "10.80.250.1"
PORT_BASE = 5100
REPLY = 8  # bytes the server answers with once an iteration's data is in
TCP_INFO_TOTAL_RETRANS = 100  # byte offset of tcpi_total_retrans in struct tcp_info


@dataclass(frozen=True)
class Profile:
    """One job's iteration: ``comm_s`` is the time its bytes take alone at the bottleneck rate."""

    name: str
    comm_s: float
    compute_s: float

    def nbytes(self, rate_bps: float) -> int:
        return int(self.comm_s * rate_bps / 8)


@dataclass(frozen=True)
class Mix:
    name: str
    description: str
    profiles: tuple[Profile, ...]


# Sum of comm/(comm+compute) over the jobs: <= 1 compatible (they can interleave fully), > 1 partially.
MIXES: dict[str, Mix] = {
    m.name: m
    for m in (
        Mix("compat-2", "2 identical jobs, a = 0.40 each (sum 0.80)", (Profile("m", 0.20, 0.30),) * 2),
        Mix("compat-4", "4 identical jobs, a = 0.20 each (sum 0.80)", (Profile("s", 0.08, 0.32),) * 4),
        Mix("compat-8", "8 identical jobs, a = 0.12 each (sum 0.94)", (Profile("xs", 0.04, 0.30),) * 8),
        Mix("partial-2", "2 identical jobs, a = 0.55 each (sum 1.10)", (Profile("l", 0.36, 0.30),) * 2),
        Mix(
            "partial-4",
            "2 jobs a = 0.40 and 2 jobs a = 0.20 (sum 1.20)",
            (Profile("m", 0.20, 0.30),) * 2 + (Profile("s", 0.08, 0.32),) * 2,
        ),
        Mix("partial-8", "8 identical jobs, a = 0.15 each (sum 1.20)", (Profile("xs+", 0.053, 0.30),) * 8),
    )
}
FAMILIES = {"reno": "mltcp_reno", "cubic": "mltcp_cubic", "dctcp": "mltcp_dctcp"}  # plain -> MLTCP
# The plain algorithm where the kernel has none of its own (no tcp_dctcp module on every kernel): the MLTCP
# program with F = 1 everywhere, i.e. the unmodified algorithm as that program implements it.
PLAIN_F = MltcpParams(0.0, 1.0)


# ---- network ------------------------------------------------------------------------------------


@dataclass
class Bottleneck:
    lab: NetnsLab
    workers: list[str]
    router: str
    server: str
    device: str  # the router's shaped egress device toward the server
    rate_bps: float
    queue_bytes: int

    def worker_address(self, index: int) -> str:
        """The address of worker ``index`` (0-based), as the bottleneck sees it in a packet's source."""
        return f"10.80.{index + 1}.1"


def _offloads_off(ns: str, dev: str) -> None:
    if shutil.which("ethtool"):
        run("ip", "netns", "exec", ns, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off", check=False)


def build_network(
    lab: NetnsLab,
    rate_bps: float,
    buffer_bytes: int,
    workers: int = MAX_WORKERS,
    slow_start_after_idle: int = 1,
    rto_min_ms: float | None = None,
    ecn: bool = False,
) -> Bottleneck:
    """``ecn``: the workers ask for ECN on their connections (``net.ipv4.tcp_ecn=1``; the server's default,
    2, accepts it), for a marker on the bottleneck to signal with."""
    router, server = lab.namespace("r"), lab.namespace("s")
    names = []
    for i in range(1, workers + 1):
        w = lab.namespace(f"w{i}")
        wdev, rdev = lab.link(w, f"10.80.{i}.1", router, f"10.80.{i}.2")
        rto = ["rto_min", f"{rto_min_ms:g}ms"] if rto_min_ms else []
        run("ip", "-n", w, "route", "add", "default", "via", f"10.80.{i}.2", *rto)
        run("ip", "netns", "exec", w, "sysctl", "-qw", "net.ipv4.tcp_no_metrics_save=1")
        run("ip", "netns", "exec", w, "sysctl", "-qw", f"net.ipv4.tcp_slow_start_after_idle={slow_start_after_idle}")
        run("ip", "netns", "exec", w, "sysctl", "-qw", f"net.ipv4.tcp_ecn={1 if ecn else 2}")
        _offloads_off(w, wdev)
        _offloads_off(router, rdev)
        names.append(w)
    rdev, sdev = lab.link(router, "10.80.250.2", server, SERVER_ADDR)
    run("ip", "-n", server, "route", "add", "10.80.0.0/16", "via", "10.80.250.2")
    run("ip", "netns", "exec", router, "sysctl", "-qw", "net.ipv4.ip_forward=1")
    _offloads_off(router, rdev)
    _offloads_off(server, sdev)
    rate = f"{int(rate_bps)}bit"
    lab.tc(router, "qdisc", "add", "dev", rdev, "root", "handle", "1:", "htb", "default", "1")
    lab.tc(router, "class", "add", "dev", rdev, "parent", "1:", "classid", "1:1", "htb", "rate", rate, "ceil", rate)
    lab.tc(router, "qdisc", "add", "dev", rdev, "parent", "1:1", "handle", "10:", "bfifo", "limit", str(buffer_bytes))
    return Bottleneck(lab, names, router, server, rdev, rate_bps, buffer_bytes)


# ---- jobs ---------------------------------------------------------------------------------------


def _recv_exact(sock: socket.socket, n: int, buf: bytearray) -> bool:
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[: min(len(buf), n - got)])
        if k == 0:
            return False
        got += k
    return True


# TcpExt counters of a namespace that count the sender's window cuts for loss: entering fast recovery (with or
# without SACK) and retransmission timeouts.
LOSS_EVENT_COUNTERS = ("TCPSackRecovery", "TCPRenoRecovery", "TCPTimeouts")


def loss_events(netns: str) -> int:
    """The namespace's loss events so far (LOSS_EVENT_COUNTERS summed)."""

    def read() -> str:
        with open("/proc/thread-self/net/netstat") as f:  # the calling thread's namespace
            return f.read()

    lines = in_netns(netns, read).splitlines()
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        if names.startswith("TcpExt:"):
            counters = dict(zip(names.split()[1:], (int(v) for v in values.split()[1:]), strict=True))
            return sum(counters.get(name, 0) for name in LOSS_EVENT_COUNTERS)
    raise KernelMltcpError(f"{netns}: no TcpExt counters in /proc/net/netstat")


def _retrans(sock: socket.socket) -> int:
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    return struct.unpack_from("<I", info, TCP_INFO_TOTAL_RETRANS)[0]


class RecordMetrics:
    """The lab's metrics of a run from its per-iteration ``records`` (first iteration left out)."""

    records: list[IterationRecord]

    @property
    def overall(self):
        return summarise(self.records)[1]

    @property
    def avg(self) -> float:
        return self.overall.avg

    @property
    def p99(self) -> float:
        return self.overall.p99

    @property
    def interleaved_at(self) -> int | None:
        return interleaving_iteration(self.records)


@dataclass
class RunResult(RecordMetrics):
    scenario: str
    cc: str
    records: list[IterationRecord]
    params: MltcpParams | None = None
    flows: int = 1  # connections per job
    loss_events: int = 0  # the workers' loss recoveries and RTOs (a window cut each), from their TcpExt counters
    marks: int = 0  # CE marks the bottleneck set on the jobs' packets (0 without a marker)

    @property
    def retransmits(self) -> int:
        """Retransmitted segments of every connection, summed over the run."""
        return sum(r.retransmits for r in self.records)

    @property
    def signals_per_phase(self) -> float:
        """Congestion signals per connection per communication phase: loss events (each a window cut; a burst
        of drops in one window is one event, unlike its retransmitted segments) + CE marks (each one a signal
        to DCTCP's estimate; Reno/CUBIC cut at most once a window for them). The regime a controller runs in
        (issue 45). NaN without records."""
        phases = len(self.records) * self.flows
        return (self.loss_events + self.marks) / phases if phases else float("nan")


def run_jobs(
    net: Bottleneck, scenario: str, profiles: Sequence[Profile], cc: str, iterations: int, rate_bps: float,
    flows: int = 1, timeout: float = 60.0,
) -> RunResult:  # fmt: skip
    """One run: every profile a job on its own worker namespace, ``cc`` their default; a job sends its
    bytes over ``flows`` parallel connections (as NCCL's socket transport does) and its iteration ends
    when every one of them has been answered."""
    workers = net.workers[: len(profiles)]
    # The server's listeners take the same congestion control: an ECN-needing one (mltcp_dctcp) on the sender is
    # answered with ECN only by a listener that needs it too (docs/kernel-mltcp.md); the others only send replies.
    for ns in [*workers, net.server]:
        namespaces.set_default_cc(namespaces.resolve(ns), cc)
    listeners = [
        in_netns(net.server, lambda j=j: socket.create_server((SERVER_ADDR, PORT_BASE + j), backlog=flows))
        for j in range(len(profiles))
    ]
    errors: list[BaseException] = []
    records: list[IterationRecord] = []
    lock = threading.Lock()

    def serve(j: int, nbytes: int) -> None:
        try:
            conn, _ = listeners[j].accept()
            conn.settimeout(timeout)
            buf = bytearray(1 << 20)
            with conn:
                for _ in range(iterations):
                    if not _recv_exact(conn, nbytes, buf):
                        raise ConnectionError(f"job {j + 1}: worker closed early")
                    conn.sendall(b"\0" * REPLY)
        except BaseException as exc:
            errors.append(exc)

    def connect(j: int) -> socket.socket:
        s = socket.create_connection((SERVER_ADDR, PORT_BASE + j), timeout=timeout)
        got = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode()
        if got != cc:
            s.close()
            raise KernelMltcpError(f"job {j + 1}'s socket uses {got}, not {cc}: the namespace default did not apply")
        return s

    for lst in listeners:
        lst.settimeout(timeout)
    servers = [
        threading.Thread(target=serve, args=(j, p.nbytes(rate_bps) // flows), daemon=True)
        for j, p in enumerate(profiles)
        for _ in range(flows)
    ]
    for t in servers:
        t.start()
    socks = [[in_netns(w, lambda j=j: connect(j)) for _ in range(flows)] for j, w in enumerate(workers)]
    events_before = sum(loss_events(w) for w in workers)
    t0 = time.time() + 0.3  # every job's first compute phase starts here

    def send(s: socket.socket, payload: bytes, reply: bytearray) -> None:
        try:
            s.sendall(payload)
            if not _recv_exact(s, REPLY, reply):
                raise ConnectionError("server closed early")
        except BaseException as exc:
            errors.append(exc)

    def work(j: int, p: Profile, conns: list[socket.socket]) -> None:
        payload = b"\x5a" * (p.nbytes(rate_bps) // flows)
        replies = [bytearray(REPLY) for _ in conns]
        mine = []
        try:
            time.sleep(max(0.0, t0 - time.time()))
            last_retrans = sum(_retrans(s) for s in conns)
            for it in range(iterations):
                start = time.time()
                time.sleep(p.compute_s)
                comm_start = time.time()
                if len(conns) == 1:
                    send(conns[0], payload, replies[0])
                else:
                    helpers = [
                        threading.Thread(target=send, args=(s, payload, r)) for s, r in zip(conns, replies, strict=True)
                    ]
                    for h in helpers:
                        h.start()
                    for h in helpers:
                        h.join()
                if errors:
                    return
                end = time.time()
                retrans = sum(_retrans(s) for s in conns)
                mine.append(IterationRecord(scenario, j + 1, f"w{j + 1}", it, start - t0, comm_start - t0, end - t0,
                                            end - t0, len(payload) * len(conns), retrans - last_retrans))  # fmt: skip
                last_retrans = retrans
        except BaseException as exc:
            errors.append(exc)
        finally:
            for s in conns:
                s.close()
            with lock:
                records.extend(mine)

    threads = [
        threading.Thread(target=work, args=(j, p, c), daemon=True)
        for j, (p, c) in enumerate(zip(profiles, socks, strict=True))
    ]
    for t in threads:
        t.start()
    deadline = time.time() + timeout + iterations * 5
    for t in threads + servers:
        t.join(max(0.1, deadline - time.time()))
    for lst in listeners:
        lst.close()
    if any(t.is_alive() for t in threads + servers):
        raise KernelMltcpError(f"{scenario}: jobs did not finish in time")
    if errors:
        raise KernelMltcpError(f"{scenario}: {errors[0]!r}")
    records.sort(key=lambda r: (r.job, r.iteration))
    events = sum(loss_events(w) for w in workers) - events_before
    return RunResult(scenario, cc, records, flows=flows, loss_events=events)
