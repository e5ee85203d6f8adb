"""The chaos test's job, network and seeded fault schedule (lab/chaos/run.py runs them)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from mlfc.hosts.training.launch import TrainingJob
from mlfc.lab.jobs import JobSpec
from mlfc.lab.realjobs import training_spec
from mlfc.topologies import Topology, job_dumbbell

COMPONENTS = ("switch", "controller", "coordinator", "agent", "ps", "worker")
# kill: kill -9, then a restart after the outage; stop: SIGSTOP, then SIGCONT (a hung process keeps its
# sockets and ports); down: a link between two switches set down, then up (every packet on it lost)
LINK = "link"
KINDS: tuple[tuple[str, str], ...] = (
    *((c, "kill") for c in COMPONENTS),
    *((c, "stop") for c in COMPONENTS),
    (LINK, "down"),
)
JOB = 1
WORKERS = 2
ENTRIES_TARGET_S = 1.0  # the switches hold the latest decision within this of a recovery (issue 16)
ACCURACY_TARGET_PP = 0.5


@dataclass(frozen=True)
class Fault:
    index: int
    component: str  # one of COMPONENTS, or LINK
    action: str  # kill, stop or down (KINDS)
    target: str  # ks1, controller, coordinator, agent0, ps, worker1; a link: ks1-ks2
    at_iteration: int  # fire once the job reached this iteration (and the previous fault recovered)
    outage_s: float  # seconds between the kill and the restart (SIGSTOP and SIGCONT, link down and up)

    def describe(self) -> str:
        return {"kill": f"kill -9 {self.target}", "stop": f"SIGSTOP {self.target}"}.get(
            self.action, f"link {self.target} down"
        )


def chaos_topology() -> Topology:
    """The dumbbell of one job under names of its own (mlfc.topologies.job_dumbbell): ``ks1``, ``kj1w0``."""
    return job_dumbbell(JOB, WORKERS, "k")


ACTIONS = ("kill", "stop", "down")


def schedule(
    seed: int, faults: int, iterations: int, switches: list[str], links: list[str], actions: tuple[str, ...] = ACTIONS
) -> list[Fault]:
    """``faults`` faults cycling through every kind of KINDS whose action is in ``actions`` (a fresh random
    order each cycle), spread over the middle of the run (from 10 % to 80 % of the iterations) so that each
    has iterations before and after. ``links`` are the switch-to-switch links a link fault may take down
    (``ks1-ks2``)."""
    if faults < 1:
        raise ValueError("--faults must be >= 1")
    unknown = sorted(set(actions) - set(ACTIONS))
    if unknown or not actions:
        raise ValueError(f"--actions {','.join(actions)!r}: choose among {', '.join(ACTIONS)}")
    kinds = [k for k in KINDS if k[1] in actions]
    if "down" in actions and not links:
        raise ValueError("the network has no link between two switches to take down")
    rng = random.Random(seed)
    first, last = max(3, iterations // 10), int(iterations * 0.8)
    if last - first < 2 * faults:
        raise ValueError(
            f"{iterations} iterations are too few for {faults} faults (need {2 * faults} between "
            f"iteration {first} and {last}): give more --iterations"
        )
    span = (last - first) / faults
    order: list[tuple[str, str]] = []
    out = []
    for i in range(faults):
        if not order:
            order = list(kinds)
            rng.shuffle(order)
        kind, action = order.pop(0)
        choices = {"switch": switches, LINK: links, "agent": ["agent0"], "worker": ["worker1"]}
        target = rng.choice(choices.get(kind, [kind]))
        at = int(first + i * span + rng.uniform(0, span / 2))
        out.append(Fault(i + 1, kind, action, target, at, round(rng.uniform(0.2, 2.0), 2)))
    return out


def switch_links(topo: Topology) -> list[str]:
    """The links between two switches, as ``a-b``: a link fault takes one of them down (a host's own link
    would also flush its static ARP entries, a fault of the test bed rather than of mlfc)."""
    return [f"{lk.a}-{lk.b}" for lk in topo.links if lk.a in topo.switches and lk.b in topo.switches]


def chaos_job(iterations: int, checkpoint: Path, eval_every: int) -> TrainingJob:
    spec: JobSpec = training_spec(JOB, compute_s=0.0, workers=WORKERS, eval_every=eval_every)
    t = spec.training
    assert t is not None
    # peer timeout above the longest outage plus a restart (a switch takes ~2 s to come back); the PS
    # waits long enough for a restarted worker to import torch on a loaded machine
    return TrainingJob(
        job=JOB,
        workers=WORKERS,
        iterations=iterations,
        task=t.task,
        width=t.width,
        lr=t.lr,
        eval_every=eval_every,
        loss_bound=0.0,
        timeout=120.0,
        peer_timeout=20.0,
        checkpoint=str(checkpoint),
    )
