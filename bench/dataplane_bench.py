"""Packet rate of mlfc.p4 against plain L3 forwarding (l3fwd.p4) on the same BMv2.

    python bench/dataplane_bench.py [--seconds 5] [--trials 3] [--size 200] [--bmv2 PATH ...]

One simple_switch_grpc (no logging) with two veth ports. For each program in turn: load it over
P4Runtime, install its entries (for mlfc: a route plus a full policy — job priorities with a window,
ECN profile, drop levels, a 5-tuple flow — so every table is looked up), then offer tagged ECT(0)
gradient packets on port 0 as fast as a raw socket can send for --seconds and count what leaves
port 1 (the interface's rx counter, no capture). Trials alternate between the programs; the median
of each is reported with their ratio (target >= 0.85). Needs root and BMv2.

--bmv2 names a simple_switch_grpc binary (repeat it to compare builds; default: $MLFC_BMV2, else
the one on PATH).
p4lang's performance notes measure BMv2 built with --disable-logging-macros; the logging macros cost
every table lookup and action something, so the ratio depends on the build as well as the program.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import shutil
import socket
import statistics
import sys
import time
from pathlib import Path

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from summary import Row, record
from summary import verdict as verdict_of

from mlfc import contract
from mlfc.controller import compile as cc
from mlfc.controller import validate
from mlfc.controller.entries import Lpm, entry
from mlfc.controller.pipeline import Pipeline
from mlfc.controller.sync import SwitchConnection
from mlfc.launch.switches import Bmv2Switch, bmv2_binary, bmv2_missing
from mlfc.policy.drop import DropPolicy
from mlfc.policy.ecn import EcnProfile
from mlfc.policy.maif import Window
from mlfc.testing.veth import unique_prefix, veth_pairs
from mlfc.wire import SHIM_PORT_BASE, MlfcShim, MsgType

DST_IP = "10.0.1.2"
SWITCH_MAC, HOST_MAC = "00:aa:bb:00:00:01", "00:00:00:00:00:02"


def frame(size: int) -> bytes:
    pkt = (
        Ether(src="00:00:00:00:00:01", dst=SWITCH_MAC)
        / IP(src="10.0.1.1", dst=DST_IP, tos=2)
        / UDP(sport=SHIM_PORT_BASE + 1, dport=SHIM_PORT_BASE + 2, chksum=0)
        / MlfcShim(msg_type=MsgType.DATA, job_id=1, iteration=7, importance=9, progress=3)
    )
    return bytes(pkt / (b"\x00" * max(0, size - len(pkt))))


def entries_for(program: str) -> list:
    route = entry(
        contract.ROUTES_V4,
        {contract.IPV4_DST: Lpm(int.from_bytes(socket.inet_aton(DST_IP)), 32)},
        contract.SET_NEXT_HOP,
        {"port": 1, "src_mac": int(SWITCH_MAC.replace(":", ""), 16), "dst_mac": int(HOST_MAC.replace(":", ""), 16)},
    )
    if program == "l3fwd":
        return [route]
    flow = validate.FlowMatch(None, ipaddress.IPv4Network("10.0.9.0/24"), 6, 0, 5001)
    jobs = (
        validate.Job(1, 4, (Window(100, 200, 6),), (flow,)),
        validate.Job(2, 2),
    )
    return [
        route,
        *cc.flow_entries(jobs),
        *cc.job_priority_entries(jobs, interleaving=False),
        *cc.ecn_entries({0: EcnProfile(), 1: EcnProfile(kmin=8, kmax=40, pmax=0.1)}),
        *cc.drop_entries(DropPolicy()),
    ]


def rx_packets(iface: str) -> int:
    return int(Path(f"/sys/class/net/{iface}/statistics/rx_packets").read_text())


def offer(iface: str, data: bytes, seconds: float) -> int:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    sent = 0
    end = time.monotonic() + seconds
    send = s.send
    while time.monotonic() < end:
        for _ in range(256):
            try:
                send(data)
                sent += 1
            except BlockingIOError:
                pass
    s.close()
    return sent


def measure(
    switch: Bmv2Switch, program: str, in_iface: str, out_iface: str, size: int, seconds: float
) -> tuple[float, float]:
    """(forwarded, offered) packets per second."""
    pipeline = Pipeline.load(
        contract.P4_BUILD / f"{program}.p4info.txtpb", contract.P4_BUILD / f"{program}.json", checked=False
    )
    with SwitchConnection(switch.grpc_addr, switch.device_id, pipeline=pipeline) as conn:
        conn.load_pipeline(force=True)
        conn.reconcile(entries_for(program))
        data = frame(size)
        offer(in_iface, data, 0.5)  # warm-up
        time.sleep(1.0)
        before = rx_packets(out_iface)
        t0 = time.monotonic()
        sent = offer(in_iface, data, seconds)
        offered = sent / (time.monotonic() - t0)
        time.sleep(1.0)  # let BMv2 drain what it accepted
        return (rx_packets(out_iface) - before) / (time.monotonic() - t0 - 1.0), offered


def bench_build(binary: str, args: argparse.Namespace) -> tuple[float, float]:
    """Median packet rates (mlfc, l3fwd) of one simple_switch_grpc build."""
    rates: dict[str, list[float]] = {"mlfc": [], "l3fwd": []}
    with (
        veth_pairs(2, prefix=unique_prefix("mlfcb")) as pairs,
        Bmv2Switch(name="bench", ports={0: pairs[0].switch_side, 1: pairs[1].switch_side}, binary=binary) as sw,
    ):
        for trial in range(args.trials):
            for program in ("l3fwd", "mlfc") if trial % 2 == 0 else ("mlfc", "l3fwd"):
                pps, offered = measure(sw, program, pairs[0].test_side, pairs[1].test_side, args.size, args.seconds)
                rates[program].append(pps)
                # Offered far above forwarded: the switch, not the sender, sets the rate.
                print(f"  trial {trial + 1}: {program:5s} {pps:10.0f} packets/s ({offered:.0f} offered)", flush=True)
    return statistics.median(rates["mlfc"]), statistics.median(rates["l3fwd"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--size", type=int, default=200, help="frame size in bytes")
    ap.add_argument("--bmv2", action="append", metavar="PATH", help="simple_switch_grpc binary (repeatable)")
    args = ap.parse_args(argv)
    missing = bmv2_missing() or (None if os.geteuid() == 0 else "needs root (veth pairs, raw sockets)")
    if missing:
        print(f"dataplane benchmark skipped: {missing}")
        return 0
    binaries = args.bmv2 or [bmv2_binary()]
    for binary in binaries:
        if not shutil.which(binary):
            print(f"--bmv2 {binary}: not an executable", file=sys.stderr)
            return 2
    for binary in binaries:
        print(f"BMv2: {shutil.which(binary)}", flush=True)
        mlfc, l3 = bench_build(binary, args)
        print(
            f"dataplane (BMv2 {binary}, {args.size}-byte frames, median of {args.trials}): mlfc.p4 {mlfc:.0f} pps, "
            f"l3fwd.p4 {l3:.0f} pps, ratio {mlfc / l3:.2f} (target >= 0.85)",
            flush=True,
        )
        record(Row(f"dataplane: mlfc.p4 on BMv2 {binary}, {args.size}-byte frames, median of {args.trials}",
                   f"{mlfc:,.0f} packets/s", f"l3fwd.p4 {l3:,.0f} packets/s", f"{mlfc / l3:.2f}", ">= 0.85",
                   verdict_of(mlfc / l3 >= 0.85), value=mlfc, unit="packets/s", anchor_value=l3,
                   ratio_value=mlfc / l3))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
