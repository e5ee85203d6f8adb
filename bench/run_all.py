"""`make bench`: run every benchmark in turn and print their figures (nothing is asserted).

    python bench/run_all.py [--only dataplane,controller,...] [--bmv2 PATH ...]

Each benchmark is its own script in bench/ and can be run alone; those that need root or BMv2 say
so and are skipped where the piece is missing.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ORDER = ("dataplane", "controller", "coordinator", "transport", "refswitch", "training", "sim")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=",".join(ORDER), help="comma-separated subset of " + ", ".join(ORDER))
    ap.add_argument("--bmv2", action="append", default=[], metavar="PATH", help="BMv2 build(s) for the dataplane bench")
    args = ap.parse_args(argv)
    failed = []
    for name in args.only.split(","):
        script = BENCH / f"{name}_bench.py"
        if not script.is_file():
            print(f"unknown benchmark {name!r}", file=sys.stderr)
            return 2
        print(f"\n===== {name} ({script.name}) =====", flush=True)
        t0 = time.monotonic()
        extra = [a for b in args.bmv2 for a in ("--bmv2", b)] if name == "dataplane" else []
        rc = subprocess.run([sys.executable, str(script), *extra]).returncode
        print(f"----- {name}: exit {rc}, {time.monotonic() - t0:.0f} s", flush=True)
        if rc != 0:
            failed.append(name)
    if failed:
        print(f"benchmarks that failed to run: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
