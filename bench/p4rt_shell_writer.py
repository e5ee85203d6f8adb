"""Insert table entries one by one with p4runtime-shell's TableEntry API: the anchor the controller's
batched writes are compared with (bench/controller_scale_bench.py). Runs in p4runtime-shell's own venv
(``make shell-venv``; it pins an old protobuf), so it imports nothing from mlfc.

    .venv-shell/bin/python bench/p4rt_shell_writer.py --grpc-addr HOST:PORT --p4info F --config F --entries F.json

The entries file is a JSON list of {table, action, match: {field: string}, params: {name: string},
priority}; match strings are as the shell takes them ("v/len", "v&&&mask", "lo..hi"). Loads the pipeline
as primary, times the inserts (one Write RPC each), prints one JSON line {entries, seconds}.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import p4runtime_sh.shell as sh


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grpc-addr", required=True)
    ap.add_argument("--device-id", type=int, default=1)
    ap.add_argument("--p4info", required=True)
    ap.add_argument("--config", required=True, help="the device config (BMv2 JSON)")
    ap.add_argument("--entries", required=True)
    args = ap.parse_args()
    with open(args.entries) as f:
        specs = json.load(f)
    sh.setup(
        device_id=args.device_id,
        grpc_addr=args.grpc_addr,
        election_id=(0, 1),
        config=sh.FwdPipeConfig(args.p4info, args.config),
        verbose=False,
    )
    try:
        t0 = time.perf_counter()
        for s in specs:
            te = sh.TableEntry(s["table"])(action=s["action"])
            for name, value in s["match"].items():
                te.match[name] = value
            for name, value in s["params"].items():
                te.action[name] = value
            if s["priority"]:
                te.priority = s["priority"]
            te.insert()
        seconds = time.perf_counter() - t0
    finally:
        sh.teardown()
    print(json.dumps({"entries": len(specs), "seconds": seconds}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
