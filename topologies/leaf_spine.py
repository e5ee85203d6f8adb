"""A small leaf-spine fabric: workers spread over the leaves, parameter servers on the last leaf, the
leaf-spine uplinks the bottlenecks."""

from __future__ import annotations

from mlfc.topologies.model import Topology, place_host


def leaf_spine(jobs: int, workers_per_job: int = 2, leaves: int = 2, spines: int = 2) -> Topology:
    """A small leaf-spine: workers spread over the leaves, parameter servers on the last leaf.
    Leaf-spine uplinks are the bottlenecks."""
    if leaves < 2 or spines < 1:
        raise ValueError("leaf-spine needs at least 2 leaves and 1 spine")
    topo = Topology(f"leafspine-{leaves}x{spines}")
    leaf_names = [topo.add_switch(f"leaf{i + 1}").name for i in range(leaves)]
    spine_names = [topo.add_switch(f"spine{i + 1}").name for i in range(spines)]
    for leaf in leaf_names:
        for spine in spine_names:
            topo.connect(leaf, spine, bottleneck=True)
    for job in range(1, jobs + 1):
        for w in range(workers_per_job):
            topo.connect(place_host(topo, job, "worker", w).name, leaf_names[w % (leaves - 1)])
        topo.connect(place_host(topo, job, "ps", 100).name, leaf_names[-1])
    return topo
