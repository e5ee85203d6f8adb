"""Does the network carry the bottleneck it was configured with? A calibration burst before the jobs run.

A sender in one host's namespace offers plain UDP above the bottleneck's configured rate for a few
seconds, to a receiver across the bottleneck, which counts what arrives. If the switches forward less
than ``min_share`` of the configured rate, something other than the configured queue rate limits the
path — on two cores usually the software switch's own CPU (BMv2 built with logging macros) — and an
experiment would measure CPU contention and report it as mlfc's effect.

    python -m mlfc.lab.probe send --to 10.0.1.101 --pps 3000 --seconds 2
    python -m mlfc.lab.probe recv --bind 10.0.1.101 --seconds 3      # prints {"received": N, "seconds": s}
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time
from dataclasses import dataclass

PROBE_PORT = 9000  # outside the shim range: the probe is untagged traffic at the default class
PAYLOAD = 1400


@dataclass(frozen=True)
class ProbeResult:
    configured_pps: int
    offered_pps: float
    delivered_pps: float

    @property
    def share(self) -> float:
        return self.delivered_pps / self.configured_pps if self.configured_pps else float("nan")

    def describe(self) -> str:
        return (
            f"bottleneck check: {self.delivered_pps:.0f} of {self.configured_pps} pkt/s delivered "
            f"({100 * self.share:.0f} %; {self.offered_pps:.0f} offered)"
        )


def send(to: str, pps: float, seconds: float) -> int:
    """Paced UDP datagrams of PAYLOAD bytes; returns how many were sent."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    payload = b"\x00" * PAYLOAD
    start = time.monotonic()
    sent = 0
    while (now := time.monotonic()) - start < seconds:
        due = int((now - start) * pps) + 1
        while sent < due:
            try:
                sock.sendto(payload, (to, PROBE_PORT))
            except OSError:  # e.g. ENOBUFS: the host queue is full, the next round tries again
                break
            sent += 1
        time.sleep(0.0005)
    sock.close()
    return sent


def receive(bind: str, seconds: float) -> tuple[int, float]:
    """Count datagrams for ``seconds`` after the first; returns (count, seconds between first and last)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.bind((bind, PROBE_PORT))
    sock.settimeout(seconds)
    count, first, last = 0, None, None
    deadline = time.monotonic() + seconds + 5.0
    try:
        while time.monotonic() < deadline:
            try:
                sock.recv(2048)
            except TimeoutError:
                break
            last = time.monotonic()
            first = first or last
            count += 1
            if last - first >= seconds:
                break
    finally:
        sock.close()
    return count, (last - first) if first is not None and last is not None else 0.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("send")
    s.add_argument("--to", required=True)
    s.add_argument("--pps", type=float, required=True)
    s.add_argument("--seconds", type=float, default=2.0)
    r = sub.add_parser("recv")
    r.add_argument("--bind", required=True)
    r.add_argument("--seconds", type=float, default=2.0)
    args = ap.parse_args(argv)
    if args.command == "send":
        print(json.dumps({"sent": send(args.to, args.pps, args.seconds), "seconds": args.seconds}))
    else:
        count, span = receive(args.bind, args.seconds)
        print(json.dumps({"received": count, "seconds": span}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
