"""Selective dropping of low-importance gradients under congestion, checked against
mlfc.policy.drop. Congestion is made by slowing port 1's priority-1 queue and filling it with a
backlog of protected packets; egress records the level as packets leave, ingress drops by it."""

from __future__ import annotations

import time

from mlfc_base import HOST_IP, MlfcTest, shim_packet, tcp_packet

from mlfc.policy.drop import DropPolicy, congestion_level, should_drop
from mlfc.wire import IMPORTANCE_LEVELS, MlfcShim, MsgType

POLICY = DropPolicy(level_depths=(4, 8, 12), min_importance=(0, 2, 4, 8))


class _Congested(MlfcTest):
    rate_pps = 10

    def congest(self, backlog: int) -> None:
        """Queue ``backlog`` protected packets and wait until three have left, so the recorded level is
        that of the queue behind the third (``backlog - 3`` deep). Waiting for the packets, not for a
        time: on a loaded machine the burst and the switch both run late."""
        self.sw.cli("set_queue_depth 4096 1 1", f"set_queue_rate {self.rate_pps} 1 1")
        self.burst([bytes(shim_packet(0, 1, job=1, importance=15, seq=10_000 + i)) for i in range(backlog)])
        self.left = self.shims_received(1, 3, timeout=3 / self.rate_pps + 5)
        self.assertEqual(len(self.left), 3, "three backlog packets leave port 1")

    def burst(self, frames: list[bytes]) -> None:
        """Send frames back to back. Callers serialise them beforehand: scapy is slow on a loaded
        machine, and the congested window is short."""
        for frame in frames:
            self.send(0, frame)

    def collect(self, expect: int) -> list:
        """Everything port 1 sent, those that left during ``congest`` included."""
        rest = expect - len(self.left)
        return self.left + self.shims_received(1, rest, timeout=rest / self.rate_pps + 5)


class LowImportanceDroppedUnderCongestion(_Congested):
    def runTest(self) -> None:
        self.sw.set_drop_policy(POLICY)
        self.sw.add_flow(1, src=HOST_IP[0], dst=HOST_IP[1], protocol=6)
        backlog = 24
        probes = [shim_packet(0, 1, job=1, importance=imp, seq=imp) for imp in range(IMPORTANCE_LEVELS)]
        ack = shim_packet(0, 1, job=1, importance=0, msg_type=MsgType.ACK, seq=900, payload=b"\x00" * 4)
        cnp = shim_packet(0, 1, job=1, importance=0, msg_type=MsgType.CNP, seq=901)
        untagged = tcp_packet(0, 1, 5555, 6666)
        frames = [bytes(p) for p in [*probes, ack, cnp, untagged]]
        self.congest(backlog)
        self.burst(frames)
        got = self.collect(backlog + len(probes) + 2)
        got_seqs = {p[MlfcShim].chunk_seq for p in got}
        level = congestion_level(POLICY, backlog - 4)
        self.assertEqual(level, 3)
        for imp in range(IMPORTANCE_LEVELS):
            dropped = should_drop(POLICY, level, imp, MsgType.DATA)
            self.assertEqual(imp not in got_seqs, dropped, f"importance {imp}: dropped={imp not in got_seqs}")
        self.assertTrue({900, 901} <= got_seqs, "ACK and CNP are never dropped")
        n_dropped = sum(should_drop(POLICY, level, i, MsgType.DATA) for i in range(IMPORTANCE_LEVELS))
        drop_bytes = sum(len(p) for p in probes if should_drop(POLICY, level, p[MlfcShim].importance, MsgType.DATA))
        self.assertEqual(self.sw.job_counter("job_drops", 1), (n_dropped, drop_bytes))
        sent = [*probes, ack, cnp, untagged]
        self.assertEqual(self.sw.job_counter("job_packets", 1)[0], backlog + len(sent), "ingress counts all")


class IntermediateLevelDropsOnlyTheLeastImportant(_Congested):
    rate_pps = 5

    def runTest(self) -> None:
        self.sw.set_drop_policy(POLICY)
        backlog = 9  # about 6 deep once three have left: level 1 (4..7), minimum importance 2
        probes = [bytes(shim_packet(0, 1, job=1, importance=imp, seq=imp)) for imp in range(4)]
        self.congest(backlog)
        self.burst(probes)
        got = {p[MlfcShim].chunk_seq for p in self.collect(backlog + 2)}
        level = congestion_level(POLICY, 6)
        self.assertEqual(level, 1)
        for imp in range(4):
            dropped = should_drop(POLICY, level, imp, MsgType.DATA)
            self.assertEqual(imp not in got, dropped, f"importance {imp} at level {level}: got {sorted(got)}")


class NothingDroppedWhenUncongested(MlfcTest):
    def runTest(self) -> None:
        self.sw.set_drop_policy(POLICY)
        probes = [shim_packet(0, 1, job=1, importance=imp % IMPORTANCE_LEVELS, seq=imp) for imp in range(48)]
        for p in probes:
            self.send(0, p)
            time.sleep(0.005)
        got = self.shims_received(1, len(probes))
        self.assertEqual(len(got), len(probes))
        self.assertEqual(self.sw.job_counter("job_drops", 1)[0], 0)
