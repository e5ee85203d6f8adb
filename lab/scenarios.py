"""The experiments: job mixes sharing a bottleneck, each run under several network treatments.

A *mix* fixes the jobs (profiles, stragglers); a *treatment* fixes congestion control, MLTCP and
what the switch prioritises by. Every mix also has solo runs of its jobs, which give the ideal:
with perfect interleaving a job iterates as fast as alone, as long as the link can carry every
job's communication within one period.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from mlfc.lab.emulator import JobProfile
from mlfc.lab.jobs import JobSpec, Training
from mlfc.lab.results import IterationRecord
from mlfc.lab.stack import StackConfig
from mlfc.lab.validity import ACK_FRAME_BYTES, DATA_FRAME_BYTES
from mlfc.policy import depth
from mlfc.policy.ecn import MarkingProfile, RedProfile, StepProfile
from mlfc.policy.mltcp import MltcpParams, default_params
from mlfc.topologies import Topology, circular_ring, dumbbell

# Communication fraction a = comm / (compute + comm) at BOTTLENECK_PPS with ~1400-byte chunks:
# push+pull of 2 x 420 kB takes about 0.4 s alone, so compute 0.6 s gives a ~ 0.4.
BOTTLENECK_PPS = 1500
MEDIUM = JobProfile("medium", 420_000, 420_000, 0.6)
SHORT = JobProfile("short", 210_000, 210_000, 0.45)
LONG = JobProfile("long", 630_000, 630_000, 1.1)
HEAVY = JobProfile("heavy", 630_000, 630_000, 0.35)
# Four of these load each link direction to ~0.9 (push 0.2 s of a 0.9 s iteration): compatible, but
# only just, so unmodified CC overlaps them heavily (ideal speed-up around 2x).
QUARTER = JobProfile("quarter", 420_000, 420_000, 0.5)


@dataclass(frozen=True)
class Regime:
    """The bottleneck's regime (issue 45): its rate, its queue, where it signals congestion. MLTCP's F acts
    between congestion signals, so a result holds only in the regime it was measured in: every MLTCP row
    says its regime.

    ``link_bps``: the reference switch's bottleneck as a link of that many bit/s (an ACK costs its bytes);
    None: ``BOTTLENECK_PPS`` packets/s (BMv2's only kind). ``mark_threshold_bytes``: DCTCP's step, every ECT
    packet above K bytes marked; None: DCQCN's RED profile (RedProfile's defaults, in packets)."""

    link_bps: int | None = None
    queue_pkts: int = 64
    mark_threshold_bytes: int | None = None

    def ecn(self) -> MarkingProfile:
        return RedProfile() if self.mark_threshold_bytes is None else StepProfile(self.mark_threshold_bytes)

    @property
    def queue_bytes(self) -> int:
        """The queue's capacity in full-size packets' bytes (the switches count packets)."""
        return self.queue_pkts * depth.DEFAULT_PACKET_BYTES

    def rate_bps(self, bottleneck_pps: int = BOTTLENECK_PPS) -> float:
        """The link's rate in bit/s (a packets/s link: full-size packets' bits)."""
        return float(self.link_bps or bottleneck_pps * depth.DEFAULT_PACKET_BYTES * 8)

    def ack_cost(self, target: str) -> float:
        """What an ACK costs the bottleneck, in data packets: a slot of its own on a packets/s link (BMv2's,
        the deep regime's), its bytes on the reference switch's link in bit/s. The ideal counts ACKs so."""
        if self.link_bps is None or target != "refswitch":
            return 1.0
        return ACK_FRAME_BYTES / DATA_FRAME_BYTES

    def tag(self) -> str:
        """A short name for file paths ("" for the deep regime, whose runs were published without one)."""
        if self == DEEP:
            return ""
        link = f"-link{self.link_bps / 1e6:g}M" if self.link_bps is not None else "-pps"
        queue = "" if self.queue_pkts == DEEP.queue_pkts else f"-q{self.queue_pkts}"
        mark = "-red" if self.mark_threshold_bytes is None else f"-k{self.mark_threshold_bytes}"
        return link + queue + mark

    def flags(self) -> str:
        """The e2e command-line options that select this regime ("" for the lab's first, deep one)."""
        out = []
        if self.link_bps is not None:
            out.append(f"--link-bps {self.link_bps}")
        if self.queue_pkts != Regime().queue_pkts:
            out.append(f"--queue-depth {self.queue_pkts}")
        if self.mark_threshold_bytes is not None:
            out.append(f"--mark-threshold {self.mark_threshold_bytes}")
        return " ".join(out)


DEEP = Regime()  # the lab's regime before issue 45: 1,500 packets/s, 64 packets, RED from 4 to 32 packets


@dataclass(frozen=True)
class Mix:
    name: str
    description: str
    jobs: tuple[JobSpec, ...]
    workers_per_job: int = 1
    topology: str = "dumbbell"  # dumbbell (one shared bottleneck) | ring (circular_ring: three links)

    def build_topology(self) -> Topology:
        if self.topology == "ring":
            return circular_ring(len(self.jobs), self.workers_per_job)
        return dumbbell(len(self.jobs), self.workers_per_job)


@dataclass(frozen=True)
class Treatment:
    name: str
    cc: str = "reno"
    mltcp: bool = False
    priorities: str = "none"  # none | maif | interleave
    baseline: str = "baseline"  # the treatment this one is compared with
    tune: bool = False  # MLTCP's slope/intercept tuned online by every sender (SenderConfig.mltcp_tune)
    coordinator_args: tuple[str, ...] = ()  # `mlfc-coordinator run` policy options (e.g. --objective best)
    # The coordinator's MLTCP fallback (mlfc-coordinator --fallback ACTION, mlfc/policy/fallback.py): no classes
    # until the agents' timings show the jobs still contending, then ACTION (maif | interleave). Needs
    # priorities="maif" (the coordinator drives the controller).
    fallback: str = ""


TREATMENTS: dict[str, Treatment] = {
    t.name: t
    for t in (
        Treatment("baseline", "reno"),
        Treatment("cubic", "cubic"),
        Treatment("dcqcn", "dcqcn"),
        Treatment("dctcp", "dctcp"),
        Treatment("mltcp-reno", "reno", mltcp=True),
        Treatment("mltcp-reno-tune", "reno", mltcp=True, tune=True),
        Treatment("mltcp-cubic", "cubic", mltcp=True, baseline="cubic"),
        Treatment("mltcp-dcqcn", "dcqcn", mltcp=True, baseline="dcqcn"),
        Treatment("mltcp-dctcp", "dctcp", mltcp=True, baseline="dctcp"),
        Treatment("maif", "reno", priorities="maif"),
        Treatment("mltcp+maif", "reno", mltcp=True, priorities="maif"),
        # MAIF for a hyper-parameter search: only gains of the best job's accuracy count (MaifParams.objective)
        Treatment("maif-search", "reno", priorities="maif", coordinator_args=("--objective", "best")),
        # ... judged by optimistic curves at the search's next doubling (issue 26's second ranking design)
        Treatment("maif-potential", "reno", priorities="maif", coordinator_args=("--objective", "potential")),
        # ... the jobs the data cannot rule out share the top class (the third design)
        Treatment("maif-elimination", "reno", priorities="maif", coordinator_args=("--objective", "elimination")),
        # ... the top class time-shared by each job's chance of being the best (the fourth design, issue 47 item 2)
        Treatment("maif-chance", "reno", priorities="maif", coordinator_args=("--objective", "chance")),
        Treatment("interleave", "reno", priorities="interleave"),
        Treatment("mltcp+fallback", "reno", mltcp=True, priorities="maif", fallback="maif"),
        Treatment("mltcp+fallback-interleave", "reno", mltcp=True, priorities="maif", fallback="interleave"),
    )
}

MIXES: dict[str, Mix] = {
    m.name: m
    for m in (
        Mix(
            "two-compatible",
            "two identical jobs, a ~ 0.4 each (sum <= 1)",
            (JobSpec(1, MEDIUM, tau=8), JobSpec(2, MEDIUM, tau=20)),
        ),
        Mix(
            "three-mixed",
            "three jobs with different iteration times",
            (JobSpec(1, SHORT, tau=6), JobSpec(2, MEDIUM, tau=12), JobSpec(3, LONG, tau=25)),
        ),
        Mix(
            "straggler",
            "two identical jobs; job 1's worker computes 1.6x slower from iteration 5",
            (JobSpec(1, MEDIUM, straggle=1.6, straggle_from=5, tau=8), JobSpec(2, MEDIUM, tau=20)),
        ),
        Mix(
            "partial",
            "two communication-heavy jobs, a ~ 0.65 each (sum > 1: partially compatible)",
            (JobSpec(1, HEAVY, tau=8), JobSpec(2, HEAVY, tau=20)),
        ),
        Mix(
            "four-compatible",
            "four jobs, push 0.2 s of a 0.9 s iteration each (link direction load ~0.9: compatible)",
            tuple(JobSpec(j, QUARTER, tau=6 + 4 * j) for j in range(1, 5)),
        ),
        Mix(
            "circular",
            "three jobs on a ring of three bottleneck links, each pair sharing one (a ~ 0.4: every link "
            "compatible, the loop is not)",
            tuple(JobSpec(j, MEDIUM, tau=6 + 6 * j) for j in range(1, 4)),
            topology="ring",
        ),
        Mix(
            "straggler-random",
            "two identical jobs; job 1's worker computes 1-2.2x slower (uniform, drawn per iteration, seeded) "
            "from iteration 3",
            (
                JobSpec(1, MEDIUM, straggle=2.2, straggle_from=3, straggle_random=True, tau=8),
                JobSpec(2, MEDIUM, tau=20),
            ),
        ),
        Mix(
            "three-heavy",
            "three communication-heavy jobs, push 0.3 s of a ~1.0 s iteration each (link direction load "
            "~0.9: compatible, barely, so every overlap under FIFO costs; issue 14 item 3)",
            tuple(JobSpec(j, HEAVY, tau=6 + 6 * j) for j in range(1, 4)),
        ),
    )
}

# The search objectives' treatments: they need real jobs with real learning curves (`make hpsearch`).
SEARCH_TREATMENTS = ("maif-search", "maif-potential", "maif-elimination", "maif-chance")

# Which treatments run on which mix in `make e2e` (all CC variants on the main mix only).
PLAN: dict[str, tuple[str, ...]] = {
    "two-compatible": tuple(t for t in TREATMENTS if t not in SEARCH_TREATMENTS),  # search: real jobs (hpsearch)
    "three-mixed": ("baseline", "mltcp-reno", "maif", "mltcp+maif", "interleave"),
    "straggler": ("baseline", "mltcp-reno", "maif", "interleave", "mltcp+fallback"),
    "partial": ("baseline", "mltcp-reno", "maif", "interleave", "mltcp+fallback"),
    "four-compatible": ("baseline", "mltcp-reno", "cubic", "mltcp-cubic", "maif"),
    "circular": ("baseline", "mltcp-reno", "maif", "mltcp+maif", "mltcp+fallback"),
    "straggler-random": ("baseline", "mltcp-reno", "maif", "mltcp+fallback"),
    "three-heavy": ("baseline", "mltcp-reno", "cubic", "mltcp-cubic"),
}

DEFAULT_MIX = "two-compatible"


def stack_config(
    mix: Mix,
    treatment: Treatment,
    iterations: int,
    bottleneck_pps: int = BOTTLENECK_PPS,
    jobs: Sequence[JobSpec] | None = None,
    mltcp_params: MltcpParams | None = None,
    ack_delay: float | None = None,
    bottleneck_bps: int | None = None,
    regime: Regime | None = None,
) -> StackConfig:
    """The stack for ``treatment`` on ``mix``; ``regime`` (when given) sets the bottleneck's link, queue and
    marking, over ``bottleneck_bps``."""
    if treatment.fallback and treatment.priorities != "maif":
        raise ValueError(f"treatment {treatment.name}: the fallback needs priorities='maif' (the coordinator applies)")
    return StackConfig(
        name=f"{mix.name}/{treatment.name}",
        jobs=tuple(jobs if jobs is not None else mix.jobs),
        iterations=iterations,
        cc=treatment.cc,
        mltcp=treatment.mltcp,
        mltcp_params=mltcp_params or default_params(treatment.cc),
        mltcp_tune=treatment.tune,
        priorities=treatment.priorities,
        bottleneck_pps=bottleneck_pps,
        bottleneck_bps=regime.link_bps if regime is not None else bottleneck_bps,
        queue_depth=regime.queue_pkts if regime is not None else StackConfig.queue_depth,
        ecn=regime.ecn() if regime is not None else RedProfile(),
        ack_delay=ack_delay,
        coordinator_args=treatment.coordinator_args
        + (("--fallback", treatment.fallback) if treatment.fallback else ()),
    )


def with_training(mix: Mix, training: Training | None = None, workers: int | None = None) -> Mix:
    """The mix with real PyTorch training (digits by default) in place of the emulator: same profiles
    (compute padded to them), real gradients and accuracy."""
    t = training or Training()
    n = workers or max(mix.workers_per_job, 2)
    jobs = tuple(replace(j, training=replace(t, seed=j.job), workers=n) for j in mix.jobs)
    return replace(mix, name=f"{mix.name}+training", jobs=jobs, workers_per_job=n,
                   description=f"{mix.description}; real training ({t.task}, {n} workers per job)")  # fmt: skip


def solo(job: JobSpec) -> JobSpec:
    return replace(job, start_delay=0.0)


def ideal_iteration_times(
    solo_times: dict[int, float],
    solo_comm: dict[int, float],
    solo_push: dict[int, float] | None = None,
    ack_share: dict[int, float] | None = None,
) -> dict[int, float]:
    """The best the network could do: with perfect interleaving each job iterates as fast as alone,
    as long as the link can carry every job's communication. Past that, the link is the limit:
    every job slows by the same factor, the load, which uses the link fully.

    The load is the sum over jobs of the fraction of its solo iteration a link direction is busy
    with it. With ``solo_push`` (time of the push, worker -> PS; the rest of the communication is
    the pull, PS -> worker) the two directions count apart, as they are on a full-duplex link: one
    job's pull can run beside another's push. Without it, the whole communication phase counts
    against one shared resource.

    With ``ack_share`` (per job: the ACK packets its receivers send per data packet, measured alone) the
    bottleneck is a packet rate, as the lab's switches are: a direction also carries the other
    direction's ACKs, each costing what a data packet costs, so a job's pull adds ``ack_share`` x its
    pull time to the push direction and its push the same to the pull direction."""
    times = {j: t for j, t in solo_times.items() if t > 0}
    if solo_push is not None and all(j in solo_push and not math.isnan(solo_push[j]) for j in times):
        acks = {j: (ack_share or {}).get(j, 0.0) for j in times}
        push = {j: solo_push[j] for j in times}
        pull = {j: solo_comm[j] - solo_push[j] for j in times}
        push_load = sum((push[j] + acks[j] * pull[j]) / t for j, t in times.items())
        pull_load = sum((pull[j] + acks[j] * push[j]) / t for j, t in times.items())
        load = max(push_load, pull_load)
    else:
        load = sum(solo_comm[j] / t for j, t in times.items())
    return {j: t * max(1.0, load) for j, t in solo_times.items()}


def share_of_ideal_gain(base_avg: float, avg: float, ideal_avg: float) -> float:
    """How much of the possible speed-up a treatment achieved: (speed-up - 1) / (ideal speed-up - 1),
    both against the baseline's average iteration time; NaN when the baseline is already ideal."""
    ideal_speedup = base_avg / ideal_avg
    if not ideal_speedup > 1.0001 or not avg > 0:
        return math.nan
    return (base_avg / avg - 1) / (ideal_speedup - 1)


def interleaving_iteration(records: Sequence[IterationRecord], threshold: float = 0.2) -> int | None:
    """The first iteration from which no job's communication overlaps other jobs' communication in
    the same link direction (push with push, pull with pull) by ``threshold`` of its length or more,
    for the rest of the run; None if that never happens. A push and a pull cross the bottleneck in
    opposite directions, so they do not compete; records without the push/pull split compare whole
    communication phases."""
    jobs = sorted({r.job for r in records})
    if len(jobs) < 2:
        return 0
    overlapped: dict[int, bool] = {}
    for r in records:
        length = max(1e-9, r.comm_end - r.comm_start)
        ov = 0.0
        for o in records:
            if o.job == r.job:
                continue
            theirs = o.phases()
            for phase, (a, b) in r.phases().items():
                for other_phase, (c, d) in theirs.items():
                    if phase == other_phase or "comm" in (phase, other_phase):
                        ov += max(0.0, min(b, d) - max(a, c))
        overlapped[r.iteration] = overlapped.get(r.iteration, False) or ov / length >= threshold
    its = sorted(overlapped)
    for i, it in enumerate(its):
        if not any(overlapped[x] for x in its[i:]):
            return it
    return None
