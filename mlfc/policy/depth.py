"""Queue-depth units. The RED profile and the drop levels are written in packets, which is what
BMv2 and the reference switch count; Tofino 1 counts its queues in 80-byte cells. A packet of
``packet_bytes`` takes ``ceil(packet_bytes / 80)`` cells, so a queue ``q`` packets deep is
``q * cells`` .. ``q * cells + cells - 1`` cells deep: ``packets_to_cells`` turns a depth range in
packets into the cell range that holds the same packet counts. It is the one conversion of packets;
the controller applies it to every depth key in packets it writes for a Tofino switch.

A threshold in bytes (the step ECN profile's K) is converted by ``bytes_to_depth`` alone, into a
``DepthUnit``: what one unit of a switch's depth holds. A packet-counting queue cannot see bytes, so
its unit is a packet of ``packet_bytes`` (the deployment's MTU-sized gradient packet, 1500 unless
configured); a Tofino unit is an 80-byte cell. A queue ``d`` units deep is taken to hold
``d * unit_bytes`` bytes, so "more than K bytes" is "more than ``floor(K / unit_bytes)`` units": K
rounds *down* to whole units (see ``bytes_to_depth`` for why).

The other way, ``depth_bytes``: the queue telemetry a switch writes into a DATA packet's shim
(docs/wire-format.md) is ``d * unit_bytes`` for a queue ``d`` units deep: packets of 1500 bytes on BMv2
and the reference switch (``QDEPTH_UNIT_BYTES`` in p4src/v1model/include/define_v1model.p4), 80-byte cells
on Tofino (p4src/tna/include/define_tna.p4); tests hold both constants to ``PACKETS`` and ``CELLS``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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


@dataclass(frozen=True, slots=True)
class DepthUnit:
    """One unit of a switch's queue depth: ``unit_bytes`` of queue, and ``per_packet`` units taken by a
    packet of the deployment's ``packet_bytes`` (what a threshold in packets is multiplied by)."""

    unit_bytes: int
    per_packet: int = 1

    def __post_init__(self) -> None:
        for name in ("unit_bytes", "per_packet"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise PolicyError(f"{name}={v!r} must be a positive integer")


def packet_unit(packet_bytes: int = DEFAULT_PACKET_BYTES) -> DepthUnit:
    """BMv2 and the reference switch: depth in packets, each taken as ``packet_bytes`` bytes."""
    cells_per_packet(packet_bytes)  # the same bounds on packet_bytes
    return DepthUnit(packet_bytes, 1)


def cell_unit(packet_bytes: int = DEFAULT_PACKET_BYTES) -> DepthUnit:
    """Tofino 1: depth in 80-byte cells; a packet of ``packet_bytes`` takes ``ceil(packet_bytes / 80)``."""
    return DepthUnit(TOFINO_CELL_BYTES, cells_per_packet(packet_bytes))


def switch_unit(counts_cells: bool, packet_bytes: int = DEFAULT_PACKET_BYTES) -> DepthUnit:
    """The depth unit of a switch that counts cells (Tofino) or packets (BMv2, the reference switch)."""
    return cell_unit(packet_bytes) if counts_cells else packet_unit(packet_bytes)


PACKETS = packet_unit()  # BMv2's unit at the default packet size
CELLS = cell_unit()  # Tofino 1's


def depth_bytes(depth: int, unit: DepthUnit = PACKETS) -> int:
    """A queue ``depth`` units deep in bytes, as the switch reports it in the shim's ``queue_bytes``:
    ``depth * unit_bytes`` (the inverse of ``bytes_to_depth``), the depth clipped to the 19-bit field."""
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
        raise PolicyError(f"{depth!r} must be a queue depth >= 0")
    return min(depth, contract.MAX_QDEPTH) * unit.unit_bytes


def bytes_to_depth(n_bytes: int, unit: DepthUnit) -> int:
    """The deepest queue (in ``unit``) that holds at most ``n_bytes``: ``floor(n_bytes / unit_bytes)``.

    A queue of ``d`` units is taken to hold ``d * unit_bytes`` bytes, so "more than ``n_bytes`` queued"
    is exactly "deeper than this". Rounding down is what that reading gives, and the safe side for a
    marking threshold: rounding up would let up to one unit more than ``n_bytes`` (a whole MTU packet
    on a packet-counting queue) sit queued unmarked, past the bound the operator chose; rounding down
    marks at most one unit early. A threshold below one unit is 0: any queued packet exceeds it.
    """
    if isinstance(n_bytes, bool) or not isinstance(n_bytes, int) or n_bytes < 0:
        raise PolicyError(f"{n_bytes!r} must be a byte count >= 0")
    return n_bytes // unit.unit_bytes


def packets_to_depth(lo: int, hi: int, unit: DepthUnit) -> tuple[int, int] | None:
    """A depth range in packets as ``unit`` counts it (``packets_to_cells`` at ``unit.per_packet``)."""
    return packets_to_cells(lo, hi, unit.per_packet)
