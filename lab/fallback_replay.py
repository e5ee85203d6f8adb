"""Replay the coordinator's MLTCP fallback rule (mlfc/policy/fallback.py) over recorded runs: when would it have
engaged on a run without it (e.g. MLTCP alone), and how contended was each job per iteration?

    python -m mlfc.lab.fallback_replay RUN.csv [RUN.csv ...] [--enter 1.35 --warmup 4 --window 3]

Each CSV is one run as `make e2e` writes it (lab/results.py). The replay feeds the rule one iteration at a time,
in iteration order, with the same communication times the agents report (comm_end - comm_start).
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mlfc.policy import fallback as fb


@dataclass(frozen=True)
class Replay:
    switches: list[tuple[int, bool, str]]  # (iteration after which the rule switched, engaged, reason)
    ratios: dict[int, list[float]]  # job -> communication time / best, per iteration


def comm_series(path: Path) -> tuple[dict[int, dict[int, float]], dict[int, dict[int, tuple[float, float]]]]:
    """(job -> {iteration: communication seconds}, job -> {iteration: (start, end)}) of each iteration's slowest
    worker, from a run's CSV: what the agents report (comm_seconds, and the clock at the iteration's end)."""
    comm: dict[int, dict[int, float]] = {}
    phases: dict[int, dict[int, tuple[float, float]]] = {}
    with path.open() as f:
        for row in csv.DictReader(f):
            job, it = int(row["job"]), int(row["iteration"])
            start, end = float(row["comm_start"]), float(row["comm_end"])
            if end - start > comm.setdefault(job, {}).get(it, 0.0):
                comm[job][it] = end - start
                phases.setdefault(job, {})[it] = (start, end)
    return comm, phases


def replay(
    jobs: Mapping[int, Mapping[int, float]],
    params: fb.FallbackParams,
    phases: Mapping[int, Mapping[int, tuple[float, float]]] | None = None,
) -> Replay:
    last = max((max(s) for s in jobs.values() if s), default=-1)
    state, switches = fb.FallbackState(), []
    for n in range(last + 1):
        seen = {j: {i: v for i, v in s.items() if i <= n} for j, s in jobs.items()}
        seen_phases = {j: {i: v for i, v in p.items() if i <= n} for j, p in (phases or {}).items()}
        v = fb.step(state, seen, params, seen_phases or None)
        if v.switched:
            switches.append((n, v.state.engaged, v.state.reason))
        state = v.state
    ratios = {}
    for j, s in jobs.items():
        its = sorted(s)
        best = min((s[i] for i in its[1:]), default=0.0)
        ratios[j] = [s[i] / best if best > 0 else float("nan") for i in its]
    return Replay(switches, ratios)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="+", type=Path)
    d = fb.FallbackParams()
    ap.add_argument("--enter", type=float, default=d.enter)
    ap.add_argument("--exit", type=float, default=d.exit)
    ap.add_argument("--warmup", type=int, default=d.warmup)
    ap.add_argument("--window", type=int, default=d.window)
    args = ap.parse_args(argv)
    params = fb.FallbackParams(enter=args.enter, exit=args.exit, warmup=args.warmup, window=args.window)
    for path in args.csv:
        comm, phases = comm_series(path)
        r = replay(comm, params, phases)
        what = "; ".join(f"{'engages' if e else 'releases'} after iteration {n}" for n, e, _ in r.switches)
        print(f"{path}: {what or 'never engages'}")
        for j, ratio in sorted(r.ratios.items()):
            print(f"  job {j} comm/best: " + " ".join(f"{x:.2f}" for x in ratio))
    return 0


if __name__ == "__main__":
    sys.exit(main())
