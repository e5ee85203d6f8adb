"""Simulator speed: 16 jobs x 50 iterations at 100 Gb/s on the ns-3 leaf-spine (mlfc.sim bench).

    python bench/sim_bench.py [--scale 0.02] [--jobs 16] [--iterations 50] [--out results/sim]

Prints simulated seconds per wall second and events per second; the target is under 15 minutes on
2 cores. Skips (exit 0) where ns-3 is not installed (`make install-sim`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mlfc.sim import runtime


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=0.02, help="factor on model bytes and compute times")
    ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--out", type=Path, default=Path("results/sim"))
    args = ap.parse_args(argv)
    reason = runtime.missing()
    if reason:
        print(f"sim bench skipped: {reason}")
        return 0
    from mlfc.sim.experiments import Context, benchmark

    ctx = Context(
        args.out, seeds=(1,), scale=args.scale, command="python bench/sim_bench.py " + " ".join(argv or sys.argv[1:])
    )
    print(benchmark(ctx, jobs_n=args.jobs, iterations=args.iterations))
    return 0


if __name__ == "__main__":
    sys.exit(main())
