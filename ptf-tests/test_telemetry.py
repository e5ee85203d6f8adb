"""In-band queue telemetry (docs/wire-format.md): a tagged DATA packet leaves with the deepest egress queue of
its path in bytes (this switch's enqueue depth in packets of 1500 bytes, mlfc.policy.depth.PACKETS) and the
rate class of the port where it was met, kept when an earlier hop's queue was deeper; a non-zero UDP checksum
is updated to stay right; ACKs (the receiver's echo) and CNPs pass untouched.

The queue test slows one priority queue of port 1 as test_ecn does: packet i found at most i packets and at
least i less those that may have left (RATE_PPS x its send time + 1) queued."""

from __future__ import annotations

import math
import time

import ptf.testutils as tu
from mlfc_base import MlfcTest, forwarded, shim_packet
from scapy.layers.inet import UDP
from scapy.layers.l2 import Ether

from mlfc.policy.depth import PACKETS
from mlfc.policy.telemetry import rate_class
from mlfc.wire import MlfcShim, MsgType

RATE_PPS = 20
LINK_BPS = 12e6
CLASS = rate_class(LINK_BPS)


def udp_checksum_ok(pkt: Ether) -> bool:
    fresh = pkt.copy()
    del fresh[UDP].chksum
    return Ether(bytes(fresh))[UDP].chksum == pkt[UDP].chksum


class IdlePortWritesItsRateClassAndAnEmptyQueue(MlfcTest):
    def runTest(self) -> None:
        self.sw.set_port_rate(1, LINK_BPS)
        plain = shim_packet(0, 1, job=1, seq=1)
        checked = shim_packet(0, 1, job=1, seq=2, udp_checksum=True, rate_class=3)
        for pkt in (plain, checked):
            self.send(0, pkt)
            tu.verify_packet(self, forwarded(pkt, 1, telemetry=(CLASS, 0)), 1)
        deeper = shim_packet(0, 1, job=1, seq=3, udp_checksum=True, rate_class=9, queue_bytes=1)
        self.send(0, deeper)  # an earlier hop's queue of 1 byte is deeper than this empty one: kept
        tu.verify_packet(self, forwarded(deeper, 1), 1)
        unrated = shim_packet(0, 2, job=1, seq=4, rate_class=5)
        self.send(0, unrated)  # no rate configured for port 2: its route carries class 0, unknown
        tu.verify_packet(self, forwarded(unrated, 2, telemetry=(0, 0)), 2)
        for msg in (MsgType.ACK, MsgType.CNP):  # the receiver's echo and a notification: as sent
            pkt = shim_packet(0, 1, job=1, msg_type=msg, udp_checksum=True, rate_class=7, queue_bytes=99, ecn=0)
            self.send(0, pkt)
            tu.verify_packet(self, forwarded(pkt, 1), 1)
        tu.verify_no_other_packets(self)


class QueuedPacketsCarryTheDepthTheyFound(MlfcTest):
    def runTest(self) -> None:
        self.sw.set_port_rate(1, LINK_BPS)
        n = 40
        self.sw.cli(f"set_queue_depth {n + 64} 1 1", f"set_queue_rate {RATE_PPS} 1 1")
        big = 1 << 30  # carried from an earlier, deeper hop: every fourth packet
        pkts = [
            shim_packet(0, 1, job=1, seq=i, udp_checksum=True, queue_bytes=big if i % 4 == 3 else 0) for i in range(n)
        ]
        t0 = time.monotonic()
        drained = []
        for p in pkts:
            drained.append(math.ceil(RATE_PPS * (time.monotonic() - t0)) + 1)
            self.send(0, p)
        got = self.shims_received(1, n, timeout=n / RATE_PPS + 10)
        self.assertEqual(len(got), n)
        got.sort(key=lambda p: p[MlfcShim].chunk_seq)
        deepest = 0
        for i, p in enumerate(got):
            shim = p[MlfcShim]
            self.assertTrue(udp_checksum_ok(p), f"packet {i}: UDP checksum")
            if i % 4 == 3:
                self.assertEqual((shim.rate_class, shim.queue_bytes), (0, big), f"packet {i}: the deeper hop's")
                continue
            self.assertEqual(shim.rate_class, CLASS)
            self.assertEqual(shim.queue_bytes % PACKETS.unit_bytes, 0, "whole packets of 1500 bytes")
            found = shim.queue_bytes // PACKETS.unit_bytes
            self.assertLessEqual(found, i, f"packet {i} cannot find more than {i} queued")
            self.assertGreaterEqual(found, i - drained[i], f"packet {i} found fewer than were left")
            deepest = max(deepest, found)
        self.assertGreater(deepest, 20, "the burst must build a queue")
