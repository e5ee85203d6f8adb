"""The sender's work between two tensors, when nothing is on the wire: the mean |g| per chunk and the
importance classes of a float32 gradient tensor (mlfc.hosts.importance), with the compiled loops
(mlfc.hosts.fastpath) against the numpy paths, in one process, trials alternating. Prints the median and
range of each; with `make bench` records the medians, the numpy path as the anchor.

    python bench/importance_bench.py [--bytes 25000000] [--chunk 1400] [--trials 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np
from summary import Row, record

from mlfc.hosts import fastpath
from mlfc.hosts.importance import assign_importance, chunk_magnitudes


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bytes", type=int, default=25_000_000, help="tensor size (float32 values)")
    ap.add_argument("--chunk", type=int, default=1400, help="payload bytes per chunk")
    ap.add_argument("--trials", type=int, default=30)
    args = ap.parse_args(argv)
    if fastpath.load() is None:
        print(f"importance bench: compiled loops {fastpath.status()}; only the numpy path would run: skipped")
        return 0
    tensor = np.random.default_rng(0).standard_normal(args.bytes // 4).astype(np.float32).tobytes()
    steps = {
        "mean absolute gradient per chunk": lambda compiled: chunk_magnitudes(tensor, args.chunk, compiled=compiled),
        "importance classes": lambda compiled: assign_importance(tensor, args.chunk, compiled=compiled),
    }
    mb = args.bytes / 1e6
    print(f"{mb:g} MB float32 tensor, {args.chunk}-byte chunks, {args.trials} alternating trials; {fastpath.status()}")
    print("| step | compiled ms (median, range) | numpy ms (median, range) | ratio |\n|---|---|---|---|")
    for name, step in steps.items():
        step(True), step(False)  # warm: the library loaded, the allocator's thresholds settled
        times: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(args.trials):
            for compiled in (True, False):
                times[compiled].append(1e3 * timed(lambda c=compiled, f=step: f(c)))
        fast, slow = statistics.median(times[True]), statistics.median(times[False])
        print(f"| {name} | {fast:.2f} ({min(times[True]):.2f}..{max(times[True]):.2f}) | {slow:.2f} "
              f"({min(times[False]):.2f}..{max(times[False]):.2f}) | {fast / slow:.2f} |")  # fmt: skip
        record(Row(f"transport: {name} of a {mb:g} MB float32 tensor, compiled loops (median of {args.trials})",
                   f"{fast:.2f} ms", f"numpy path {slow:.2f} ms", f"{fast / slow:.2f}", value=round(fast, 3),
                   unit="ms", anchor_value=round(slow, 3), ratio_value=round(fast / slow, 3)))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
