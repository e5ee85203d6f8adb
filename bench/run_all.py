"""`make bench`: run every benchmark in turn, print their figures, then one summary table (nothing asserted).

    python bench/run_all.py [--only dataplane,controller,...] [--quick] [--bmv2 PATH ...] [--out DIR]

Each benchmark is its own script in bench/ and can be run alone; those that need root or BMv2 say
so and are skipped where the piece is missing. The summary table at the end gives each headline figure
with the anchor measured in the same run (iperf3, l3fwd.p4, p4runtime-shell), the ratio and the target
(issue 18); it is also written to DIR/summary.md. ``--quick`` runs fewer trials and smaller sizes.
Run it under ``flock /tmp/mlfc-measure.lock`` when the figures are to be quoted.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import summary

from mlfc.lab import summaries

BENCH = Path(__file__).resolve().parent
ORDER = ("dataplane", "controller", "controller_scale", "coordinator", "coordinator_scale", "transport", "importance",
         "refswitch", "training", "sim")  # fmt: skip
# Fewer trials and smaller sizes for --quick (each script's own options).
QUICK = {
    "dataplane": ["--seconds", "3"],
    "controller": ["--intents", "50"],
    "controller_scale": ["--quick"],
    "coordinator": ["--duration", "1", "--rounds", "20", "--restarts", "3"],
    "coordinator_scale": ["--quick"],
    "transport": ["--trials", "3", "--tensors", "8"],
    "importance": ["--trials", "5"],
    "training": ["--rounds", "1"],
}
# Always passed: what issue 28's targets need beyond a script's defaults.
ALWAYS = {"transport": ["--flows", "4"]}
OUT_DIR = ("controller_scale", "coordinator_scale", "transport")  # the scripts that write tables and plots


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=",".join(ORDER), help="comma-separated subset of " + ", ".join(ORDER))
    ap.add_argument("--quick", action="store_true", help="fewer trials and smaller sizes (a few minutes less)")
    ap.add_argument("--bmv2", action="append", default=[], metavar="PATH", help="BMv2 build(s) for the dataplane bench")
    ap.add_argument("--out", type=Path, default=BENCH.parent / "results" / "bench", help="tables, plots, summary.md")
    ap.add_argument(
        "--publish", action="store_true", help="merge the figures into docs/data/bench/summary.json (make figures)"
    )
    args = ap.parse_args(argv)
    names = args.only.split(",")
    for name in names:
        if not (BENCH / f"{name}_bench.py").is_file():
            print(f"unknown benchmark {name!r} (known: {', '.join(ORDER)})", file=sys.stderr)
            return 2
    print(f"make bench: {os.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    failed = []
    with tempfile.TemporaryDirectory(prefix="mlfc-bench-") as tmp:
        summary_file = Path(tmp) / "summary.jsonl"
        env = {**os.environ, summary.ENV: str(summary_file)}
        t_all = time.monotonic()
        for name in names:
            script = BENCH / f"{name}_bench.py"
            print(f"\n===== {name} ({script.name}) =====", flush=True)
            t0 = time.monotonic()
            extra = [a for b in args.bmv2 for a in ("--bmv2", b)] if name == "dataplane" else []
            extra += ALWAYS.get(name, [])
            extra += QUICK.get(name, []) if args.quick else []
            extra += ["--out", str(args.out)] if name in OUT_DIR else []
            rc = subprocess.run([sys.executable, str(script), *extra], env=env).returncode
            print(f"----- {name}: exit {rc}, {time.monotonic() - t0:.0f} s", flush=True)
            if rc != 0:
                failed.append(name)
        rows = summary.load(summary_file)
    text = summary.table(rows) if rows else "(no benchmark recorded a figure)"
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\n===== summary ({time.monotonic() - t_all:.0f} s, load average now {load}) =====\n{text}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.md").write_text(text + "\n")
    print(f"wrote {args.out}/summary.md")
    if args.publish and rows:
        meta = {"cpus": os.cpu_count(), "load_after": load, "quick": args.quick}
        path = summaries.publish("bench", [summary.published(r) for r in rows], key=("name",), meta=meta)
        print(f"published {len(rows)} figure(s) to {path}; `make figures` regenerates the docs' table")
    if failed:
        print(f"benchmarks that failed to run: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
