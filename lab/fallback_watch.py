"""When the coordinator's MLTCP fallback engaged and released during a run, seen over its Status RPC.

The coordinator's Status carries the fallback's mode (``StatusReply.fallback``: OFF, IDLE or ENGAGED, and
its reason). ``FallbackWatch`` polls ``Coordinator.Status`` while the jobs run and keeps one ``Switch`` per
change, with the reason the coordinator gave; ``run_jobs(..., on_coordinator=watch.hook)``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from mlfc.lab.status_watch import StatusPoller
from mlfc.proto import coordinator_pb2 as pb


@dataclass(frozen=True)
class Switch:
    time: float  # wall clock of the poll that saw it
    engaged: bool
    reason: str


def fallback_reason(status: pb.StatusReply) -> tuple[bool, str] | None:
    """(engaged, reason) of the coordinator's fallback; None when it runs without one."""
    if status.fallback.mode == pb.FALLBACK_OFF:
        return None
    return status.fallback.mode == pb.FALLBACK_ENGAGED, status.fallback.reason


class FallbackWatch:
    def __init__(self, interval_s: float = 0.2) -> None:
        self.interval_s = interval_s
        self.switches: list[Switch] = []
        self._poller: StatusPoller | None = None

    def hook(self, address: str, token_file: Path) -> None:
        self._poller = StatusPoller(address, token_file, self._on_status, self.interval_s, "fb-watch").start()

    def stop(self) -> list[Switch]:
        if self._poller is not None:
            self._poller.stop()
        return self.switches

    def _on_status(self, st: pb.StatusReply) -> None:
        seen = fallback_reason(st)
        if seen is None:
            return
        engaged, reason = seen
        if (self.switches[-1].engaged if self.switches else False) != engaged:
            self.switches.append(Switch(time.time(), engaged, reason))


def describe(switches: list[Switch], t0: float) -> list[str]:
    """One line per switch: seconds after ``t0`` and the coordinator's reason (its own job's part dropped)."""
    if not switches:
        return ["fallback never engaged"]
    return [f"{s.time - t0:6.1f} s: {s.reason.split('; this job')[0]}" for s in switches]
