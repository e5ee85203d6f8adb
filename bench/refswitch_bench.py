"""How fast the reference switch forwards: packets/s of the pure pipeline (in process) and of an
mlfc-refswitch process on a veth pair (needs root); and how fast it takes table writes: 50,000 entries
over P4Runtime into one mlfc-refswitch process whose pipeline was compiled at deployment sizes
(mlfc/pipeline_sizes.py: routes, flows and job priorities at 16,384; issue 28's target < 5 s). Prints
figures; asserts nothing.

    python bench/refswitch_bench.py [--seconds 3] [--size 200] [--entries 50000]
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing as mp
import os
import socket
import tempfile
import time
from pathlib import Path

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from summary import Row, record, verdict

from mlfc import contract, pipeline_sizes
from mlfc.controller.entries import Lpm, Range, TableEntry, Ternary, entry
from mlfc.controller.pipeline import Pipeline
from mlfc.controller.sync import SwitchConnection
from mlfc.launch.switches import RefSwitch
from mlfc.refswitch import pipeline as pl
from mlfc.refswitch.state import SwitchState
from mlfc.refswitch.tables import Tables
from mlfc.testing.refswitch import install, pipeline
from mlfc.testing.veth import unique_prefix, veth_pairs
from mlfc.wire import SHIM_PORT_BASE, MlfcShim

ETH_P_ALL = 0x0003


def entries() -> list[TableEntry]:
    return [
        entry(
            contract.ROUTES_V4,
            {contract.IPV4_DST: Lpm(0x0A00000B, 32)},
            contract.SET_NEXT_HOP,
            {"port": 1, "src_mac": 0xAABB00000001, "dst_mac": 0x11, "rate_class": 0},
        ),
        entry(
            contract.JOB_PRIORITY,
            {contract.JOB_ID: Ternary(3, contract.MAX_JOB_ID)},
            contract.SET_PRIORITY,
            {"priority": 5},
            1,
        ),
    ]


def frame(size: int) -> bytes:
    pkt = (
        Ether(src="00:00:00:00:00:10", dst="00:aa:bb:00:00:01")
        / IP(src="10.0.0.10", dst="10.0.0.11", tos=2)
        / UDP(sport=SHIM_PORT_BASE + 2, dport=SHIM_PORT_BASE + 1, chksum=0)
        / MlfcShim(job_id=3, importance=9)
    )
    return bytes(pkt / (b"\x00" * max(0, size - len(pkt))))


def bench_pipeline(seconds: float, size: int) -> float:
    tables, state = Tables(), SwitchState()
    install(tables, entries())
    data, rng, n = frame(size), pl.default_rng(1), 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(1000):
            pl.process(data, 0, tables, state, rng=rng)
        n += 1000
    return n / seconds


def _blast(iface: str, data: bytes, seconds: float, sent: mp.Value) -> None:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((iface, 0))
    n, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(100):
            try:
                s.send(data)
                n += 1
            except BlockingIOError:
                pass
    sent.value = n


def bench_veth(seconds: float, size: int, queue_mode: str) -> tuple[float, float]:
    """(offered packets/s, forwarded packets/s) through an mlfc-refswitch process on veths."""
    with veth_pairs(2, prefix=unique_prefix("rsb")) as pairs:
        ports = {0: pairs[0].switch_side, 1: pairs[1].switch_side}
        with RefSwitch(name="bench", ports=ports, queue_mode=queue_mode, queue_depth=4096, log_level="warning") as sw:
            with SwitchConnection(sw.grpc_addr, pipeline=pipeline(), election_id=1) as conn:
                conn.load_pipeline(force=True)
                conn.write_entries(entries())
            rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            rx.bind((pairs[1].test_side, 0))
            rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
            rx.settimeout(0.5)
            sent = mp.Value("q", 0)
            sender = mp.Process(target=_blast, args=(pairs[0].test_side, frame(size), seconds, sent))
            start = time.monotonic()
            sender.start()
            got, last = 0, start
            while True:
                try:
                    rx.recv(65536)
                    got += 1
                    last = time.monotonic()
                except TimeoutError:
                    if not sender.is_alive():
                        break
            sender.join()
            return sent.value / seconds, got / max(last - start, 1e-9)


WRITE_SIZES = {contract.ROUTES_V4: 16384, contract.FLOWS: 16384, contract.JOB_PRIORITY: 16384}
WRITE_TARGET_S = 5.0


def many_entries(n: int) -> list[TableEntry]:
    """``n`` distinct entries filling routes, flows, job priorities and ECN ranges in that order."""
    out: list[TableEntry] = []
    caps = {**{t: contract.TABLES[t].size for t in contract.TABLES}, **WRITE_SIZES}
    for i in range(min(n, caps[contract.ROUTES_V4])):
        params = {"port": 1 + i % 8, "src_mac": 0xAABB00000001, "dst_mac": 0x10 + i, "rate_class": 0}
        out.append(entry(contract.ROUTES_V4, {contract.IPV4_DST: Lpm(0x0A000000 + i, 32)}, contract.SET_NEXT_HOP,
                         params))  # fmt: skip
    for i in range(min(n - len(out), caps[contract.FLOWS])):
        match = {contract.IPV4_SRC: Ternary(0x0B000000 + i, 0xFFFFFFFF)}
        out.append(entry(contract.FLOWS, match, contract.SET_JOB, {"job_id": 1 + i % 4000}, 1))
    for i in range(min(n - len(out), caps[contract.JOB_PRIORITY])):
        match = {contract.JOB_ID: Ternary(1 + i, contract.MAX_JOB_ID), contract.ITERATION: Range(0, 1 << 20)}
        out.append(entry(contract.JOB_PRIORITY, match, contract.SET_PRIORITY, {"priority": i % 7}, 1 + i % 50))
    for i in range(min(n - len(out), caps[contract.ECN_PROFILE])):
        port, step = divmod(i, 8)
        match = {contract.EGRESS_PORT: Ternary(port, 0x1FF), contract.ENQ_QDEPTH: Range(step * 8 + 1, step * 8 + 8)}
        out.append(entry(contract.ECN_PROFILE, match, contract.MARK_WITH_PROBABILITY, {"threshold": 100 * step}, 1))
    if len(out) < n:
        raise ValueError(f"{n} entries do not fit the bench's table sizes ({len(out)} do)")
    return out


def bench_table_writes(n: int) -> float:
    """Seconds for ``n`` entries written over P4Runtime (batches of 5,000) into an empty mlfc-refswitch."""
    todo = many_entries(n)
    with tempfile.TemporaryDirectory(prefix="mlfc-sizes-") as tmp:
        p4info, device_config = pipeline_sizes.write_resized(WRITE_SIZES, Path(tmp))
        sized = Pipeline.load(p4info, device_config)
        with (
            RefSwitch(name="writes", ports={}, log_level="warning") as sw,
            SwitchConnection(sw.grpc_addr, pipeline=sized, election_id=1) as conn,
        ):
            conn.load_pipeline(force=True)
            start = time.perf_counter()
            conn.write_entries(todo)
            seconds = time.perf_counter() - start
            tables = (contract.ROUTES_V4, contract.FLOWS, contract.JOB_PRIORITY, contract.ECN_PROFILE)
            held = sum(len(conn.read_entries([t])) for t in tables)
    if held != n:
        raise RuntimeError(f"wrote {n} entries, the switch holds {held}")
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--size", type=int, default=200, help="frame size in bytes")
    ap.add_argument("--entries", type=int, default=50_000, help="table entries written into one switch")
    args = ap.parse_args()
    logging.getLogger("finsy").setLevel(logging.ERROR)  # "gNMI is not implemented" on every connection
    seconds = bench_table_writes(args.entries)
    met = seconds < WRITE_TARGET_S
    print(f"refswitch table writes: {args.entries:,} entries in {seconds:.2f} s ({args.entries / seconds:,.0f}/s), "
          f"target < {WRITE_TARGET_S:g} s: {verdict(met)}")  # fmt: skip
    record(Row(f"refswitch: {args.entries:,} entries written into one switch (P4Runtime, batches of 5,000)",
               f"{seconds:.2f} s ({args.entries / seconds:,.0f} entries/s)", target=f"< {WRITE_TARGET_S:g} s",
               verdict=verdict(met), value=seconds, unit="s"))  # fmt: skip
    print(
        f"refswitch pipeline (in process, ingress+egress, {args.size} B): "
        f"{bench_pipeline(args.seconds, args.size):,.0f} packets/s"
    )
    if os.geteuid() != 0:
        print("refswitch on veths: skipped (needs root for veth pairs)")
        return
    for mode in ("shared", "per-queue"):
        offered, forwarded = bench_veth(args.seconds, args.size, mode)
        print(
            f"refswitch process on a veth pair ({mode} queues, {args.size} B): offered {offered:,.0f} packets/s, "
            f"forwarded {forwarded:,.0f} packets/s"
        )


if __name__ == "__main__":
    main()
