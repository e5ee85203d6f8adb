"""The ring of three: a circular dependency between three jobs, every link a bottleneck (the hard case
of lab/scenarios.py's circular mix)."""

from __future__ import annotations

from mlfc.topologies.model import Topology, place_host


def circular_ring(jobs: int = 3, workers_per_job: int = 1) -> Topology:
    """A circular dependency: three switches in a ring, every link a bottleneck. Job k's workers sit on
    switch k, its parameter server two switches on; pushes go clockwise (over links k and k+1), pulls
    counter-clockwise (the same links, the other direction). So every pair of jobs shares exactly one
    link direction, and the three pairwise shifts must add up around the ring: with communication
    fractions summing above 1 no shift order interleaves all three, although each link alone could."""
    if jobs != 3:
        raise ValueError("the circular ring has exactly three jobs (one per pair of links)")
    topo = Topology(f"ring-3x{workers_per_job}")
    ring = [topo.add_switch(f"s{i + 1}").name for i in range(3)]
    for i in range(3):
        topo.connect(ring[i], ring[(i + 1) % 3], bottleneck=True)
    for job in range(1, 4):
        home, via, far = ring[job - 1], ring[job % 3], ring[(job + 1) % 3]
        workers = [place_host(topo, job, "worker", w) for w in range(workers_per_job)]
        for w in workers:
            topo.connect(w.name, home)
        ps = place_host(topo, job, "ps", 100)
        topo.connect(ps.name, far)
        topo.forced_next[(home, ps.name)] = via  # push: home -> via -> far (clockwise)
        topo.forced_next[(via, ps.name)] = far
        for w in workers:
            topo.forced_next[(far, w.name)] = via  # pull: far -> via -> home (counter-clockwise)
            topo.forced_next[(via, w.name)] = home
    return topo
