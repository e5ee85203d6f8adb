"""A ``Cluster`` in network namespaces: one namespace per node (control host, switch, training hosts), a
management network bridged in a namespace of its own, and the data network's veths from each training host
to its switch port. Nothing is left in the root namespace: deleting the namespaces removes every device.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from mlfc.testing.netns import in_netns
from mlfc.testing.veth import quiet_interface, run
from mlfc.topologies.cluster import MANAGEMENT_NET, Cluster

DATA_PREFIX = 24  # every training host shares the job's /24 (10.0.<job>.0/24)


@dataclass(frozen=True)
class ClusterNamespaces:
    cluster: Cluster
    prefix: str

    def netns(self, node: str) -> str:
        return f"{self.prefix}{node}"

    def exec_prefix(self, node: str) -> list[str]:
        return ["ip", "netns", "exec", self.netns(node)]

    def interface(self, switch: str, port: int) -> str:
        """The switch-side device of ``port`` inside the switch's namespace."""
        return f"eth{port}"

    def reachable(self, node: str, address: str, port: int, timeout_s: float = 0.3) -> bool:
        """Whether ``node`` can open a TCP connection to address:port (a listener is up)."""

        def probe() -> bool:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.settimeout(timeout_s)
                return s.connect_ex((address, port)) == 0

        return in_netns(self.netns(node), probe)


@contextmanager
def cluster_namespaces(cluster: Cluster, tag: str = "dep") -> Iterator[ClusterNamespaces]:
    """Build the cluster's namespaces and links; delete them on exit, whatever happened."""
    prefix = f"m{tag}{os.getpid() % 100000}-"
    net = ClusterNamespaces(cluster, prefix)
    made: list[str] = []
    try:
        for name in ["mgmt", *cluster.nodes()]:
            run("ip", "netns", "add", net.netns(name))
            made.append(net.netns(name))
            run("ip", "-n", net.netns(name), "link", "set", "lo", "up")
        _management(net)
        _data(net)
        yield net
    finally:
        for name in reversed(made):
            run("ip", "netns", "del", name, check=False)


def _management(net: ClusterNamespaces) -> None:
    """A bridge in the mgmt namespace, one veth from each node to it: every node reaches every other one."""
    mgmt = net.netns("mgmt")
    run("ip", "-n", mgmt, "link", "add", "br0", "type", "bridge")
    run("ip", "-n", mgmt, "link", "set", "br0", "up")
    for i, (node, address) in enumerate(net.cluster.management.items()):
        ns, port = net.netns(node), f"p{i}"
        run("ip", "link", "add", "mgmt0", "netns", ns, "type", "veth", "peer", "name", port, "netns", mgmt)
        run("ip", "-n", mgmt, "link", "set", port, "master", "br0")
        run("ip", "-n", mgmt, "link", "set", port, "up")
        run("ip", "-n", ns, "addr", "add", f"{address}/{MANAGEMENT_NET.prefixlen}", "dev", "mgmt0")
        run("ip", "-n", ns, "link", "set", "mgmt0", "up")


def _data(net: ClusterNamespaces) -> None:
    """Each training host's eth0 (its MAC and address from the topology) to its switch port, offloads off
    (the switch sees what a NIC would put on the wire), static ARP for the job's other hosts."""
    topo = net.cluster.topology
    for link in topo.links:
        host, switch, port = (link.a, link.b, link.b_port) if link.a in topo.hosts else (link.b, link.a, link.a_port)
        h_ns, s_ns, dev = net.netns(host), net.netns(switch), net.interface(switch, port)
        run("ip", "link", "add", "eth0", "netns", h_ns, "type", "veth", "peer", "name", dev, "netns", s_ns)
        run("ip", "-n", h_ns, "link", "set", "eth0", "address", topo.hosts[host].mac)
        run("ip", "-n", h_ns, "addr", "add", f"{topo.hosts[host].ip}/{DATA_PREFIX}", "dev", "eth0")
        quiet_interface("eth0", h_ns)
        quiet_interface(dev, s_ns)
    for name in topo.hosts:
        for other in topo.hosts.values():
            if other.name != name:
                run("ip", "-n", net.netns(name), "neigh", "replace", other.ip, "lladdr", other.mac, "dev", "eth0")


def wait_reachable(net: ClusterNamespaces, node: str, address: str, port: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not net.reachable(node, address, port):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{address}:{port} not reachable from {node} after {timeout_s:g} s")
        time.sleep(0.1)
