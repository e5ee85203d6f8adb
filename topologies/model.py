"""Topologies as data: hosts, switches, links, and the static routes they imply.

The same description feeds the Mininet builder (which creates the network), the controller's
deployment file (routes per switch), the simulator (mlfc.sim.topology.from_lab) and the scenarios
(which host plays which role).
"""

from __future__ import annotations

import ipaddress
from collections import deque
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Host:
    name: str
    ip: str
    mac: str
    job: int = 0  # the training job the host works for (0: none)
    role: str = "worker"  # worker | ps


@dataclass(frozen=True)
class Switch:
    name: str
    device_id: int

    def port_mac(self, port: int) -> str:
        return f"00:aa:bb:{self.device_id:02x}:{port >> 8:02x}:{port & 0xFF:02x}"


@dataclass(frozen=True)
class Link:
    """``a`` port ``a_port`` <-> ``b`` port ``b_port`` (port 0 for hosts, which have one interface)."""

    a: str
    a_port: int
    b: str
    b_port: int
    bottleneck: bool = False


@dataclass(frozen=True)
class Route:
    prefix: str
    port: int
    src_mac: str
    dst_mac: str


@dataclass
class Topology:
    name: str
    hosts: dict[str, Host] = field(default_factory=dict)
    switches: dict[str, Switch] = field(default_factory=dict)
    links: list[Link] = field(default_factory=list)
    # (switch, destination host) -> neighbour switch: a route that is not the shortest path (e.g. the
    # ring of ``circular_ring``, where a job's push and pull take opposite directions around the ring).
    forced_next: dict[tuple[str, str], str] = field(default_factory=dict)

    def add_host(self, host: Host) -> Host:
        self.hosts[host.name] = host
        return host

    def add_switch(self, name: str) -> Switch:
        sw = Switch(name, device_id=len(self.switches) + 1)
        self.switches[name] = sw
        return sw

    def next_port(self, switch: str) -> int:
        used = [lk.a_port for lk in self.links if lk.a == switch] + [lk.b_port for lk in self.links if lk.b == switch]
        return max(used, default=0) + 1

    def connect(self, a: str, b: str, bottleneck: bool = False) -> Link:
        a_port = 0 if a in self.hosts else self.next_port(a)
        b_port = 0 if b in self.hosts else self.next_port(b)
        link = Link(a, a_port, b, b_port, bottleneck)
        self.links.append(link)
        return link

    def neighbours(self, node: str) -> list[tuple[int, str, int]]:
        """(own port, neighbour, neighbour's port) for every link of ``node``."""
        out = []
        for lk in self.links:
            if lk.a == node:
                out.append((lk.a_port, lk.b, lk.b_port))
            elif lk.b == node:
                out.append((lk.b_port, lk.a, lk.a_port))
        return out

    def switch_ports(self, switch: str) -> dict[int, str]:
        """Switch port number -> Mininet interface name (``s1-eth3`` for port 3)."""
        return {port: f"{switch}-eth{port}" for port, _, _ in self.neighbours(switch)}

    def routes(self, switch: str) -> list[Route]:
        """A /32 route for every host, along a shortest path (ties: lowest port)."""
        sw = self.switches[switch]
        routes = []
        for host in self.hosts.values():
            first_hop = self._first_hop(switch, host.name)
            port, neigh, neigh_port = first_hop
            dst_mac = host.mac if neigh in self.hosts else self.switches[neigh].port_mac(neigh_port)
            routes.append(Route(f"{host.ip}/32", port, sw.port_mac(port), dst_mac))
        return routes

    def _first_hop(self, src: str, dst: str) -> tuple[int, str, int]:
        forced = self.forced_next.get((src, dst))
        if forced is not None:
            return next(hop for hop in sorted(self.neighbours(src)) if hop[1] == forced)
        seen = {src}
        queue: deque[tuple[str, tuple[int, str, int] | None]] = deque([(src, None)])
        while queue:
            node, first = queue.popleft()
            for port, neigh, neigh_port in sorted(self.neighbours(node)):
                if neigh in seen or (neigh in self.hosts and neigh != dst):
                    continue
                hop = first or (port, neigh, neigh_port)
                if neigh == dst:
                    return hop
                seen.add(neigh)
                queue.append((neigh, hop))
        raise ValueError(f"no path from {src} to {dst}")

    def bottleneck_ports(self) -> list[tuple[str, int]]:
        """(switch, port) on both ends of every bottleneck link: rate-limited in both directions."""
        out = []
        for lk in self.links:
            if lk.bottleneck:
                out += [(n, p) for n, p in ((lk.a, lk.a_port), (lk.b, lk.b_port)) if n in self.switches]
        return out

    def job_hosts(self, job: int) -> list[Host]:
        return [h for h in self.hosts.values() if h.job == job]


def place_host(topo: Topology, job: int, role: str, index: int) -> Host:
    """Add the host of ``job`` playing ``role`` (its ``index``-th worker, or the PS at 100) with the
    address plan every topology shares: 10.0.<job>.<index + 1>, names j<job>w<index> / j<job>ps."""
    n = len(topo.hosts) + 1
    ip = ipaddress.IPv4Address("10.0.0.0") + (job << 8) + index + 1
    name = f"j{job}ps" if role == "ps" else f"j{job}w{index}"
    return topo.add_host(Host(name, str(ip), f"00:00:00:00:{n >> 8:02x}:{n & 0xFF:02x}", job, role))
