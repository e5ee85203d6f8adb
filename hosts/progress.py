"""A flow's progress through its training iteration: bytes_ratio = bytes sent in the current iteration /
bytes per iteration, and the shim's 4-bit progress bucket of it.

Two readers: the transport tags every DATA chunk with ``bucket`` (the switch can schedule by it), and
MLTCP's congestion-control augmentation reads ``ratio`` for F (mlfc.hosts.cc.Mltcp, mlfc.policy.mltcp).

Bytes per iteration: the ``expected_bytes`` the training loop declared for this iteration, if any (it
knows its model size), else an EWMA of the bytes of earlier iterations. In the first iteration without a
declaration there is no estimate yet and bytes_ratio is 0.

An iteration starts with ``start_iteration()`` (the training loop's explicit call), when the iteration
number given to ``note_iteration`` changes, or after an idle gap: no new data for ``idle_gap`` seconds
(choose it much longer than the RTT and than gaps between tensors of one iteration; None disables it).
An explicit start is one boundary: the iteration number that follows it and the idle gap before its
first byte (the compute phase) belong to it and do not start another one, so its declared size holds.
Time is passed in, so tests drive it with a fake clock.
"""

from __future__ import annotations

from mlfc.policy.mltcp import EWMA_WEIGHT, bytes_ratio
from mlfc.wire import progress_bucket


class IterationProgress:
    def __init__(self, *, idle_gap: float | None = 0.1, ewma_weight: float = EWMA_WEIGHT) -> None:
        if idle_gap is not None and not idle_gap > 0:
            raise ValueError(f"idle_gap={idle_gap!r} must be > 0 or None")
        if not 0 < ewma_weight <= 1:
            raise ValueError(f"ewma_weight={ewma_weight!r} must be in (0, 1]")
        self.idle_gap = idle_gap
        self.ewma_weight = ewma_weight
        self.bytes_this_iteration = 0
        self.bytes_per_iteration_ewma: float | None = None
        self.expected_bytes: int | None = None
        self.iterations_started = 0
        self.iteration: int | None = None
        self._last_sent: float | None = None
        # An explicit start_iteration not yet bound to an iteration number (note_iteration) or to its first
        # byte (on_sent): the boundaries those would see are this one.
        self._explicit_pending = False

    def start_iteration(self, expected_bytes: int | None = None) -> None:
        """Close the current iteration (feeding the EWMA) and start a new one."""
        if expected_bytes is not None and expected_bytes <= 0:
            raise ValueError(f"expected_bytes={expected_bytes!r} must be > 0")
        done = self.bytes_this_iteration
        if done > 0:
            if self.bytes_per_iteration_ewma is None:
                self.bytes_per_iteration_ewma = float(done)
            else:
                w = self.ewma_weight
                self.bytes_per_iteration_ewma = (1 - w) * self.bytes_per_iteration_ewma + w * done
        self.bytes_this_iteration = 0
        self.expected_bytes = expected_bytes
        self.iterations_started += 1
        self._explicit_pending = True

    def _implicit_boundary(self) -> None:
        if not self._explicit_pending:
            self.start_iteration()
            self._explicit_pending = False

    def note_iteration(self, iteration: int) -> None:
        """The training loop's iteration number for the data about to be sent; a change starts an iteration
        unless an explicit start_iteration just did."""
        if self.iteration is not None and iteration != self.iteration:
            self._implicit_boundary()
        self.iteration = iteration
        if self.bytes_this_iteration == 0:
            return  # the explicit start stays pending for on_sent's idle check
        self._explicit_pending = False

    def on_sent(self, nbytes: int, now: float) -> None:
        """New (not retransmitted) application bytes sent."""
        last = self._last_sent
        if last is not None and self.idle_gap is not None and now - last > self.idle_gap:
            self._implicit_boundary()
        self._explicit_pending = False
        self._last_sent = now
        self.bytes_this_iteration += nbytes

    @property
    def bytes_per_iteration(self) -> float:
        if self.expected_bytes is not None:
            return float(self.expected_bytes)
        return self.bytes_per_iteration_ewma or 0.0

    @property
    def ratio(self) -> float:
        return bytes_ratio(self.bytes_this_iteration, self.bytes_per_iteration)

    @property
    def bucket(self) -> int:
        """The shim's progress field for the next chunk."""
        return progress_bucket(self.ratio)

    # -- batches of chunks sent at one instant (UDP GSO) -------------------------------------------------

    def tag_run(self, sizes: list[int], now: float) -> list[int]:
        """Count new chunks of ``sizes`` bytes sent back to back at ``now`` and return the progress bucket of
        each: exactly what ``bucket`` then ``on_sent`` chunk by chunk would give. Only the first chunk can
        start an iteration (the others follow with no gap), and the bucket never falls within an iteration,
        so a run whose second and last chunks share a bucket is that bucket throughout."""
        if not sizes:
            return []
        buckets = [self.bucket]
        self.on_sent(sizes[0], now)
        if len(sizes) > 1:
            bpi = self.bytes_per_iteration
            before_last = self.bytes_this_iteration + sum(sizes[1:-1])
            second = self.bucket
            if progress_bucket(bytes_ratio(before_last, bpi)) == second:
                buckets.extend([second] * (len(sizes) - 1))
            else:
                sent = self.bytes_this_iteration
                for size in sizes[1:]:
                    buckets.append(progress_bucket(bytes_ratio(sent, bpi)))
                    sent += size
            self.bytes_this_iteration += sum(sizes[1:])
        return buckets

    def checkpoint(self) -> tuple:
        """The counting state, for ``restore`` (a batch the socket refused was not sent)."""
        return (self.bytes_this_iteration, self.bytes_per_iteration_ewma, self.expected_bytes,
                self.iterations_started, self._last_sent, self._explicit_pending)  # fmt: skip

    def restore(self, state: tuple) -> None:
        (self.bytes_this_iteration, self.bytes_per_iteration_ewma, self.expected_bytes,
         self.iterations_started, self._last_sent, self._explicit_pending) = state  # fmt: skip
