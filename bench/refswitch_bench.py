"""How fast the reference switch forwards: packets/s of the pure pipeline (in process) and of an
mlfc-refswitch process on a veth pair (needs root). Prints figures; asserts nothing.

    python bench/refswitch_bench.py [--seconds 3] [--size 200]
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing as mp
import os
import socket
import time

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from mlfc import contract
from mlfc.controller.entries import Lpm, TableEntry, Ternary, entry
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
            {"port": 1, "src_mac": 0xAABB00000001, "dst_mac": 0x11},
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--size", type=int, default=200, help="frame size in bytes")
    args = ap.parse_args()
    logging.getLogger("finsy").setLevel(logging.ERROR)  # "gNMI is not implemented" on every connection
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
