"""What BMv2 does for one packet of each program: parser states and set operations, tables applied
(hits and misses), conditions evaluated, action primitives run, read from its trace log.

    python bench/bmv2_ops.py [--size 200]

Each of these costs time on a BMv2 built with its logging macros (the default build): every table
lookup formats its key and, on a hit, the entry; every condition and primitive copies its source
text. The counts explain a packet-rate ratio between two programs on such a build. Needs root and
BMv2.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from dataplane_packets import entries_for, frame, layout_of

from mlfc import contract
from mlfc.controller.pipeline import Pipeline
from mlfc.controller.sync import SwitchConnection
from mlfc.launch.switches import Bmv2Switch, bmv2_missing
from mlfc.testing.veth import veth_pairs

KINDS = {
    "parser states": re.compile(r"Parser '[^']*' entering state"),
    "parser set ops": re.compile(r"Parser set: setting field"),
    "tables applied": re.compile(r"Applying table '"),
    "table hits": re.compile(r"Table '[^']*': hit with handle"),
    "conditions": re.compile(r"Condition \""),
    "actions": re.compile(r"\] Action (?!entry)"),
    "primitives": re.compile(r"\] .*Primitive "),
}


def count_ops(log: str) -> Counter[str]:
    return Counter({kind: len(rx.findall(log)) for kind, rx in KINDS.items()})


def trace_one(program: str, size: int, workdir: Path, build: Path = contract.P4_BUILD,
              udp_checksum: bool = False) -> Counter[str]:  # fmt: skip
    """Counts for one gradient packet through ``program`` compiled into ``build`` (the dataplane bench's
    packet and entries; ``udp_checksum``: the packet with one)."""
    base = workdir / f"{program}-trace"  # BMv2's file logger may add its own suffix

    def read_log() -> str:
        return "".join(f.read_text(errors="replace") for f in sorted(workdir.glob(f"{base.name}*")))

    with (
        veth_pairs(2, prefix="mlfco") as pairs,
        Bmv2Switch(
            name=f"ops-{program}",
            ports={0: pairs[0].switch_side, 1: pairs[1].switch_side},
            extra_args=("--log-file", str(base), "--log-flush", "-L", "trace"),
        ) as sw,
    ):
        pipeline = Pipeline.load(build / f"{program}.p4info.txtpb", build / f"{program}.json", checked=False)
        with SwitchConnection(sw.grpc_addr, sw.device_id, pipeline=pipeline) as conn:
            conn.load_pipeline(force=True)
            layout = layout_of(pipeline)
            conn.reconcile(entries_for(program, layout))
        text_before = read_log()
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        s.bind((pairs[0].test_side, 0))
        s.send(frame(size, telemetry=layout.telemetry, udp_checksum=udp_checksum))
        s.close()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            text = read_log()
            if "Transmitting packet" in text[len(text_before) :]:
                break
            time.sleep(0.05)
        new = text[len(text_before) :]
    # Only the bench packet's lines: the first packet id that reached the ingress pipeline.
    m = re.search(r"\[(\d+\.\d+)\] \[cxt \d+\] Processing packet received on port 0", new)
    if m is None:
        raise RuntimeError(f"{program}: the packet never reached BMv2's ingress (see {base})")
    pid = re.escape(m.group(1))
    mine = "\n".join(line for line in new.splitlines() if re.search(rf"\[{pid}\]", line))
    return count_ops(mine)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=200, help="frame size in bytes")
    args = ap.parse_args(argv)
    missing = bmv2_missing() or (None if os.geteuid() == 0 else "needs root (veth pairs, raw sockets)")
    if missing:
        print(f"BMv2 operation count skipped: {missing}")
        return 0
    with tempfile.TemporaryDirectory(prefix="mlfc-ops-") as tmp:
        counts = {p: trace_one(p, args.size, Path(os.environ.get("MLFC_OPS_DIR", tmp))) for p in ("l3fwd", "mlfc")}
    print("| per packet (one tagged ECT gradient packet) | l3fwd.p4 | mlfc.p4 | extra |")
    print("|---|---:|---:|---:|")
    for kind in KINDS:
        a, b = counts["l3fwd"][kind], counts["mlfc"][kind]
        print(f"| {kind} | {a} | {b} | {b - a:+d} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
