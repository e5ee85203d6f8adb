"""Selective dropping of low-importance gradient chunks by congestion level.

Egress records a congestion level per (port, queue) from the queue depth; ingress drops a tagged
DATA packet whose importance is below the minimum for the level of the queue it is headed for.
Importance classes >= IMPORTANCE_PROTECTED, ACKs, CNPs and untagged traffic are never dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlfc import contract
from mlfc.policy.priority import PolicyError
from mlfc.wire import IMPORTANCE_PROTECTED, MsgType

NUM_LEVELS = 4  # level 0 = uncongested


@dataclass(frozen=True, slots=True)
class DropPolicy:
    """``level_depths[i]`` is the queue depth (packets) from which level i+1 starts;
    ``min_importance[level]`` is the lowest importance class still forwarded at that level."""

    level_depths: tuple[int, int, int] = (16, 32, 48)
    min_importance: tuple[int, int, int, int] = (0, 2, 4, 8)

    def __post_init__(self) -> None:
        if len(self.level_depths) != NUM_LEVELS - 1:
            raise PolicyError(f"level_depths needs {NUM_LEVELS - 1} depths, got {len(self.level_depths)}")
        if len(self.min_importance) != NUM_LEVELS:
            raise PolicyError(f"min_importance needs {NUM_LEVELS} classes, got {len(self.min_importance)}")
        prev = 0
        for i, d in enumerate(self.level_depths):
            if isinstance(d, bool) or not isinstance(d, int) or not prev < d <= contract.MAX_QDEPTH:
                raise PolicyError(f"level_depths[{i}]={d!r} must be an integer above {prev} (strictly increasing)")
            prev = d
        if self.min_importance[contract.UNCONGESTED_LEVEL] != 0:
            raise PolicyError("min_importance[0] must be 0: nothing is dropped while uncongested")
        prev = 0
        for i, m in enumerate(self.min_importance):
            if isinstance(m, bool) or not isinstance(m, int) or not prev <= m <= IMPORTANCE_PROTECTED:
                raise PolicyError(
                    f"min_importance[{i}]={m!r} must be a non-decreasing integer in 0..{IMPORTANCE_PROTECTED}"
                )
            prev = m


def congestion_level(policy: DropPolicy, qdepth: int) -> int:
    level = 0
    for i, d in enumerate(policy.level_depths):
        if qdepth >= d:
            level = i + 1
    return level


def should_drop(policy: DropPolicy, level: int, importance: int, msg_type: MsgType | None) -> bool:
    """``msg_type`` is None for untagged traffic."""
    if msg_type != MsgType.DATA or importance >= IMPORTANCE_PROTECTED:
        return False
    return importance < policy.min_importance[level]


def level_ranges(policy: DropPolicy) -> list[tuple[int, int, int]]:
    """(lo, hi, level) depth ranges for levels >= 1, as the switch's level table holds them."""
    bounds = [*list(policy.level_depths), contract.MAX_QDEPTH + 1]
    return [(bounds[i], bounds[i + 1] - 1, i + 1) for i in range(NUM_LEVELS - 1)]
