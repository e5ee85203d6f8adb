"""Queue-depth units. The policies (ECN profile, drop levels) are written in packets, which is what
BMv2 and the reference switch count; Tofino 1 counts its queues in 80-byte cells. A packet of
``packet_bytes`` takes ``ceil(packet_bytes / 80)`` cells, so a queue ``q`` packets deep is
``q * cells`` .. ``q * cells + cells - 1`` cells deep: ``packets_to_cells`` turns a depth range in
packets into the cell range that holds the same packet counts. It is the one conversion; the
controller applies it to every depth key it writes for a Tofino switch.
"""

from __future__ import annotations

import math

from mlfc import contract
from mlfc.policy.priority import PolicyError

TOFINO_CELL_BYTES = 80
DEFAULT_PACKET_BYTES = 1500  # a full-MTU gradient packet


def cells_per_packet(packet_bytes: int = DEFAULT_PACKET_BYTES, cell_bytes: int = TOFINO_CELL_BYTES) -> int:
    if isinstance(packet_bytes, bool) or not isinstance(packet_bytes, int) or not 64 <= packet_bytes <= 16384:
        raise PolicyError(f"packet_bytes={packet_bytes!r} must be an integer frame size 64..16384")
    return math.ceil(packet_bytes / cell_bytes)


def packets_to_cells(lo: int, hi: int, cells: int) -> tuple[int, int] | None:
    """The cell range for depths ``lo``..``hi`` packets (``hi`` = MAX_QDEPTH: unbounded), clipped to
    the 19-bit depth field; None when no reachable depth is left."""
    if not 0 <= lo <= hi <= contract.MAX_QDEPTH or cells < 1:
        raise ValueError(f"depth range {lo}..{hi} / {cells} cells per packet")
    if cells == 1:
        return lo, hi
    lo_c = lo * cells
    if lo_c > contract.MAX_QDEPTH:
        return None
    hi_c = contract.MAX_QDEPTH if hi == contract.MAX_QDEPTH else min(contract.MAX_QDEPTH, (hi + 1) * cells - 1)
    return lo_c, hi_c
