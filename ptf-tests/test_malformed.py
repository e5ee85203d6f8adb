"""Malformed shims (unknown version or type, truncated) are forwarded as plain UDP at the default
class, never classified or selectively dropped, and counted per ingress port."""

from __future__ import annotations

import ptf.testutils as tu
from mlfc_base import MlfcTest, forwarded, shim_packet, truncated_shim
from scapy.layers.inet import UDP

from mlfc.policy.drop import DropPolicy
from mlfc.wire import SHIM_LEN, SHIM_VERSION, MlfcShim


class MalformedAreForwardedAndCounted(MlfcTest):
    def runTest(self) -> None:
        bad_version = shim_packet(0, 1, job=5, version=1)
        bad_type = shim_packet(0, 1, job=5, msg_type=9)
        short = [truncated_shim(2, 1, n) for n in (0, 1, 8, 15, SHIM_LEN - 1)]
        for p in [bad_version, bad_type]:
            self.send(0, p)
            tu.verify_packet(self, forwarded(p, 1), 1)
        for p in short:
            self.send(2, p)
            tu.verify_packet(self, forwarded(p, 1), 1)
        tu.verify_no_other_packets(self)
        self.assertEqual(self.sw.port_counter("shim_bad_header", 0), 2)
        self.assertEqual(self.sw.port_counter("shim_truncated", 2), len(short))
        self.assertEqual(self.sw.port_counter("shim_truncated", 0), 0)
        self.assertEqual(self.sw.job_counter("job_packets", 5)[0], 0, "malformed packets are never classified")


class MalformedNeverJumpTheQueue(MlfcTest):
    """A malformed shim claiming a high-class job goes to the default class, behind held traffic."""

    def runTest(self) -> None:
        self.sw.add_job_priority(2, 6)
        self.sw.cli("set_queue_rate 5 1 1")
        lows = [shim_packet(0, 1, job=1, seq=i) for i in range(10)]
        for p in lows:
            self.send(0, p)
        liar = shim_packet(0, 1, job=2, version=3, seq=99)
        self.send(0, liar)
        got = self.receive_all(1, len(lows) + 1, timeout=len(lows) / 5 + 5)
        self.assertEqual(len(got), len(lows) + 1)
        self.assertFalse(got[-1].haslayer(MlfcShim) and got[-1][MlfcShim].version == SHIM_VERSION)
        self.assertEqual(bytes(got[-1][UDP].payload)[:1], b"\x30", "the malformed packet left last, unmodified")


class MalformedAreNeverSelectivelyDropped(MlfcTest):
    def runTest(self) -> None:
        self.sw.set_drop_policy(DropPolicy(level_depths=(1, 2, 3), min_importance=(0, 8, 8, 8)))
        self.sw.cli("set_queue_depth 4096 1 1", "set_queue_rate 10 1 1")
        for i in range(10):
            self.send(0, shim_packet(0, 1, job=1, importance=15, seq=1000 + i))
        # Three leave: the level recorded is that of the queue behind the third (7 deep, level 3).
        left = self.receive_all(1, 3, timeout=3 / 10 + 5)
        liars = [shim_packet(0, 1, job=1, importance=0, version=v, seq=i) for i, v in enumerate((0, 1, 15))]
        for p in liars:
            self.send(0, p)
        got = left + self.receive_all(1, 10 + len(liars) - len(left), timeout=(10 + len(liars)) / 10 + 5)
        self.assertEqual(len(got), 10 + len(liars), "malformed packets are forwarded even under congestion")
