"""Priority queueing by job and iteration tag.

BMv2's queueing model: `set_queue_rate` limits each priority queue on its own and there is no
port-wide shaper, so two busy classes at equal rates would interleave rather than one starving the
other. These tests therefore slow down only the *low* class's queue (5 packets/s on port 1,
priority 1) and leave the high classes unlimited: a high-class packet sent after a burst of low
ones overtakes every low packet still queued, which is exactly what strict priority promises.
"""

from __future__ import annotations

from mlfc_base import MlfcTest, shim_packet

from mlfc.wire import MlfcShim, MsgType

LOW_RATE_PPS = 5
BURST = 20


class _QueuedBehindLowClass(MlfcTest):
    def stall_low_class(self) -> None:
        self.sw.cli(f"set_queue_rate {LOW_RATE_PPS} 1 1")

    def run_burst(self, lows: list, highs: list) -> list:
        self.stall_low_class()
        for p in lows:
            self.send(0, p)
        for p in highs:
            self.send(0, p)
        # BMv2 fixes each packet's departure when it is enqueued: the low class drains at its rate.
        return self.shims_received(1, len(lows) + len(highs), timeout=len(lows) / LOW_RATE_PPS + 5)


class JobClassOvertakesQueuedTraffic(_QueuedBehindLowClass):
    def runTest(self) -> None:
        self.sw.add_job_priority(1, 1)
        self.sw.add_job_priority(2, 5)
        lows = [shim_packet(0, 1, job=1, seq=i) for i in range(BURST)]
        highs = [shim_packet(0, 1, job=2, seq=100 + i) for i in range(5)]
        order = [(p[MlfcShim].job_id, p[MlfcShim].chunk_seq) for p in self.run_burst(lows, highs)]
        self.assertEqual(len(order), BURST + 5, f"every packet is delivered: {order}")
        high_positions = [i for i, (job, _) in enumerate(order) if job == 2]
        # At 5 packets/s at most a few low packets leave before the highs arrive.
        self.assertLess(max(high_positions), 5 + 3, f"high class did not overtake: {order}")
        self.assertEqual([s for j, s in order if j == 1], list(range(BURST)), "FIFO within a class")


class IterationWindowTakesEffect(_QueuedBehindLowClass):
    def runTest(self) -> None:
        self.sw.add_job_priority(1, 1)
        self.sw.add_job_priority(1, 6, iterations=(10, 20))
        lows = [shim_packet(0, 1, job=1, iteration=5, seq=i) for i in range(BURST)]
        window = [shim_packet(0, 1, job=1, iteration=it, seq=100 + it) for it in (10, 15, 20)]
        outside = [shim_packet(0, 1, job=1, iteration=21, seq=200)]
        got = self.run_burst(lows, window + outside)
        order = [(p[MlfcShim].iteration, p[MlfcShim].chunk_seq) for p in got]
        self.assertEqual(len(order), BURST + 4, f"every packet is delivered: {order}")
        pos = {seq: i for i, (_, seq) in enumerate(order)}
        for it in (10, 15, 20):
            self.assertLess(pos[100 + it], 3 + 3, f"iteration {it} (in window) did not overtake: {order}")
        self.assertEqual(pos[200], len(order) - 1, f"iteration 21 (outside window) queues behind: {order}")


class CnpsTakeTheControlClassAndAcksTheirJobs(_QueuedBehindLowClass):
    def runTest(self) -> None:
        self.sw.add_job_priority(1, 1)
        self.sw.add_job_priority(2, 5)
        lows = [shim_packet(0, 1, job=1, seq=i) for i in range(BURST)]
        ctrl = [
            shim_packet(0, 1, job=1, msg_type=MsgType.ACK, seq=500, payload=b"\x00\x00\x00\x00"),
            shim_packet(0, 1, job=2, msg_type=MsgType.ACK, seq=501, payload=b"\x00\x00\x00\x00"),
            shim_packet(0, 1, job=1, msg_type=MsgType.CNP, seq=502),
        ]
        order = [(p[MlfcShim].msg_type, p[MlfcShim].chunk_seq) for p in self.run_burst(lows, ctrl)]
        pos = {seq: i for i, (_, seq) in enumerate(order)}
        self.assertLess(max(pos[501], pos[502]), 2 + 3, f"CNP / job 2's ACK did not overtake: {order}")
        self.assertEqual(pos[500], len(order) - 1, f"job 1's ACK queues in job 1's class: {order}")
