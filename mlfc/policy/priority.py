"""Priority classes of the switch's 8 strict-priority queues (7 is served first)."""

from __future__ import annotations

from dataclasses import dataclass

from mlfc import contract
from mlfc.wire import PROGRESS_BUCKETS


class PolicyError(ValueError):
    """A policy parameter is out of range; the message names it."""


def check_job_priority(priority: int, what: str = "priority") -> int:
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise PolicyError(f"{what} must be an integer, got {priority!r}")
    if not 0 <= priority <= contract.MAX_JOB_PRIORITY:
        raise PolicyError(f"{what}={priority} out of range 0..{contract.MAX_JOB_PRIORITY} (7 is reserved for control)")
    return priority


@dataclass(frozen=True, slots=True)
class ProgressBand:
    """Packets whose progress bucket lies in [lo, hi] get ``priority``."""

    lo: int
    hi: int
    priority: int


def interleaving_bands(levels: int = 4, base: int = 2) -> list[ProgressBand]:
    """In-network interleaving: the further a job is into this iteration's communication, the higher
    its class (MLTCP's idea moved into the switch: the flow closest to finishing goes first).

    ``levels`` equal bands of the 16 progress buckets map to classes base .. base+levels-1.
    """
    if not 1 <= levels <= PROGRESS_BUCKETS:
        raise PolicyError(f"levels={levels} out of range 1..{PROGRESS_BUCKETS}")
    check_job_priority(base, "base")
    check_job_priority(base + levels - 1, "base + levels - 1")
    width = PROGRESS_BUCKETS / levels
    bands = []
    for i in range(levels):
        lo, hi = round(i * width), round((i + 1) * width) - 1
        bands.append(ProgressBand(lo, hi, base + i))
    return bands
