"""ECN marking with the DCQCN profile and the DCTCP step per (port, class), checked against
mlfc.policy.ecn.

To know the queue depth each packet saw, the test slows one priority queue of port 1 (class 1 unless
said otherwise) to RATE_PPS and sends a burst much faster than that, timing each send: packet i is
enqueued behind i packets less those that left before it, at most RATE_PPS x (its send time - the
burst's start) + 1. Every packet is then collected in FIFO order. (BMv2 stamps each packet's
departure time when it is enqueued, so a queue cannot be held and then released: a later rate change
does not reschedule queued packets.)
"""

from __future__ import annotations

import math
import time

from mlfc_base import MlfcTest, shim_packet
from scapy.layers.inet import IP

from mlfc.policy.ecn import EcnProfile, StepProfile, mark_probability
from mlfc.wire import MlfcShim

RATE_PPS = 20


class _SlowQueue(MlfcTest):
    def burst(self, pkts: list, priority: int = 1) -> tuple[list, list[int]]:
        """Send ``pkts`` (all of class ``priority``) into port 1's slowed queue of that class; return them
        as received (by sequence number) and, per packet, how many may have left the queue before it
        arrived."""
        self.sw.cli(f"set_queue_depth {len(pkts) + 64} 1 {priority}", f"set_queue_rate {RATE_PPS} 1 {priority}")
        t0 = time.monotonic()
        drained = []
        for p in pkts:
            drained.append(math.ceil(RATE_PPS * (time.monotonic() - t0)) + 1)
            self.send(0, p)
        got = self.shims_received(1, len(pkts), timeout=len(pkts) / RATE_PPS + 10)
        self.assertEqual(len(got), len(pkts), "every packet of the burst is delivered")
        got.sort(key=lambda p: p[MlfcShim].chunk_seq)
        return got, drained


def is_ce(pkt) -> bool:
    return pkt[IP].tos & 3 == 3


class AboveKmaxEveryEctIsMarkedAndNeverNonEct(_SlowQueue):
    def runTest(self) -> None:
        profile = EcnProfile(kmin=2, kmax=5, pmax=0.5)
        self.sw.set_ecn_profile(1, profile)
        pkts = [shim_packet(0, 1, job=1, seq=i, ecn=2 if i % 2 == 0 else 0) for i in range(40)]
        got, drained = self.burst(pkts)
        checked_above = 0
        for i, p in enumerate(got):
            if i % 2 == 1:
                self.assertFalse(is_ce(p), f"non-ECT packet {i} was marked")
            elif i - drained[i] > profile.kmax:
                self.assertTrue(is_ce(p), f"ECT packet {i} above Kmax was not marked")
                checked_above += 1
            elif i <= profile.kmin:
                self.assertFalse(is_ce(p), f"ECT packet {i} at or below Kmin was marked")
        self.assertGreater(checked_above, 10, "the burst must build a queue above Kmax")
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


class MarkedFractionFollowsTheProfile(_SlowQueue):
    """Between Kmin and Kmax the number of marks must lie within 4 standard deviations (binomial)
    of what the profile predicts for the depths the packets saw."""

    def runTest(self) -> None:
        profile = EcnProfile(kmin=20, kmax=240, pmax=0.5)
        self.sw.set_ecn_profile(1, profile)
        n = profile.kmax + 1
        got, drained = self.burst([shim_packet(0, 1, job=1, seq=i, size=100) for i in range(n)])
        band = [(i, p) for i, p in enumerate(got) if profile.kmin < i - drained[i] and i <= profile.kmax]
        self.assertGreater(len(band), 150, "most of the burst must be enqueued between Kmin and Kmax")
        marks = sum(is_ce(p) for _, p in band)
        # The depth packet i saw lies in [i - drained[i], i]; the expectation is bracketed by both ends.
        lo = sum(mark_probability(profile, i - drained[i]) for i, _ in band)
        hi = sum(mark_probability(profile, i) for i, _ in band)
        sigma = math.sqrt(sum(mark_probability(profile, i) * (1 - mark_probability(profile, i)) for i, _ in band))
        print(f"marks {marks} of {len(band)}; expected {lo:.1f}..{hi:.1f}, sigma {sigma:.1f}")
        self.assertGreaterEqual(marks, lo - 4 * sigma)
        self.assertLessEqual(marks, hi + 4 * sigma)


class StepProfilePerClassMarksAboveKOnly(_SlowQueue):
    """The ecn_profile's priority key: on port 1, class 3 steps at K = 8,200 bytes (5 packets of 1500,
    rounded down) and class 1 at 15 packets, over a port profile that marks any queue (K = 0). Each class
    marks every ECT packet that finds more than its own K queued and none at or below it."""

    def runTest(self) -> None:
        self.sw.add_job_priority(2, 3)  # job 2 rides class 3; job 1 keeps the default class 1
        self.sw.set_ecn_profile(1, StepProfile(k_bytes=0))
        steps = {3: StepProfile(k_bytes=8_200), 1: StepProfile(k_bytes=15 * 1500)}
        for klass, profile in steps.items():
            self.sw.set_ecn_profile(1, profile, priority=klass)
        for job, klass in ((2, 3), (1, 1)):
            k = steps[klass].threshold()  # in packets (BMv2 and the reference switch count packets)
            got, drained = self.burst([shim_packet(0, 1, job=job, seq=i) for i in range(40)], klass)
            above = below = 0
            for i, p in enumerate(got):
                if i - drained[i] > k:
                    self.assertTrue(is_ce(p), f"class {klass}: packet {i} above K={k} packets was not marked")
                    above += 1
                elif i <= k:
                    self.assertFalse(is_ce(p), f"class {klass}: packet {i} at or below K={k} packets was marked")
                    below += 1
            self.assertGreater(above, 10, f"class {klass}: the burst must build a queue above K")
            self.assertEqual(below, k + 1)
            marked = sum(is_ce(p) for p in got)
            self.assertEqual(self.sw.job_counter("job_ecn_marks", job)[0], marked, "mark counter equals marks seen")
