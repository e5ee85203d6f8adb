"""One simulated run: a fabric, training jobs, a treatment (congestion control, MLTCP, switch
priorities), and the coordinator's MAIF decisions when the treatment asks for them.

The run advances in slices of ``slice_s`` simulated seconds; between slices Python drains the
iteration records, reports them to the coordinator's engine (MAIF), installs its decisions in the
switches and prints progress. Everything per packet stays in C++.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from mlfc.policy.drop import DropPolicy
from mlfc.policy.ecn import EcnProfile, MarkingProfile, StepProfile
from mlfc.policy.maif import MaifParams
from mlfc.policy.mltcp import MltcpParams, format_params
from mlfc.proto import intent_pb2 as ipb
from mlfc.sim import bridge, runtime
from mlfc.sim.jobs import RING, SimJob
from mlfc.sim.lab import IterationRecord, synthetic_accuracy
from mlfc.sim.network import Network, TcpSettings
from mlfc.sim.topology import SimTopology
from mlfc.wire import PROGRESS_BUCKETS

CONGESTION_CONTROLS = ("reno", "cubic")
PRIORITIES = ("none", "maif", "interleave")
_PORT_BASE = 1000


@dataclass(frozen=True)
class SimConfig:
    name: str
    topology: SimTopology
    jobs: tuple[SimJob, ...]
    iterations: int
    cc: str = "reno"
    mltcp: bool = False
    mltcp_params: MltcpParams = field(default_factory=MltcpParams)
    priorities: str = "none"  # none | maif | interleave
    # RED (packets) or DCTCP's step (K in bytes, counted in packets of tcp.mtu bytes: the deployment's
    # packet_bytes, as on BMv2 and the reference switch)
    ecn: MarkingProfile = field(default_factory=EcnProfile)
    # Selective drop as the controller deploys it by default. Jobs without importance classes send
    # class 0, which it drops first from level 1 (16 queued packets) on: switch it off (min_importance
    # all 0) when the jobs are not classed.
    drop: DropPolicy = field(default_factory=DropPolicy)
    tcp: TcpSettings = field(default_factory=TcpSettings)
    queue_limit: int = 64  # packets per class queue (BMv2's default depth)
    seed: int = 1
    maif: MaifParams = field(default_factory=MaifParams)
    slice_s: float | None = None  # None: ~1/4 of the shortest compute phase, at least 1 ms
    time_limit_s: float = 3600.0  # simulated; a run that has not finished by then fails
    record_f: bool = False  # keep MLTCP's (bytes sent, bytes per iteration, F) samples

    def __post_init__(self) -> None:
        if self.cc not in CONGESTION_CONTROLS:
            raise ValueError(
                f"cc={self.cc!r}: the simulator has {', '.join(CONGESTION_CONTROLS)} (DCQCN is not modelled)"
            )
        if self.priorities not in PRIORITIES:
            raise ValueError(f"priorities={self.priorities!r} is not one of {', '.join(PRIORITIES)}")
        if self.iterations < 1:
            raise ValueError("iterations must be >= 1")
        p = self.mltcp_params
        if self.mltcp and (not (p.linear or p.shape == "step") or p.rule != "increase"):
            # the ns-3 module computes the line and the step, on the additive increase (the paper's rule)
            raise ValueError(f"the simulator's MLTCP has a linear or step F, not {format_params(p)}")
        if not self.jobs:
            raise ValueError("no jobs")
        ids = [j.job_id for j in self.jobs]
        if len(set(ids)) != len(ids):
            raise ValueError(f"duplicate job ids {ids}")
        hosts = self.topology.hosts
        for j in self.jobs:
            for h in j.hosts:
                if h not in hosts:
                    raise ValueError(f"job {j.job_id}: host {h!r} is not in topology {self.topology.name}")
        if self.queue_limit < 1:
            raise ValueError("queue_limit must be >= 1 packet")


@dataclass
class RunStats:
    wall_s: float
    sim_s: float
    events: int
    load_s: float  # ns-3 + JIT start-up paid by this process (0 after the first run)
    packets: int  # data+ACK packets enqueued at switch ports

    @property
    def sim_per_wall(self) -> float:
        return self.sim_s / self.wall_s if self.wall_s > 0 else math.nan

    @property
    def events_per_s(self) -> float:
        return self.events / self.wall_s if self.wall_s > 0 else math.nan


@dataclass
class SimResult:
    config: SimConfig
    records: list[IterationRecord]
    jobs: dict[int, dict[str, int]]  # job -> packets, ecn_marks, selective_drops, tail_drops (switches)
    max_depth: dict[str, int]  # "switch:port" -> deepest class queue seen
    decisions: list[tuple[float, dict[int, int]]]  # MAIF: (sim time, job -> class)
    f_samples: list[tuple[int, int, float]]  # (bytes sent this iteration, bytes per iteration, F)
    restarts: int  # windows restarted after idle
    stats: RunStats
    # job -> the congestion reactions of its connections (ECN echoes, fast retransmits, timeouts: entries into
    # CWR, recovery and loss), and job -> its connections (flows); empty for a run resumed from its records
    reactions: dict[int, int] = field(default_factory=dict)
    flows: dict[int, int] = field(default_factory=dict)


def _slice(config: SimConfig) -> float:
    if config.slice_s is not None:
        return config.slice_s
    shortest = min(j.compute_s for j in config.jobs) or 0.004
    return max(0.001, shortest / 4)


class _Maif:
    """The coordinator's engine fed with the simulated reports, on the simulated clock."""

    def __init__(self, config: SimConfig, clock: Callable[[], float]) -> None:
        from mlfc.coordinator.engine import Engine, EngineConfig
        from mlfc.coordinator.store import Store
        from mlfc.proto import coordinator_pb2 as pb

        self.pb = pb
        self.store = Store(":memory:", synchronous="NORMAL")
        self.engine = Engine(self.store, EngineConfig(params=config.maif), clock=clock, wall=clock)
        self.intent: ipb.Intent | None = None
        self.engine.sink = self._sink
        self.jobs = {j.job_id: j for j in config.jobs}
        for j in config.jobs:
            spec = pb.JobSpec(
                job_id=j.job_id,
                name=j.name,
                metric=pb.ACCURACY,
                bytes_per_iteration=j.push_bytes,
                final_iteration=config.iterations - 1,
            )
            for rank in range(len(j.workers)):
                spec.workers.add(rank=rank)
            self.engine.register(pb.RegisterRequest(job=spec, instance="mlfc-sim"))

    def _sink(self, seq: int, intent: ipb.Intent) -> None:
        self.intent = intent

    def report(self, records: list[IterationRecord]) -> None:
        batch = self.pb.ReportBatch()
        for r in sorted(records, key=lambda r: (r.job, r.worker, r.iteration)):
            j = self.jobs[r.job]
            batch.reports.add(
                job_id=r.job,
                worker=int(r.worker.lstrip("w")),
                iteration=r.iteration,
                metric=synthetic_accuracy(r.iteration, j.acc_max, j.tau),
                compute_seconds=r.comm_start - r.start,
                comm_seconds=r.comm_end - r.comm_start,
                bytes=r.bytes,
                timestamp=r.end,
            )
        if batch.reports:
            self.engine.report(batch)

    def decide(self) -> ipb.Intent | None:
        self.intent = None
        self.engine.decide()
        return self.intent

    def close(self) -> None:
        self.store.close()


def run(config: SimConfig, progress: TextIO | None = sys.stderr, label: str | None = None) -> SimResult:
    """Simulate ``config`` to the end of every job's last iteration."""
    env = runtime.load()
    ns, m = env.ns, env.mlfc
    load_s = runtime.load_seconds if not getattr(run, "_loaded_once", False) else 0.0
    run._loaded_once = True  # type: ignore[attr-defined]
    label = label or config.name
    net = Network(env, config.topology, config.tcp, config.queue_limit, seed=config.seed)
    switches = list(config.topology.topology.switches)
    # A step's K in bytes is counted in the run's frames; RED is in packets already (and TSO's 64 KB frames
    # are beyond what a deployment's packet_bytes may be).
    step = isinstance(config.ecn, StepProfile)
    deploy = bridge.deployment(switches, config.ecn, config.drop, **({"packet_bytes": config.tcp.mtu} if step else {}))
    base_intent = bridge.treatment_intent(config.priorities)

    def install(intent: ipb.Intent) -> None:
        for sw, tables in bridge.compile_tables(intent, deploy).items():
            bridge.load(net.tables[sw], tables)

    install(base_intent)
    recorder = m.Recorder()
    conns: list[object] = []
    cpp_jobs: list[object] = []
    params = config.mltcp_params

    def connect(src: str, dst: str, job: SimJob) -> object:
        c = m.Connection()
        c.src, c.dst = net.nodes[src], net.nodes[dst]
        c.dstAddr = ns.Ipv4Address(net.host_ip(dst))
        c.port = _PORT_BASE + len(conns)
        c.progress.job = job.job_id
        c.progress.progressBuckets = PROGRESS_BUCKETS
        c.progress.chunkBytes = config.tcp.mss
        for imp in job.importance:
            c.progress.importance.push_back(imp)
        m.OpenConnection(
            c,
            config.cc,
            config.mltcp,
            float(params.slope),
            float(params.intercept),
            config.tcp.restart_after_idle,
            config.tcp.initial_cwnd,
        )
        c.Mltcp().recordSamples = config.record_f
        if params.shape == "step":
            c.Mltcp().knee = float(params.knee)
        conns.append(c)
        return c

    for i, job in enumerate(config.jobs):
        tj = m.TrainingJob()
        tj.id = job.job_id
        tj.ring = job.pattern == RING
        tj.iterations = config.iterations
        tj.pushBytes = job.push_bytes
        tj.pullBytes = job.pull_bytes
        tj.computeS = job.compute_s
        tj.jitter = job.jitter
        tj.straggle = job.straggle
        tj.straggleFrom = job.straggle_from
        # Connections open at t=0; every job's first iteration starts together a little later.
        tj.startAt = 0.001 + job.start_delay
        tj.recorder = recorder
        tj.Seed(config.seed * 1_000_003 + job.job_id)
        n = len(job.workers)
        for w, host in enumerate(job.workers):
            if tj.ring:
                tj.push.push_back(connect(host, job.workers[(w + 1) % n], job))
            else:
                tj.push.push_back(connect(host, job.ps, job))
                tj.pull.push_back(connect(job.ps, host, job))
        tj.Start()
        cpp_jobs.append(tj)
        del i

    maif = _Maif(config, lambda: ns.Simulator.Now().GetSeconds()) if config.priorities == "maif" else None
    decisions: list[tuple[float, dict[int, int]]] = []
    records: list[IterationRecord] = []
    total = config.iterations * sum(len(j.workers) for j in config.jobs)
    step = _slice(config)
    t0 = time.monotonic()
    ev0 = m.EventCount()
    last_print = t0
    try:
        while True:
            ns.Simulator.Stop(ns.Seconds(step))
            ns.Simulator.Run()
            fresh = _drain(recorder, label)
            records += fresh
            now = ns.Simulator.Now().GetSeconds()
            if maif is not None and fresh:
                maif.report(fresh)
                intent = maif.decide()
                if intent is not None:
                    install(intent)
                    decisions.append((now, {j.job_id: j.priority for j in intent.jobs}))
            done = all(j.Finished() for j in cpp_jobs)
            wall = time.monotonic()
            if progress is not None and (done or wall - last_print >= 5.0):
                last_print = wall
                ev = m.EventCount() - ev0
                rate = ev / max(1e-9, wall - t0)
                print(
                    f"  [{label}] sim {now:.3f} s, {len(records)}/{total} worker-iterations, "
                    f"wall {wall - t0:.0f} s, {rate:,.0f} events/s",
                    file=progress,
                    flush=True,
                )
            if done:
                break
            if now > config.time_limit_s:
                raise RuntimeError(
                    f"{label}: not finished after {config.time_limit_s:g} simulated seconds "
                    f"({len(records)}/{total} worker-iterations): a job is stuck (check the topology and jobs)"
                )
        wall_s = time.monotonic() - t0
        sim_s = ns.Simulator.Now().GetSeconds()
        events = m.EventCount() - ev0
        counters: dict[int, dict[str, int]] = {}
        depth: dict[str, int] = {}
        packets = 0
        for (sw, port), q in net.queues.items():
            depth[f"{sw}:{port}"] = int(q.maxDepth)
            for kv in q.jobs:
                c = counters.setdefault(
                    int(kv.first), {"packets": 0, "ecn_marks": 0, "selective_drops": 0, "tail_drops": 0}
                )
                c["packets"] += int(kv.second.packets)
                c["ecn_marks"] += int(kv.second.ecnMarks)
                c["selective_drops"] += int(kv.second.selectiveDrops)
                c["tail_drops"] += int(kv.second.tailDrops)
                packets += int(kv.second.packets)
        samples = []
        if config.record_f:
            for c in conns:
                for s in c.Mltcp().samples:
                    samples.append((int(s.sent), int(s.perIteration), float(s.factor)))
        restarts = sum(int(c.restarts) for c in conns)
        reactions: dict[int, int] = {}
        flows: dict[int, int] = {}
        for c in conns:
            job_id = int(c.progress.job)
            reactions[job_id] = reactions.get(job_id, 0) + int(c.Mltcp().reactions)
            flows[job_id] = flows.get(job_id, 0) + 1
    finally:
        ns.Simulator.Destroy()
        if maif is not None:
            maif.close()
    # The C++ objects Python owns go only after the simulator has disposed of the sockets using them.
    conns.clear()
    cpp_jobs.clear()
    return SimResult(
        config,
        records,
        counters,
        depth,
        decisions,
        samples,
        restarts,
        RunStats(wall_s, sim_s, events, load_s, packets),
        reactions,
        flows,
    )


def _drain(recorder: object, label: str) -> list[IterationRecord]:
    out = []
    recs = recorder.records
    n = recs.size()
    for i in range(int(recorder.drained), n):
        r = recs[i]
        out.append(
            IterationRecord(
                scenario=label,
                job=int(r.job),
                worker=f"w{int(r.worker)}",
                iteration=int(r.iteration),
                start=float(r.start),
                comm_start=float(r.commStart),
                comm_end=float(r.commEnd),
                end=float(r.end),
                bytes=int(r.bytes),
                push_end=float(r.pushEnd) if r.pushEnd >= 0 else None,
            )
        )
    recorder.drained = n
    return out
