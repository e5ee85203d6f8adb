"""The congestion regime of a simulated fabric (issue 45): scaling that keeps it, the queue and marking
threshold in bytes, and the congestion signals a flow sees per communication phase.

Why: MLTCP's F only changes how fast a window grows *between* congestion signals. A flow that sees one
signal per communication phase or less never lets F act. The scale experiment shrank the models' bytes at a
fixed 100 Gb/s with 9 MB queues marking from 400 KB: a push became a few round trips and the queue never
filled to a mark, a regime no data centre runs (ns-3 showed MLTCP 1.00x at every scale).

Scaling that keeps the regime (``RegimeFabric``): bytes times ``scale`` *and* link rates times ``scale``,
compute times unchanged, the base round trip held at ``rtt_s`` (each link's propagation delay is what the
round trip leaves after serialisation at the scaled rate). A push then lasts the same seconds and the same
number of round trips as at full size (``push_rtts``), its bandwidth-delay product shrinks with the bytes,
and so does every queue and threshold given as a multiple of it. What does not scale: the frame (1500 bytes),
so a window of the scaled fabric holds ``scale`` times the packets; a scale is usable down to where the
bandwidth-delay product is tens of packets.

The default regime is a shallow data-centre one (``shallow``): DCTCP's step (``mlfc.policy.ecn.StepProfile``,
the policy object the switches compile) with K at ``SHALLOW_K_BDP`` of the bandwidth-delay product -- the
share ``ecn.DATACENTER_SHALLOW`` (30 KB) has of the 10 Gb/s x 100 us it was sized for, so the default fabric
(scale 0.1: 10 Gb/s hosts, 100 us) marks at exactly that profile -- and class queues of ``SHALLOW_QUEUE_BDP``
bandwidth-delay products. ``deep`` is the earlier fabric's setting kept for the curve: 9 MB queues and RED
from 400 KB to 1.6 MB (pmax 0.2) at 100 Gb/s and a ~10 us round trip, as the same multiples of the
bandwidth-delay product (queue ~70, marks from 3.1 to 12.5).

Signals: ``signals_per_phase`` is the lab's function (lab/e2e/regime.py, through sim/lab.py: the switches'
CE marks and drops per flow per communication phase), so ns-3's rows sit on the same curve as the kernel's
and the switches'; ``reactions_per_phase`` counts what the senders did with them (window cuts: CWR on an ECN
echo, fast recovery, timeout; at most one a window).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import SimpleNamespace

from mlfc.policy import ecn
from mlfc.sim.jobs import PS, SimJob
from mlfc.sim.lab import lab_signals_per_phase
from mlfc.sim.network import TcpSettings
from mlfc.sim.simulation import SimResult
from mlfc.sim.topology import GBPS, SimTopology, leaf_spine

REFERENCE_RATE_BPS = 100 * GBPS  # the full-size fabric's host links
DEFAULT_RTT_S = 100e-6  # base round trip host to host across the spines
DEFAULT_SCALE = 0.1  # 10 Gb/s hosts: DATACENTER_SHALLOW's own regime
FABRIC = {"leaves": 4, "spines": 2, "hosts_per_leaf": 8, "oversubscription": 2.0}  # the scale experiment's
ACK_BYTES = 66  # a bare ACK with timestamps on the wire (IPv4 20 + TCP 32 + framing)
PPP_BYTES = 2  # point-to-point framing per packet
# DATACENTER_SHALLOW's K over the bandwidth-delay product it was sized for (10 Gb/s x 100 us = 125 KB): 0.24
SHALLOW_K_BDP = ecn.DATACENTER_SHALLOW.k_bytes / (10 * GBPS * 100e-6 / 8)
SHALLOW_QUEUE_BDP = 4.0
# The earlier fabric (sim/experiments/common.py): 9 MB class queues, RED from 400 KB to 1.6 MB (pmax 0.2), at
# 100 Gb/s with a base round trip of ~10.2 us (8 crossings of 1 us links, a 9,002-byte frame serialised at 100 and
# 200 Gb/s): a bandwidth-delay product of 127.5 KB. Deep keeps those depths in bandwidth-delay products.
DEEP_QUEUE_BYTES, DEEP_KMIN_BYTES, DEEP_KMAX_BYTES, DEEP_PMAX = 9_000_000, 400_000, 1_600_000, 0.2
DEEP_REFERENCE_BDP_BYTES = 127_500


class RegimeError(ValueError):
    """A regime the fabric cannot hold (a round trip shorter than its serialisation, a queue of no packet)."""


@dataclass(frozen=True)
class RegimeFabric:
    """The scale experiment's leaf-spine with host links at ``scale`` x 100 Gb/s and a base round trip of
    ``rtt_s`` whatever the scale (module doc)."""

    scale: float = DEFAULT_SCALE
    rtt_s: float = DEFAULT_RTT_S
    tcp: TcpSettings = field(default_factory=TcpSettings)  # 1500-byte frames

    def __post_init__(self) -> None:
        if not (math.isfinite(self.scale) and 0 < self.scale <= 1):
            raise RegimeError(f"scale={self.scale!r} must be in (0, 1]")
        if self.link_delay_s() < 0:
            floor = self._serialisation_s()
            raise RegimeError(
                f"scale {self.scale:g}: serialising a data packet and its ACK across the fabric takes "
                f"{floor * 1e6:.1f} us, more than the {self.rtt_s * 1e6:g} us round trip: use a larger scale "
                f"(>= {self.scale * floor / self.rtt_s:.3g}) or a longer round trip"
            )

    @property
    def host_rate_bps(self) -> float:
        return REFERENCE_RATE_BPS * self.scale

    @property
    def uplink_rate_bps(self) -> float:
        return FABRIC["hosts_per_leaf"] * self.host_rate_bps / (FABRIC["spines"] * FABRIC["oversubscription"])

    def _serialisation_s(self) -> float:
        """A full data packet host -> leaf -> spine -> leaf -> host, and its ACK back."""
        per_byte = 8 * (2 / self.host_rate_bps + 2 / self.uplink_rate_bps)
        return per_byte * (self.tcp.packet_bytes + PPP_BYTES + ACK_BYTES)

    def link_delay_s(self) -> float:
        """Each link's propagation delay: the round trip left after serialisation, over 8 link crossings."""
        return (self.rtt_s - self._serialisation_s()) / 8

    @property
    def bdp_bytes(self) -> int:
        """The host link's bandwidth-delay product at the base round trip."""
        return round(self.host_rate_bps * self.rtt_s / 8)

    def topology(self) -> SimTopology:
        topo = leaf_spine(**FABRIC, host_rate_bps=self.host_rate_bps, delay_s=self.link_delay_s())  # type: ignore[arg-type]
        topo.description += f"; base RTT {self.rtt_s * 1e6:g} us (regime scale {self.scale:g})"
        return topo

    def push_rtts(self, job: SimJob) -> float:
        """A worker's push in round trips at its host link's rate alone: the figure the scaling keeps."""
        return 8 * job.push_bytes / self.host_rate_bps / self.rtt_s

    def packets(self, n_bytes: float) -> int:
        """A byte depth as the simulated switches hold it: whole frames of the run's MTU, at least one."""
        return max(1, math.floor(n_bytes / self.tcp.mtu))


@dataclass(frozen=True)
class QueueRegime:
    """One point of the curve: class queues of ``queue_bytes`` and a marking profile (the switches' own)."""

    name: str
    queue_bytes: int
    ecn: ecn.MarkingProfile

    @property
    def mark_threshold_bytes(self) -> int:
        """Where marking starts, in bytes: the step's K, or RED's kmin in frames of 1500 bytes."""
        if isinstance(self.ecn, ecn.StepProfile):
            return self.ecn.k_bytes
        return self.ecn.kmin * 1500

    def switch_settings(self, fabric: RegimeFabric) -> dict:
        """SimConfig's queue_limit (packets), ecn and drop (selective drop off: the jobs are not classed)."""
        from mlfc.sim.experiments.common import NO_SELECTIVE_DROP

        return {"queue_limit": fabric.packets(self.queue_bytes), "ecn": self.ecn, "drop": NO_SELECTIVE_DROP}


def shallow(fabric: RegimeFabric, k_bdp: float = SHALLOW_K_BDP, queue_bdp: float = SHALLOW_QUEUE_BDP) -> QueueRegime:
    """The default: DCTCP's step at ``k_bdp`` of the bandwidth-delay product, queues of ``queue_bdp`` of it."""
    if not (k_bdp > 0 and queue_bdp > k_bdp):
        raise RegimeError(f"K {k_bdp:g} BDP and queue {queue_bdp:g} BDP: need 0 < K < queue")
    k = round(k_bdp * fabric.bdp_bytes)
    if k < fabric.tcp.mtu:
        raise RegimeError(f"K = {k} bytes is under one {fabric.tcp.mtu}-byte frame: use a larger scale")
    name = "shallow" if (k_bdp, queue_bdp) == (SHALLOW_K_BDP, SHALLOW_QUEUE_BDP) else f"step{k_bdp:g}:{queue_bdp:g}"
    return QueueRegime(name, round(queue_bdp * fabric.bdp_bytes), ecn.StepProfile(k_bytes=k))


def deep(fabric: RegimeFabric) -> QueueRegime:
    """The earlier fabric's queues and RED profile as the same multiples of the bandwidth-delay product (about
    70 for the queue, marking from 3.1 to 12.5): a window grows past three round trips of queue before its
    first mark, the regime in which ns-3 showed MLTCP 1.00x."""
    s, mtu = fabric.bdp_bytes / DEEP_REFERENCE_BDP_BYTES, fabric.tcp.mtu
    red = ecn.RedProfile(kmin=max(1, round(DEEP_KMIN_BYTES * s / mtu)), kmax=max(2, round(DEEP_KMAX_BYTES * s / mtu)),
                         pmax=DEEP_PMAX)  # fmt: skip
    return QueueRegime("deep", round(DEEP_QUEUE_BYTES * s), red)


def parse_regime(text: str, fabric: RegimeFabric) -> QueueRegime:
    """``shallow``, ``deep`` or ``step:K_BDP:QUEUE_BDP`` (e.g. step:0.5:8)."""
    if text == "shallow":
        return shallow(fabric)
    if text == "deep":
        return deep(fabric)
    parts = text.split(":")
    if parts[0] == "step" and len(parts) == 3:
        try:
            return shallow(fabric, float(parts[1]), float(parts[2]))
        except ValueError as exc:
            raise RegimeError(f"regime {text!r}: {exc}") from None
    raise RegimeError(f"regime {text!r}: expected shallow, deep or step:K_BDP:QUEUE_BDP")


def compatible_jobs(fabric: RegimeFabric, topo: SimTopology, n: int, full_push_bytes: int = 102_228_128,
                    load: float = 0.8, jitter: float = 0.01) -> tuple[SimJob, ...]:  # fmt: skip
    """``n`` identical PS jobs of two workers whose parameter servers share one host (l1h1): its link carries
    every push in and every pull out. Each worker pushes ``full_push_bytes`` x scale (default ResNet-50's
    gradients); compute is set so the ``n`` jobs' pushes fill ``load`` of the iteration at that link's rate:
    compatible, as the lab's mixes are (they can interleave without waiting for each other). Workers sit
    on the other leaves, round-robin over their hosts."""
    if n < 1 or not 0 < load < 1:
        raise RegimeError(f"n={n}, load={load}: need n >= 1 and 0 < load < 1")
    push = max(1, round(full_push_bytes * fabric.scale))
    wire = (fabric.tcp.packet_bytes + PPP_BYTES) / fabric.tcp.mss
    comm = 2 * 8 * push * wire / fabric.host_rate_bps  # both workers' pushes through the PS's link
    compute = n * comm / load - comm
    leaves, hpl = FABRIC["leaves"], FABRIC["hosts_per_leaf"]
    worker_hosts = [f"l{leaf + 1}h{h + 1}" for h in range(hpl) for leaf in range(1, leaves)]
    jobs = []
    for k in range(n):
        w = (worker_hosts[(2 * k) % len(worker_hosts)], worker_hosts[(2 * k + 1) % len(worker_hosts)])
        jobs.append(SimJob(k + 1, f"compat-{k + 1}", push, push, compute, w, "l1h1", PS, jitter=jitter))
    del topo
    return tuple(jobs)


def signals_per_phase(result: SimResult) -> float:
    """The lab's signals per phase (lab/e2e/regime.py's function, one definition): the switches' CE marks and
    drops of the run's jobs per flow per communication phase (every worker-iteration record is one phase of
    each of its two flows); NaN for a run resumed from its records (no switch counters)."""
    if not result.jobs:
        return math.nan
    counters = {
        job: {"ecn_marks": c["ecn_marks"], "drops": c["selective_drops"] + c["tail_drops"]}
        for job, c in result.jobs.items()
    }
    return lab_signals_per_phase(SimpleNamespace(counters=counters, records=result.records))  # type: ignore[arg-type]


def reactions_per_phase(result: SimResult) -> float:
    """The senders' congestion reactions (CWR on an ECN echo, fast recovery, timeout) per flow per phase."""
    if not result.records or not result.flows:
        return math.nan
    return sum(result.reactions.values()) / (2 * len(result.records))
