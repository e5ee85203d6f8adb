"""Classification: the shim names the job; untagged flows get theirs from 5-tuple entries.
Checked through the per-job packet and byte counters."""

from __future__ import annotations

import ptf.testutils as tu
from mlfc_base import HOST_IP, MlfcTest, forwarded, shim_packet, tcp_packet


class ShimJobIsCounted(MlfcTest):
    def runTest(self) -> None:
        pkts = [shim_packet(0, 1, job=21, seq=i, size=150 + i) for i in range(5)]
        for p in pkts:
            self.send(0, p)
            tu.verify_packet(self, forwarded(p, 1), 1)
        self.assertEqual(self.sw.job_counter("job_packets", 21), (5, sum(len(p) for p in pkts)))


class FiveTupleFlowGetsItsJob(MlfcTest):
    def runTest(self) -> None:
        self.sw.add_flow(42, src=HOST_IP[0], dst=HOST_IP[1], protocol=6, dst_port=5001)
        matching = [tcp_packet(0, 1, 40000 + i, 5001, size=300) for i in range(4)]
        other_port = tcp_packet(0, 1, 40000, 5002)
        other_host = tcp_packet(2, 1, 40000, 5001)
        # One at a time: packets from different ingress ports may leave in either order, and
        # verify_packet discards whatever it sees before the packet it waits for.
        for p in [*matching, other_port, other_host]:
            self.send(0 if p is not other_host else 2, p)
            tu.verify_packet(self, forwarded(p, 1), 1)
        self.assertEqual(self.sw.job_counter("job_packets", 42), (4, sum(len(p) for p in matching)))
        self.assertEqual(self.sw.job_counter("job_packets", 0)[0], 2, "unmatched flows count at index 0 (no job)")


class WildcardFlowAndLargeJobIds(MlfcTest):
    def runTest(self) -> None:
        self.sw.add_flow(7, dst=HOST_IP[2])
        for i in range(3):
            p = tcp_packet(0, 2, 1000 + i, 80)
            self.send(0, p)
            tu.verify_packet(self, forwarded(p, 2), 2)
        self.assertEqual(self.sw.job_counter("job_packets", 7)[0], 3)
        # Job ids beyond the counter array share index 0 ("untracked").
        big = shim_packet(0, 1, job=60000)
        self.send(0, big)
        tu.verify_packet(self, forwarded(big, 1), 1)
        self.assertEqual(self.sw.job_counter("job_packets", 0)[0], 1)
