"""MLTCP's F tuned online for one flow: its iteration times (start to start) go to the policy's pattern
search (mlfc.policy.mltcp_tuning.FTuner), whose current point the flow's congestion controller uses.

Socket-free and clock-free (times are passed in), like the rest of the transport's bookkeeping. What the
flow observes is its own iteration time only: no message between jobs, nothing the operator sets but the
starting point and the search's window."""

from __future__ import annotations

from mlfc.policy.mltcp import MltcpParams
from mlfc.policy.mltcp_tuning import FTuner, TuningParams


class OnlineF:
    def __init__(self, start: MltcpParams, tuning: TuningParams | None = None) -> None:
        self.tuner = FTuner(start, tuning or TuningParams())
        self._started: float | None = None
        self._bytes_at_start = 0
        self.changes: list[tuple[float, MltcpParams]] = []  # (time, new point) each time the search moved

    @property
    def params(self) -> MltcpParams:
        return self.tuner.params

    def iteration_started(self, now: float, new_bytes_sent: int) -> MltcpParams | None:
        """A new iteration began at ``now`` (``new_bytes_sent``: the flow's first-transmission bytes so far).
        Returns F's new parameters when the search moved, else None. Boundaries with no new data between
        them are one boundary (an explicit start_iteration followed by the iteration number changing)."""
        if self._started is not None and new_bytes_sent == self._bytes_at_start:
            return None
        before = self.tuner.params
        if self._started is not None:
            self.tuner.observe(now - self._started)
        self._started, self._bytes_at_start = now, new_bytes_sent
        after = self.tuner.params
        if after == before:
            return None
        self.changes.append((now, after))
        return after
