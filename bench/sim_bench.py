"""Simulator speed: 16 jobs x 50 iterations at 100 Gb/s on the ns-3 leaf-spine (mlfc.sim bench).

    python bench/sim_bench.py [--scale 0.02] [--jobs 16] [--iterations 50] [--out results/sim]

Prints simulated seconds per wall second and events per second, and records the run's wall time and the
full-size run's, projected from it (events grow in proportion to the scale: docs/data/sim-scale), against
issue 28's limit (30 minutes on 2 cores).
Skips (exit 0) where ns-3 is not installed (`make install-sim`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from summary import Row, command_line, record
from summary import verdict as verdict_of

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
    from mlfc.sim.experiments import Context
    from mlfc.sim.experiments.bench import TARGET_S, measure

    ctx = Context(args.out, seeds=(1,), scale=args.scale, command=command_line())
    run, text = measure(ctx, jobs_n=args.jobs, iterations=args.iterations)
    print(text)
    met = run.full_size_s < TARGET_S
    record(Row(f"sim: {args.jobs} jobs x {args.iterations} iterations on the 100 Gb/s leaf-spine, scale {args.scale:g}",
               f"{run.total_s:,.0f} s ({run.events / 1e6:,.0f}M events, {run.events_per_s:,.0f} events/s)",
               value=run.total_s, unit="s"))  # fmt: skip
    record(Row(f"sim: the same at full model bytes (projected from scale {args.scale:g}: events grow with it)",
               f"{run.full_size_s:,.0f} s", target=f"< {TARGET_S} s", verdict=verdict_of(met),
               value=run.full_size_s, unit="s"))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
