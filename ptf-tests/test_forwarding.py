"""IPv4 forwarding: routing, MAC rewrite, TTL decrement, checksum; drops without a route or TTL."""

from __future__ import annotations

import ptf.testutils as tu
from mlfc_base import HOST_IP, HOST_MAC, SWITCH_MAC, MlfcTest, forwarded, shim_packet, tcp_packet
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether


class RoutedToEveryPort(MlfcTest):
    def runTest(self) -> None:
        for src in (0, 1, 2):
            for dst in (0, 1, 2):
                if src == dst:
                    continue
                pkt = tcp_packet(src, dst, 1234, 80)
                self.send(src, pkt)
                tu.verify_packet(self, forwarded(pkt, dst), dst)
        tu.verify_no_other_packets(self)


class ChecksumStaysValid(MlfcTest):
    def runTest(self) -> None:
        pkt = shim_packet(0, 2, job=3)
        self.send(0, pkt)
        got = self.receive_all(2, 1)
        self.assertEqual(len(got), 1)
        ip = got[0][IP]
        reported = ip.chksum
        del ip.chksum
        self.assertEqual(IP(bytes(ip)).chksum, reported, "IPv4 checksum after TTL decrement")
        self.assertEqual(ip.ttl, 63)


class DroppedWithoutRouteOrTtl(MlfcTest):
    def runTest(self) -> None:
        no_route = Ether(src=HOST_MAC[0], dst=SWITCH_MAC) / IP(src=HOST_IP[0], dst="10.9.9.9") / UDP() / (b"x" * 40)
        self.send(0, no_route)
        expiring = tcp_packet(0, 1, 1, 2)
        expiring[IP].ttl = 1
        self.send(0, expiring)
        self.send(0, Ether(src=HOST_MAC[0], dst="ff:ff:ff:ff:ff:ff") / ARP(pdst=HOST_IP[1]))
        tu.verify_no_other_packets(self, timeout=1)


class LongestPrefixWins(MlfcTest):
    def runTest(self) -> None:
        self.sw.add_route("10.1.0.0/16", 1, SWITCH_MAC, HOST_MAC[1])
        self.sw.add_route("10.1.2.0/24", 2, SWITCH_MAC, HOST_MAC[2])
        for dst, port in (("10.1.9.9", 1), ("10.1.2.3", 2)):
            pkt = Ether(src=HOST_MAC[0], dst=SWITCH_MAC) / IP(src=HOST_IP[0], dst=dst) / UDP(dport=9) / (b"y" * 40)
            self.send(0, pkt)
            exp = pkt.copy()
            exp[Ether].src, exp[Ether].dst = SWITCH_MAC, HOST_MAC[port]
            exp[IP].ttl -= 1
            del exp[IP].chksum
            tu.verify_packet(self, Ether(bytes(exp)), port)
        tu.verify_no_other_packets(self)
