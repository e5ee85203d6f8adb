"""The dataplane benchmarks' packet and entries (bench/dataplane_packets.py): a layout from before the queue
telemetry gets the 16-byte version-1 shim it parses as tagged and no port_rate entry; the current one the
version-2 shim and its egress port's rate class. No switch here."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import dataplane_packets as dp
from scapy.layers.inet import UDP
from scapy.layers.l2 import Ether

from mlfc import contract
from mlfc.wire import SHIM_LEN, MlfcShim


def test_frames_carry_the_shim_of_the_layouts_version_at_the_same_size() -> None:
    now, before = dp.frame(200), dp.frame(200, telemetry=False)
    assert len(now) == len(before) == 200
    shim_now = MlfcShim(bytes(Ether(now)[UDP].payload)[:SHIM_LEN])
    assert (shim_now.version, shim_now.job_id, shim_now.importance) == (2, 1, 9)
    old = bytes(Ether(before)[UDP].payload)
    assert old[0] >> 4 == 1 and old[:16][1:] == bytes(Ether(now)[UDP].payload)[1:16]  # the same first 16 bytes


def test_only_a_layout_with_the_port_rate_table_gets_its_entry() -> None:
    def tables(entries: list) -> set[str]:
        return {e.table for e in entries}

    assert contract.PORT_RATE in tables(dp.entries_for("mlfc"))
    assert contract.PORT_RATE not in tables(dp.entries_for("mlfc", telemetry=False))
    assert tables(dp.entries_for("l3fwd")) == {contract.ROUTES_V4}
