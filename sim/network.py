"""Builds the ns-3 network of a ``SimTopology``: nodes, point-to-point links, mlfc queues on switch
ports, FIFO queues on host NICs, addresses and ECMP routes."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from types import SimpleNamespace

from mlfc.sim.topology import SimTopology

# Switch-side interface addresses: one per switch port, from a range no host uses.
_SWITCH_NET = ipaddress.IPv4Network("172.16.0.0/12")


@dataclass(frozen=True)
class TcpSettings:
    """ns-3 TCP as the simulated hosts run it (Linux-like defaults where ns-3's differ)."""

    mss: int = 1448  # payload bytes per segment (1500 MTU - 52 bytes IP/TCP with timestamps)
    mtu: int = 1500
    snd_buf: int = 1 << 20  # ns-3's TCP send buffer is a list: a larger one costs much CPU per ACK
    rcv_buf: int = 8 << 20
    min_rto_s: float = 0.005  # data-centre tuning (Linux: 200 ms)
    initial_cwnd: int = 10  # segments, RFC 6928
    delayed_ack: int = 2  # ACK every second segment (ns-3's and Linux's default)
    delayed_ack_timeout_s: float = 10e-6  # a lone segment (a message's last) is ACKed after this (~1 RTT)
    ecn: bool = True  # ECT on data, classic ECN reaction (RFC 3168)
    restart_after_idle: bool = True  # RFC 5681 4.1, as Linux and mlfc's transport do

    def __post_init__(self) -> None:
        if not 536 <= self.mss <= self.mtu - 40:
            raise ValueError(f"mss={self.mss} must be in 536..mtu-40 ({self.mtu - 40})")
        if self.snd_buf < 4 * self.mss or self.rcv_buf < 4 * self.mss:
            raise ValueError("socket buffers must hold at least 4 segments")
        if not self.min_rto_s > 0 or self.initial_cwnd < 1 or self.delayed_ack < 1:
            raise ValueError("min_rto_s, initial_cwnd and delayed_ack must be positive")

    @property
    def packet_bytes(self) -> int:
        """Bytes on the wire of a full segment (IPv4 20 + TCP 20 + timestamps 12 + payload)."""
        return self.mss + 52

    def apply(self, ns: object) -> None:
        sd = ns.Config.SetDefault
        sd("ns3::TcpSocket::SegmentSize", ns.UintegerValue(self.mss))
        sd("ns3::TcpSocket::SndBufSize", ns.UintegerValue(self.snd_buf))
        sd("ns3::TcpSocket::RcvBufSize", ns.UintegerValue(self.rcv_buf))
        sd("ns3::TcpSocket::InitialCwnd", ns.UintegerValue(self.initial_cwnd))
        sd("ns3::TcpSocket::DelAckCount", ns.UintegerValue(self.delayed_ack))
        sd("ns3::TcpSocket::DelAckTimeout", ns.TimeValue(ns.Seconds(self.delayed_ack_timeout_s)))
        sd("ns3::TcpSocketBase::MinRto", ns.TimeValue(ns.Seconds(self.min_rto_s)))
        sd("ns3::TcpSocketBase::ClockGranularity", ns.TimeValue(ns.MicroSeconds(1)))
        sd("ns3::TcpSocketBase::UseEcn", ns.StringValue("On" if self.ecn else "Off"))


class Network:
    """The ns-3 objects of one run; ``tables[switch]`` is the switch's ``SwitchTables``."""

    def __init__(
        self,
        env: SimpleNamespace,
        topo: SimTopology,
        tcp: TcpSettings,
        queue_limit: int,
        host_queue: int = 10_000,
        seed: int = 1,
    ) -> None:
        ns, m = env.ns, env.mlfc
        self.topo = topo
        self.env = env
        tcp.apply(ns)
        ns.RngSeedManager.SetSeed(max(1, seed))
        names = topo.nodes()
        container = ns.NodeContainer()
        container.Create(len(names))
        self.nodes = {n: container.Get(i) for i, n in enumerate(names)}
        self._container = container
        self._routing_helper = m.MlfcRoutingHelper()
        stack = ns.InternetStackHelper()
        stack.SetRoutingHelper(self._routing_helper)
        stack.Install(container)
        self.tables = {sw: m.SwitchTables() for sw in topo.topology.switches}
        self.queues: dict[tuple[str, int], object] = {}  # (switch, port) -> MlfcQueueDisc
        self.link_of_queue: dict[tuple[str, int], int] = {}
        self.iface: dict[tuple[str, int], int] = {}  # (node, port) -> ns-3 interface index
        self.addr: dict[tuple[str, int], int] = {}  # (node, port) -> IPv4 as int
        self._devices = []
        switch_ips = iter(_SWITCH_NET.hosts())
        p2p = ns.PointToPointHelper()
        # Two packets in the NIC ring: the backlog stays in the queue discs, where mlfc's policy acts.
        p2p.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", ns.StringValue("2p"))
        p2p.SetDeviceAttribute("Mtu", ns.UintegerValue(tcp.mtu))
        for i, lk in enumerate(topo.topology.links):
            p2p.SetDeviceAttribute("DataRate", ns.DataRateValue(ns.DataRate(int(topo.rates[i]))))
            p2p.SetChannelAttribute("Delay", ns.TimeValue(ns.Seconds(topo.delays[i])))
            devs = p2p.Install(self.nodes[lk.a], self.nodes[lk.b])
            self._devices.append(devs)
            for end, (node, port) in enumerate(((lk.a, lk.a_port), (lk.b, lk.b_port))):
                dev = devs.Get(end)
                if node in topo.topology.hosts:
                    ip = int(ipaddress.IPv4Address(topo.topology.hosts[node].ip))
                    m.InstallHostQueue(dev, host_queue)
                else:
                    ip = int(next(switch_ips))
                    q = m.InstallSwitchQueue(dev, self.tables[node], port, queue_limit, seed * 7919 + i * 2 + end)
                    self.queues[(node, port)] = q
                    self.link_of_queue[(node, port)] = i
                self.iface[(node, port)] = m.AddInterface(self.nodes[node], dev, ip, 0xFFFFFFFF)
                self.addr[(node, port)] = ip
        self._route(seed)

    def _route(self, seed: int) -> None:
        m = self.env.mlfc
        adj = self.topo.adjacency()
        peer: dict[tuple[str, int], tuple[str, int]] = {}
        for node, ports in adj.items():
            for port, neigh, neigh_port, _ in ports:
                peer[(node, port)] = (neigh, neigh_port)
        for node, dests in self.topo.next_hops().items():
            routing = m.RoutingOf(self.nodes[node])
            routing.seed = seed
            for dst, hops in dests.items():
                dst_ip = int(ipaddress.IPv4Address(self.topo.topology.hosts[dst].ip))
                for port, _neigh, _li in hops:
                    routing.AddRoute(dst_ip, self.iface[(node, port)], self.addr[peer[(node, port)]])

    def host_ip(self, host: str) -> str:
        return self.topo.topology.hosts[host].ip
