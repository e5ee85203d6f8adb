"""The dumbbell: every job's workers on one switch, its parameter server on the other, one bottleneck
link between them (the lab's and the simulator's validation topology)."""

from __future__ import annotations

import ipaddress

from mlfc.topologies.model import Host, Topology, place_host


def dumbbell(jobs: int, workers_per_job: int = 1) -> Topology:
    """Workers of every job on the left switch, their parameter servers on the right: every job's
    push and pull cross the one s1-s2 link, the bottleneck."""
    if jobs < 1 or workers_per_job < 1:
        raise ValueError("a dumbbell needs at least one job with one worker")
    topo = Topology(f"dumbbell-{jobs}x{workers_per_job}")
    topo.add_switch("s1")
    topo.add_switch("s2")
    topo.connect("s1", "s2", bottleneck=True)
    for job in range(1, jobs + 1):
        for w in range(workers_per_job):
            topo.connect(place_host(topo, job, "worker", w).name, "s1")
        topo.connect(place_host(topo, job, "ps", 100).name, "s2")
    return topo


def job_dumbbell(job: int, workers: int, prefix: str) -> Topology:
    """One job's dumbbell with every switch and host name starting with ``prefix`` (``ks1``, ``kj7w0``):
    Mininet's interfaces live in the root namespace (``s1-eth1``), so a network built while another
    experiment's runs on the same machine must not use the usual names."""
    if not prefix or not prefix.isalnum():
        raise ValueError(f"prefix {prefix!r}: letters and digits, at least one")
    if workers < 1:
        raise ValueError("a dumbbell needs at least one worker")
    topo = Topology(f"{prefix}-dumbbell-1x{workers}")
    topo.add_switch(f"{prefix}s1")
    topo.add_switch(f"{prefix}s2")
    topo.connect(f"{prefix}s1", f"{prefix}s2", bottleneck=True)
    for role, index in [("worker", w) for w in range(workers)] + [("ps", 100)]:
        ip = ipaddress.IPv4Address("10.0.0.0") + (job << 8) + index + 1
        name = f"{prefix}j{job}ps" if role == "ps" else f"{prefix}j{job}w{index}"
        n = len(topo.hosts) + 1
        topo.add_host(Host(name, str(ip), f"00:00:00:00:0c:{n:02x}", job, role))
        topo.connect(name, f"{prefix}s1" if role == "worker" else f"{prefix}s2")
    return topo
