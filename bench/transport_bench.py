"""Transport benchmark: goodput of one flow between two network namespaces on a veth pair (no switch),
and CPU seconds per gigabit at the sender and at the receiver. Needs root. Prints figures; no asserts.

    python bench/transport_bench.py                    # reno, cubic, dcqcn at MTU 1500 (1400 B chunks)
    python bench/transport_bench.py --jumbo            # also MTU 9000 with 8900 B chunks (documented option)
    python bench/transport_bench.py --bytes 50000000 --tensors 4 --cc reno

Sender and receiver are separate processes (the mlfc-transport CLI run with ``ip netns exec``), so each
has its own interpreter and core; namespaces are named mlfc-bench-<pid>-* and always deleted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from mlfc.testing.netns import NetnsLab

CLI = [sys.executable, "-m", "mlfc.hosts.transport_cli"]
PORT = 0x4D20


def one_run(lab: NetnsLab, tx_ns: str, rx_ns: str, cc: str, chunk: int, nbytes: int, tensors: int) -> dict:
    recv = ["recv", "--bind", f"10.77.9.2:{PORT}", "--count", str(tensors), "--ready", "--json", "--idle-exit", "10"]
    rx = subprocess.Popen([*lab.exec_args(rx_ns), *CLI, *recv], stdout=subprocess.PIPE, text=True)
    try:
        if rx.stdout.readline().strip() != "ready":
            raise RuntimeError("receiver did not start")
        send = ["send", "--to", f"10.77.9.2:{PORT}", "--bind", "10.77.9.1", "--bytes", str(nbytes), "--json"]
        send += ["--tensors", str(tensors), "--job", "1", "--cc", cc, "--chunk", str(chunk), "--line-rate", "2e9"]
        tx = subprocess.run([*lab.exec_args(tx_ns), *CLI, *send], capture_output=True, text=True, timeout=300)
        if tx.returncode != 0:
            raise RuntimeError(f"sender failed: {tx.stderr.strip()}")
        out, _ = rx.communicate(timeout=30)
        return {"tx": json.loads(tx.stdout), "rx": json.loads(out)}
    finally:
        rx.kill()
        rx.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cc", action="append", choices=["reno", "cubic", "dcqcn"], help="repeatable; default all")
    ap.add_argument("--bytes", type=int, default=25_000_000, help="bytes per tensor")
    ap.add_argument("--tensors", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=2, help="runs per setting (the lowest and highest goodput are shown)")
    ap.add_argument("--jumbo", action="store_true", help="also run with MTU 9000 and 8900 B chunks")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("transport_bench: needs root (network namespaces)", file=sys.stderr)
        return 1
    settings = [(1500, 1400)] + ([(9000, 8900)] if args.jumbo else [])
    print(f"cores: {os.cpu_count()}, load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{args.tensors} tensors x {args.bytes / 1e6:.0f} MB per run, {args.repeat} runs per setting")
    print(f"{'mtu':>5} {'chunk':>6} {'cc':>6} {'goodput Mb/s (min/max)':>28} {'tx CPU s/Gb':>12} "
          f"{'rx CPU s/Gb':>12} {'retx %':>7}")  # fmt: skip
    for mtu, chunk in settings:
        with NetnsLab("bench") as lab:
            a, b = lab.namespace("a"), lab.namespace("b")
            lab.link(a, "10.77.9.1", b, "10.77.9.2", mtu=mtu)
            for cc in args.cc or ["reno", "cubic", "dcqcn"]:
                runs = [one_run(lab, a, b, cc, chunk, args.bytes, args.tensors) for _ in range(args.repeat)]
                runs.sort(key=lambda r: r["rx"]["goodput_mbps"])
                med = runs[len(runs) // 2]  # CPU and retransmissions: the median run
                worst, best = runs[0], runs[-1]
                retx = 100 * med["tx"]["retransmits"] / max(1, med["tx"]["chunks_sent"])
                goodput = f"{worst['rx']['goodput_mbps']:>14.0f} / {best['rx']['goodput_mbps']:<11.0f}"
                cpu = f"{med['tx']['cpu_s_per_gbit']:>12.2f} {med['rx']['cpu_s_per_gbit']:>12.2f}"
                print(f"{mtu:>5} {chunk:>6} {cc:>6} {goodput} {cpu} {retx:>7.2f}")
    print("goodput: application bytes / time from the first packet to the last tensor delivered (receiver);")
    print("CPU s/Gb: process CPU time (user + system, incl. the kernel's UDP/veth path) per 10^9 bits delivered")
    return 0


if __name__ == "__main__":
    sys.exit(main())
