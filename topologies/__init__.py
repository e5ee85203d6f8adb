"""The network topologies the lab, the simulator and users share, as data (mlfc.topologies.model):
hosts with their roles, switches, links with the bottlenecks marked, and the routes they imply.

* ``dumbbell(jobs, workers_per_job)``: one bottleneck between the workers' switch and the PSs' switch;
* ``leaf_spine(jobs, workers_per_job, leaves, spines)``: the leaf-spine uplinks are the bottlenecks;
* ``circular_ring(3, workers_per_job)``: three switches in a ring, every link a bottleneck;
* ``job_dumbbell(job, workers, prefix)``: one job's dumbbell under names of its own (the chaos test's,
  whose network may share the machine with another experiment's).

``build(name, jobs, workers_per_job)`` makes one by the name a command line or a file gives.
"""

from __future__ import annotations

from collections.abc import Callable

from mlfc.topologies.dumbbell import dumbbell, job_dumbbell
from mlfc.topologies.leaf_spine import leaf_spine
from mlfc.topologies.model import Host, Link, Route, Switch, Topology, place_host
from mlfc.topologies.ring import circular_ring

BUILDERS: dict[str, Callable[[int, int], Topology]] = {
    "dumbbell": dumbbell,
    "leaf-spine": leaf_spine,
    "ring": circular_ring,
}


def build(name: str, jobs: int, workers_per_job: int = 1) -> Topology:
    """The topology called ``name`` (one of BUILDERS) for ``jobs`` jobs; ValueError names the choices."""
    try:
        builder = BUILDERS[name]
    except KeyError:
        raise ValueError(f"unknown topology {name!r}: expected one of {', '.join(sorted(BUILDERS))}") from None
    return builder(jobs, workers_per_job)


__all__ = [
    "BUILDERS",
    "Host",
    "Link",
    "Route",
    "Switch",
    "Topology",
    "build",
    "circular_ring",
    "dumbbell",
    "job_dumbbell",
    "leaf_spine",
    "place_host",
]
