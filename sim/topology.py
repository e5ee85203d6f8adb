"""Fabrics for the simulator: the emulation's topology data (``mlfc.topologies``) with link rates
and delays, leaf-spine generators, and the equal-cost next hops ECMP chooses among.

Pure Python (no ns-3): the generators and the routing are tested without the simulator.
"""

from __future__ import annotations

import ipaddress
import math
from collections import deque
from dataclasses import dataclass, field

from mlfc.sim.lab import Host, Link, Topology

GBPS = 1e9


@dataclass
class SimTopology:
    """``topology.links[i]`` runs at ``rates[i]`` bits/s each way with ``delays[i]`` seconds of propagation."""

    topology: Topology
    rates: list[float] = field(default_factory=list)
    delays: list[float] = field(default_factory=list)
    description: str = ""

    def __post_init__(self) -> None:
        n = len(self.topology.links)
        if len(self.rates) != n or len(self.delays) != n:
            raise ValueError(f"{n} links but {len(self.rates)} rates and {len(self.delays)} delays")
        for i, (r, d) in enumerate(zip(self.rates, self.delays, strict=True)):
            if not (math.isfinite(r) and r > 0):
                raise ValueError(f"link {i} ({self.link_name(i)}): rate {r!r} must be a positive number of bits/s")
            if not (math.isfinite(d) and d >= 0):
                raise ValueError(f"link {i} ({self.link_name(i)}): delay {d!r} must be >= 0 seconds")

    @property
    def name(self) -> str:
        return self.topology.name

    @property
    def hosts(self) -> dict[str, Host]:
        return self.topology.hosts

    def link_name(self, i: int) -> str:
        lk = self.topology.links[i]
        return f"{lk.a}-{lk.b}"

    def host_link(self, host: str) -> int:
        for i, lk in enumerate(self.topology.links):
            if host in (lk.a, lk.b):
                return i
        raise ValueError(f"host {host} has no link")

    def adjacency(self) -> dict[str, list[tuple[int, str, int, int]]]:
        """node -> [(own port, neighbour, neighbour's port, link index)], sorted by port."""
        adj: dict[str, list[tuple[int, str, int, int]]] = {n: [] for n in self.nodes()}
        for i, lk in enumerate(self.topology.links):
            adj[lk.a].append((lk.a_port, lk.b, lk.b_port, i))
            adj[lk.b].append((lk.b_port, lk.a, lk.a_port, i))
        for v in adj.values():
            v.sort()
        return adj

    def nodes(self) -> list[str]:
        return list(self.topology.hosts) + list(self.topology.switches)

    def next_hops(self) -> dict[str, dict[str, list[tuple[int, str, int]]]]:
        """node -> destination host -> every (port, neighbour, link) on a shortest path (ECMP's choices).

        Hosts never forward: paths go through switches only.
        """
        adj = self.adjacency()
        out: dict[str, dict[str, list[tuple[int, str, int]]]] = {n: {} for n in adj}
        for dst in self.topology.hosts:
            dist = {dst: 0}
            queue = deque([dst])
            while queue:
                node = queue.popleft()
                if node != dst and node in self.topology.hosts:
                    continue  # a host is an end point, not a transit node
                for _, neigh, _, _ in adj[node]:
                    if neigh not in dist:
                        dist[neigh] = dist[node] + 1
                        queue.append(neigh)
            for node, d in dist.items():
                if node == dst:
                    continue
                hops = [
                    (port, neigh, li)
                    for port, neigh, _, li in adj[node]
                    if dist.get(neigh) == d - 1 and (neigh == dst or neigh not in self.topology.hosts)
                ]
                if hops:
                    out[node][dst] = hops
        return out

    def paths(self, src: str, dst: str) -> list[list[tuple[str, str]]]:
        """Every shortest path from ``src`` to ``dst`` as directed hops (from, to)."""
        nh = self.next_hops()
        if dst not in nh[src]:
            raise ValueError(f"no path from {src} to {dst}")
        out: list[list[tuple[str, str]]] = []

        def walk(node: str, acc: list[tuple[str, str]]) -> None:
            if node == dst:
                out.append(acc)
                return
            for _, neigh, _ in nh[node][dst]:
                walk(neigh, [*acc, (node, neigh)])

        walk(src, [])
        return out


def from_lab(
    topo: Topology,
    link_rate_bps: float,
    bottleneck_rate_bps: float | None = None,
    delay_s: float = 1e-6,
) -> SimTopology:
    """The emulation's topology data (spec.dumbbell, spec.leaf_spine): every link at ``link_rate_bps``,
    links marked ``bottleneck`` at ``bottleneck_rate_bps`` (the emulation's ``set_queue_rate``)."""
    rates = [
        bottleneck_rate_bps if (lk.bottleneck and bottleneck_rate_bps is not None) else link_rate_bps
        for lk in topo.links
    ]
    return SimTopology(topo, rates, [delay_s] * len(topo.links), f"{topo.name} (from the lab's topology data)")


def leaf_spine(
    leaves: int = 4,
    spines: int = 2,
    hosts_per_leaf: int = 4,
    host_rate_bps: float = 100 * GBPS,
    oversubscription: float = 1.0,
    delay_s: float = 1e-6,
) -> SimTopology:
    """``leaves`` x ``spines`` fabric, every leaf linked to every spine, ``hosts_per_leaf`` hosts per leaf.

    Oversubscription is host capacity over uplink capacity per leaf: each uplink runs at
    ``hosts_per_leaf * host_rate / (spines * oversubscription)``. Hosts are ``l<leaf>h<i>`` with address
    10.<leaf>.0.<i>; they carry no job (scenarios place jobs on them by name).
    """
    if leaves < 2 or spines < 1 or hosts_per_leaf < 1:
        raise ValueError(
            f"leaf-spine needs >= 2 leaves, >= 1 spine, >= 1 host per leaf (got {leaves}x{spines}, "
            f"{hosts_per_leaf} hosts per leaf)"
        )
    if not (math.isfinite(oversubscription) and oversubscription > 0):
        raise ValueError(f"oversubscription={oversubscription!r} must be a positive ratio (1 = non-blocking)")
    if leaves > 250 or hosts_per_leaf > 250:
        raise ValueError("at most 250 leaves and 250 hosts per leaf (addresses are 10.<leaf>.0.<host>)")
    uplink = hosts_per_leaf * host_rate_bps / (spines * oversubscription)
    topo = Topology(f"leafspine-{leaves}x{spines}-{leaves * hosts_per_leaf}h-os{oversubscription:g}")
    leaf_names = [topo.add_switch(f"leaf{i + 1}").name for i in range(leaves)]
    spine_names = [topo.add_switch(f"spine{i + 1}").name for i in range(spines)]
    rates: list[float] = []
    for leaf in leaf_names:
        for spine in spine_names:
            topo.connect(leaf, spine, bottleneck=True)
            rates.append(uplink)
    n = 0
    for li, leaf in enumerate(leaf_names):
        for h in range(hosts_per_leaf):
            n += 1
            ip = ipaddress.IPv4Address(f"10.{li + 1}.0.{h + 1}")
            host = topo.add_host(Host(f"l{li + 1}h{h + 1}", str(ip), f"00:00:00:00:{n >> 8:02x}:{n & 0xFF:02x}"))
            topo.connect(host.name, leaf)
            rates.append(host_rate_bps)
    desc = (
        f"{leaves} leaves x {spines} spines, {leaves * hosts_per_leaf} hosts at {host_rate_bps / GBPS:g} Gb/s, "
        f"uplinks {uplink / GBPS:g} Gb/s (oversubscription {oversubscription:g}:1), ECMP"
    )
    return SimTopology(topo, rates, [delay_s] * len(topo.links), desc)


def leaf_of(topo: SimTopology, host: str) -> str:
    """The switch a host is attached to."""
    lk: Link = topo.topology.links[topo.host_link(host)]
    return lk.b if lk.a == host else lk.a
