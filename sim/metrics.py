"""Figures of merit of simulated runs, by the lab's definitions (``mlfc.sim.lab``), plus their
generalisation to fabrics where jobs share different links.

* On the dumbbell the ideal is the lab's ``ideal_iteration_times`` over measured solo runs.
* On a fabric, the ideal of a job is its solo time scaled by the load of the busiest directed link it
  crosses (1 if none is overloaded): the load of a link is the sum over jobs of the share of the job's
  solo iteration the link is busy with its bytes; a job's bytes split evenly over its ECMP paths.
  With one shared link this is the lab's definition with push and pull counted apart.
* Interleaving on a fabric is the lab's ``interleaving_iteration`` over the jobs that share a host
  link, group by group.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from mlfc.hosts.importance import assign_importance
from mlfc.sim.jobs import RING, SimJob
from mlfc.sim.lab import IterationRecord, gradients, interleaving_iteration, summarise
from mlfc.sim.topology import SimTopology

DirectedLink = tuple[str, str]


def importance_pattern(nbytes: int, chunk: int, seed: int, max_bytes: int = 4 << 20) -> tuple[int, ...]:
    """The transport's per-chunk importance classes for float32 gradients of ``nbytes`` (the
    emulator's heavy-tailed synthetic gradients, mlfc.hosts.importance); tensors above ``max_bytes``
    repeat the pattern of their first ``max_bytes``."""
    n = min(nbytes, max_bytes)
    return tuple(assign_importance(gradients(n, seed), chunk))


def flows(job: SimJob) -> list[tuple[str, str, int]]:
    """(source host, destination host, bytes per iteration) of every connection of ``job``."""
    if job.pattern == RING:
        n = len(job.workers)
        per = 2 * (n - 1) * max(1, job.push_bytes // n)
        return [(w, job.workers[(i + 1) % n], per) for i, w in enumerate(job.workers)]
    assert job.ps is not None
    return [(w, job.ps, job.push_bytes) for w in job.workers] + [(job.ps, w, job.pull_bytes) for w in job.workers]


def link_bytes(topo: SimTopology, job: SimJob) -> dict[DirectedLink, float]:
    """Bytes per iteration of ``job`` on each directed link, split evenly over ECMP paths."""
    out: dict[DirectedLink, float] = defaultdict(float)
    for src, dst, nbytes in flows(job):
        paths = topo.paths(src, dst)
        for path in paths:
            for hop in path:
                out[hop] += nbytes / len(paths)
    return out


def rates(topo: SimTopology) -> dict[DirectedLink, float]:
    out = {}
    for i, lk in enumerate(topo.topology.links):
        out[(lk.a, lk.b)] = out[(lk.b, lk.a)] = topo.rates[i]
    return out


def fabric_ideal(topo: SimTopology, jobs: Sequence[SimJob], solo: dict[int, float]) -> dict[int, float]:
    """Ideal iteration time per job on a fabric (module doc)."""
    r = rates(topo)
    per_job = {j.job_id: link_bytes(topo, j) for j in jobs}
    load: dict[DirectedLink, float] = defaultdict(float)
    for j in jobs:
        for link, b in per_job[j.job_id].items():
            load[link] += 8 * b / r[link] / solo[j.job_id]
    return {j.job_id: solo[j.job_id] * max(1.0, *(load[lk] for lk in per_job[j.job_id])) for j in jobs}


def comm_fraction(topo: SimTopology, job: SimJob) -> float:
    """a = comm / (compute + comm) alone, from the busiest link's serialisation time (no protocol costs)."""
    r = rates(topo)
    lb = link_bytes(topo, job)
    if job.pattern == RING:
        comm = max(8 * b / r[lk] for lk, b in lb.items())
    else:
        push = max(8 * b / r[lk] for lk, b in link_bytes(topo, replace(job, pull_bytes=1)).items())
        pull = max(8 * b / r[lk] for lk, b in link_bytes(topo, replace(job, push_bytes=1)).items())
        comm = push + pull
    return comm / (comm + job.compute_s)


def shared_groups(topo: SimTopology, jobs: Sequence[SimJob]) -> dict[DirectedLink, list[int]]:
    """Directed host links carried by two jobs or more (deterministic, unlike the ECMP uplinks)."""
    users: dict[DirectedLink, set[int]] = defaultdict(set)
    hosts = set(topo.hosts)
    for j in jobs:
        for link in link_bytes(topo, j):
            if link[0] in hosts or link[1] in hosts:
                users[link].add(j.job_id)
    return {lk: sorted(u) for lk, u in users.items() if len(u) >= 2}


@dataclass(frozen=True)
class Interleaving:
    groups: int  # shared host links
    interleaved: int  # of which stayed interleaved to the end
    iteration: int | None  # from which every group stayed interleaved (None: some never)
    median: float  # median iteration of the groups that interleaved (nan: none)


def fabric_interleaving(
    records: Sequence[IterationRecord], groups: dict[DirectedLink, list[int]], whole_phase: bool = False
) -> Interleaving:
    """The lab's interleaving iteration per group of jobs sharing a link. ``whole_phase`` compares
    whole communication phases (when a link carries one job's push and another's pull)."""
    recs = [replace(r, push_end=None) for r in records] if whole_phase else list(records)
    seen: dict[tuple[int, ...], int | None] = {}
    for members in groups.values():
        key = tuple(members)
        if key not in seen:
            seen[key] = interleaving_iteration([r for r in recs if r.job in members])
    its = list(seen.values())
    ok = [i for i in its if i is not None]
    return Interleaving(
        len(its),
        len(ok),
        max(ok) if len(ok) == len(its) and its else None,
        float(np.median(ok)) if ok else math.nan,
    )


@dataclass(frozen=True)
class RunSummary:
    avg: float
    p99: float
    per_job_avg: dict[int, float]


def summary(records: Iterable[IterationRecord], skip_warmup: int = 1) -> RunSummary:
    per, overall = summarise(list(records), skip_warmup)
    return RunSummary(overall.avg, overall.p99, {p.job: p.avg for p in per})
