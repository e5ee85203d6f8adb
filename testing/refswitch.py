"""The reference switch's side of tests and benchmarks: table entries as the model holds them, counters
as ``SwitchState.snapshot()`` shows them.

Tests build entries as the controller does (``mlfc.controller.entries.TableEntry``). Where a test
drives the model in process (``refswitch.tables.Tables``), ``model_entry`` converts one the way a real
entry travels: encoded to protobuf by the controller's ``Pipeline``, decoded by the reference switch's
own codec (refswitch/codec.py), so the pure-model tests exercise the codec too.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

from mlfc import contract
from mlfc.controller.entries import TableEntry
from mlfc.controller.pipeline import Pipeline
from mlfc.controller.sync import SwitchConnection
from mlfc.refswitch import codec
from mlfc.refswitch.p4info import P4InfoIndex, index_p4info, load_p4info
from mlfc.refswitch.tables import Entry, Tables

Cells = dict[int, tuple[int, int]]


@cache
def pipeline() -> Pipeline:
    """The committed mlfc pipeline (p4src/build/mlfc.*), loaded once."""
    return Pipeline.load()


@cache
def _model_index() -> P4InfoIndex:
    return index_p4info(load_p4info(pipeline().p4info_path))


def model_entry(te: TableEntry) -> Entry:
    """``te`` as the reference switch stores it after a P4Runtime write."""
    return codec.decode_entry(_model_index(), pipeline().encode(te))


def install(tables: Tables, entries: Iterable[TableEntry]) -> None:
    """INSERT ``entries`` into in-process model tables, each into its own table."""
    for te in entries:
        tables[te.table].insert(model_entry(te))


def counter_cells(conn: SwitchConnection, counter: str) -> Cells:
    """The non-zero cells of one counter, read over P4Runtime, as index -> (packets, bytes)."""
    return {i: (v.packets, v.bytes) for i, v in conn.read_counters(counter).items() if v.packets or v.bytes}


def counter_snapshot(conn: SwitchConnection) -> dict[str, Cells]:
    """Every counter of the contract, in the shape of ``SwitchState.snapshot()``."""
    return {name: counter_cells(conn, name) for name in contract.COUNTERS}
