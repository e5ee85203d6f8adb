"""Is a run's bottleneck the one it configured? Two checks, so no table reports CPU contention as mlfc's effect.

1. Before the jobs (``probe_bottleneck``): a calibration burst across the bottleneck at ``OVERLOAD``
   times its rate (lab/probe.py: a congestion controller keeps its queue a little over-full, not twice)
   must get at least ``MIN_SHARE`` of the configured packet rate through. If not, the run stops, naming
   the cause and the remedies.
2. After each run (``link_utilisation``): while any push is on the wire, the pushes together must have
   moved at least ``MIN_SHARE`` of the configured rate (bytes pushed / chunk size over the union of the
   push intervals; on a link in bits per second, the bits of the pushes' frames). A software switch
   starved of CPU forwards below its configured rate exactly when the jobs load the machine, which the
   idle probe cannot see. The figure goes into every table.

The CPU the run had to spare (``CpuMonitor``) is recorded beside them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

import psutil

from mlfc.hosts.transport.packet import PLAIN_ACK_LEN
from mlfc.lab.probe import ProbeResult
from mlfc.lab.results import IterationRecord
from mlfc.topologies import Topology

MIN_SHARE = 0.8  # a single Reno flow alone reaches ~0.9 of the rate over a push, slow start included
OVERLOAD = 1.25  # the probe offers this much more than the configured rate
CHUNK_BYTES = 1400  # payload per packet of the emulator's transport (hosts/transport DEFAULT_CHUNK)
# The frame that carries one full chunk, as a switch counts it on a link in bits per second: the chunk, the
# transport's DATA header (hosts/transport/packet.py HEADER_LEN, 32 since the shim's telemetry), UDP + IPv4 (28)
# and Ethernet (14).
DATA_FRAME_BYTES = CHUNK_BYTES + 32 + 28 + 14
# An ACK without SACK blocks (hosts/transport/packet.py PLAIN_ACK_LEN) in the same headers: on a link in bits per
# second it costs this, a few percent of a data frame; on a packets/s link, a data packet's slot.
ACK_FRAME_BYTES = PLAIN_ACK_LEN + 28 + 14


class BottleneckNotCarried(RuntimeError):
    pass


def remedies(rate_pps: int) -> str:
    return (
        f"remedies: a BMv2 built without logging macros (MLFC_BMV2=/path/to/simple_switch_grpc, "
        f"docs/toolchain.md), the reference switch (--dataplane ref), or a lower rate than {rate_pps} pkt/s"
    )


def probe_bottleneck(net, topo: Topology, rate_pps: int, seconds: float = 2.0) -> ProbeResult:
    """Offer OVERLOAD x ``rate_pps`` from job 1's first worker to its parameter server (across the bottleneck)."""
    hosts = topo.job_hosts(1)
    src = next(h for h in hosts if h.role == "worker")
    dst = next(h for h in hosts if h.role == "ps")
    py = sys.executable
    recv = net.get(dst.name).popen(
        [py, "-m", "mlfc.lab.probe", "recv", "--bind", dst.ip, "--seconds", str(seconds)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    time.sleep(0.5)  # the receiver binds before the first datagram
    send = [py, "-m", "mlfc.lab.probe", "send", "--to", dst.ip, "--pps", str(OVERLOAD * rate_pps)]
    sender = net.get(src.name).popen(
        [*send, "--seconds", str(seconds + 1)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    sent_out, _ = sender.communicate(timeout=seconds + 30)
    recv_out, _ = recv.communicate(timeout=seconds + 30)
    sent = json.loads(sent_out or "{}")
    got = json.loads(recv_out or "{}")
    span = got.get("seconds") or 0.0
    delivered = got.get("received", 0) / span if span > 0 else 0.0
    offered = sent.get("sent", 0) / (seconds + 1)
    return ProbeResult(rate_pps, offered, delivered)


def require_carried(result: ProbeResult, min_share: float = MIN_SHARE) -> None:
    if not result.share >= min_share:
        raise BottleneckNotCarried(
            f"{result.describe()}: the switches, not the configured queue rate, limit this network; "
            + remedies(result.configured_pps)
        )


def _union(spans: Sequence[tuple[float, float]]) -> float:
    total, end = 0.0, -1.0
    for a, b in sorted(spans):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def pps_equivalent(rate_bps: int, frame_bytes: int) -> float:
    """The packets per second a link of ``rate_bps`` bit/s carries in frames of ``frame_bytes``."""
    return rate_bps / (8 * frame_bytes)


def link_utilisation(
    records: Sequence[IterationRecord], rate_pps: int | None = None, *, rate_bps: int | None = None
) -> float:
    """Packets pushed per second while any push was on the wire, as a share of ``rate_pps``; or, for a link
    of ``rate_bps`` bit/s (the reference switch's byte rate), the pushes' frames' bits per second as a share
    of it (NaN when the records do not split push from pull). Give exactly one of the two rates."""
    if (rate_pps is None) == (rate_bps is None):
        raise ValueError("link_utilisation: give rate_pps or rate_bps")
    spans = [(r.comm_start, r.push_end) for r in records if r.push_end is not None and r.push_end > r.comm_start]
    busy = _union(spans)
    if not spans or busy <= 0:
        return float("nan")
    pushed = sum(r.bytes for r in records if r.push_end is not None) / CHUNK_BYTES
    if rate_bps is not None:
        return pushed * DATA_FRAME_BYTES * 8 / busy / rate_bps
    return pushed / busy / rate_pps


@dataclass(frozen=True)
class CpuUse:
    mean_busy: float  # percent of all cores
    max_busy: float

    def describe(self) -> str:
        return f"CPU busy {self.mean_busy:.0f} % (max {self.max_busy:.0f} %)"


class CpuMonitor:
    """Samples the machine's CPU use every ``interval_s`` while running (a context manager)."""

    def __init__(self, interval_s: float = 0.5) -> None:
        self.interval_s = interval_s
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="cpu-monitor")

    def _run(self) -> None:
        psutil.cpu_percent(None)
        while not self._stop.wait(self.interval_s):
            self.samples.append(psutil.cpu_percent(None))

    def __enter__(self) -> CpuMonitor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)

    def result(self) -> CpuUse:
        if not self.samples:
            return CpuUse(float("nan"), float("nan"))
        return CpuUse(sum(self.samples) / len(self.samples), max(self.samples))
