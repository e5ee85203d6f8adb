"""The deployment's layout: one training job's hosts on a switch, plus a control host, all on a management
network (docs/deploy.md).

The data network is a ``Topology`` like the lab's (hosts, the switch, the routes the controller installs); a
real cluster adds what the lab's single machine never needed: a management network over which the agents
reach the coordinator and the controller reaches each switch's P4Runtime server, so every daemon talks to
another host's address and the APIs leave loopback (over TLS). ``make deploy-test`` builds this layout in
network namespaces from the same description.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from mlfc.topologies.model import Topology, place_host

CONTROL_HOST = "ctl"  # the host running the coordinator and the controller
MANAGEMENT_NET = ipaddress.IPv4Network("10.10.0.0/24")


@dataclass(frozen=True)
class Cluster:
    """The data network, the control host's name and every node's management address."""

    topology: Topology
    control: str
    management: dict[str, str]  # node (control host, switch, training host) -> management IPv4

    def nodes(self) -> list[str]:
        return list(self.management)

    def training_hosts(self) -> list[str]:
        return list(self.topology.hosts)


def cluster(workers: int = 2, job: int = 1) -> Cluster:
    """One job of ``workers`` workers and its parameter server, each on its own host, all on switch ``s1``;
    the control host ``ctl`` holds the coordinator and the controller. Management addresses: ctl .1, the
    switch .2, the training hosts from .11 in the order they join."""
    if workers < 1:
        raise ValueError("a cluster needs at least one worker")
    topo = Topology(f"cluster-1x{workers}")
    topo.add_switch("s1")
    for role, index in [("worker", w) for w in range(workers)] + [("ps", 100)]:
        topo.connect(place_host(topo, job, role, index).name, "s1")
    hosts = MANAGEMENT_NET.hosts()
    management = {CONTROL_HOST: str(next(hosts)), "s1": str(next(hosts))}
    first_host = MANAGEMENT_NET.network_address + 11
    for i, name in enumerate(topo.hosts):
        management[name] = str(first_host + i)
    return Cluster(topo, CONTROL_HOST, management)
