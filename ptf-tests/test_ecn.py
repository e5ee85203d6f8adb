"""ECN marking with the DCQCN profile, checked against mlfc.policy.ecn.

To know the queue depth each packet saw, the test holds the queue still: port 1's priority-1
queue drains at 1 packet/s while a burst is sent, so packet i of the burst is enqueued behind
about i packets (minus the few that left meanwhile, at most DRAINED_SLACK). Then the queue is
opened and every packet collected in FIFO order.
"""

from __future__ import annotations

import math

from mlfc_base import MlfcTest, shim_packet
from scapy.layers.inet import IP

from mlfc.policy.ecn import EcnProfile, mark_probability
from mlfc.wire import MlfcShim

DRAINED_SLACK = 4  # packets that may leave the 1 pps queue while a burst is being sent


class _HeldQueue(MlfcTest):
    def hold(self, depth: int) -> None:
        self.sw.cli(f"set_queue_depth {depth} 1 1", "set_queue_rate 1 1 1")

    def release(self) -> None:
        self.sw.cli("set_queue_rate 1000000 1 1")

    def burst(self, pkts: list) -> list:
        self.hold(len(pkts) + 64)
        for p in pkts:
            self.send(0, p)
        self.release()
        got = self.shims_received(1, len(pkts), timeout=30)
        self.assertEqual(len(got), len(pkts), "every packet of the burst is delivered")
        got.sort(key=lambda p: p[MlfcShim].chunk_seq)
        return got


def is_ce(pkt) -> bool:
    return pkt[IP].tos & 3 == 3


class AboveKmaxEveryEctIsMarkedAndNeverNonEct(_HeldQueue):
    def runTest(self) -> None:
        profile = EcnProfile(kmin=2, kmax=5, pmax=0.5)
        self.sw.set_ecn_profile(1, profile)
        pkts = [shim_packet(0, 1, job=1, seq=i, ecn=2 if i % 2 == 0 else 0) for i in range(40)]
        got = self.burst(pkts)
        for i, p in enumerate(got):
            if i % 2 == 1:
                self.assertFalse(is_ce(p), f"non-ECT packet {i} was marked")
            elif i > profile.kmax + DRAINED_SLACK:
                self.assertTrue(is_ce(p), f"ECT packet {i} above Kmax was not marked")
            elif i <= profile.kmin:
                self.assertFalse(is_ce(p), f"ECT packet {i} at or below Kmin was marked")
        marked = sum(is_ce(p) for p in got)
        self.assertEqual(self.sw.job_counter("job_ecn_marks", 1)[0], marked, "mark counter equals marks seen")


class BelowKminNothingIsMarked(MlfcTest):
    def runTest(self) -> None:
        self.sw.set_ecn_profile(1, EcnProfile(kmin=20, kmax=40, pmax=1.0))
        pkts = [shim_packet(0, 1, job=1, seq=i) for i in range(60)]
        for p in pkts:
            self.send(0, p)
        got = self.shims_received(1, len(pkts))
        self.assertEqual(len(got), len(pkts))
        self.assertEqual(sum(is_ce(p) for p in got), 0)
        self.assertEqual(self.sw.job_counter("job_ecn_marks", 1)[0], 0)


class MarkedFractionFollowsTheProfile(_HeldQueue):
    """Between Kmin and Kmax the number of marks must lie within 4 standard deviations (binomial)
    of what the profile predicts for the depths the packets saw."""

    def runTest(self) -> None:
        profile = EcnProfile(kmin=50, kmax=650, pmax=0.4)
        self.sw.set_ecn_profile(1, profile)
        n = profile.kmax + 1
        got = self.burst([shim_packet(0, 1, job=1, seq=i, size=100) for i in range(n)])
        band = [(i, p) for i, p in enumerate(got) if profile.kmin + DRAINED_SLACK < i <= profile.kmax]
        marks = sum(is_ce(p) for _, p in band)
        # The depth packet i saw lies in [i - DRAINED_SLACK, i]; the expectation is bracketed by both ends.
        lo = sum(mark_probability(profile, i - DRAINED_SLACK) for i, _ in band)
        hi = sum(mark_probability(profile, i) for i, _ in band)
        sigma = math.sqrt(sum(mark_probability(profile, i) * (1 - mark_probability(profile, i)) for i, _ in band))
        print(f"marks {marks} of {len(band)}; expected {lo:.1f}..{hi:.1f}, sigma {sigma:.1f}")
        self.assertGreaterEqual(marks, lo - 4 * sigma)
        self.assertLessEqual(marks, hi + 4 * sigma)
