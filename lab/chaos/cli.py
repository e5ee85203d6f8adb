"""`make chaos`: real training while a seeded schedule kills, freezes and cuts every component in turn.

    python -m mlfc.lab.chaos --seed N | --seeds 1,2,3 [--faults 13] [--actions kill,stop,down]
                             [--iterations 150] [--dataplane ref|bmv2|auto] [--out results/chaos]
                             [--no-baseline] [--publish]

One real PyTorch job (digits, a PS and two workers, lossless pushes) on the dumbbell (two switches, the
bottleneck between them) with the whole stack: switches, `mlfc-controller` (with its state file),
`mlfc-coordinator` deciding MAIF priorities for the controller, one `mlfc-agent` per worker. First an
undisturbed run of the same job, then the chaos run: before each fault the schedule waits until the job
reached the fault's iteration and the previous fault has recovered, then fires one fault and ends it after
a short outage (0.2 to 2 s), cycling through 13 kinds (lab/chaos/schedule.py KINDS):

    kill -9, then a restart, of     switch (s1 or s2) · controller · coordinator · agent (rank 0's, which
                                    registered the job) · PS · worker (rank 1)
    SIGSTOP, then SIGCONT, of       the same six (a hung process: its sockets and ports stay held)
    link down, then up              the link between the two switches (every packet on it lost)

in a seeded random order per cycle. The PS checkpoints every iteration and resumes from it; the workers
re-join it at its current iteration; a killed agent takes its worker with it (the worker's stdout is the
agent's pipe) and the supervisor here restarts the pair, rank 0's with ``--replace`` (a new agent instance
takes the job over, its history kept). Measured and printed per fault: the outage, the training stall
(the iteration that spans the kill), iteration time before/after, and the time from the component being
back until both switches hold exactly the entries of the coordinator's latest decision (read back as a
backup P4Runtime client, compared with the controller's compiler's output). At the end, the ledger: every
report the coordinator acknowledged to an agent (agents' --ack-log) looked up in the coordinator's store,
every decision the controller acknowledged looked for on both switches within 1 s; training completed;
the final accuracy against the undisturbed run's.

Each seed runs under the measurement lock (/tmp/mlfc-measure.lock, taken per seed; the load average at
its start and end is in the summary). Output in OUT/<dataplane>/seed<N>/: summary.md, faults.csv,
iterations.csv, iterations.png, ledger-reports.csv, ledger-decisions.csv, logs. ``--publish`` merges one
row per seed into docs/data/chaos/summary.json (``make figures`` renders it). The seed is printed first:
``--seed N`` replays the same schedule.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import secrets
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlfc.lab import dataplanes, summaries
from mlfc.lab.chaos.outputs import FaultRow, fault_rows, summary_text, write_outputs
from mlfc.lab.chaos.records import final_accuracy
from mlfc.lab.chaos.run import ChaosRun, RunResult
from mlfc.lab.chaos.schedule import (
    ACCURACY_TARGET_PP,
    ACTIONS,
    JOB,
    KINDS,
    Fault,
    chaos_job,
    chaos_topology,
    schedule,
    switch_links,
)
from mlfc.lab.cleanup import leftovers
from mlfc.lab.measure import measure_lock
from mlfc.lab.realjobs import say
from mlfc.lab.stack import StackConfig, StackError, network_with_control
from mlfc.lab.validity import BottleneckNotCarried

# the published row of one (dataplane, seed, faults): docs/data/chaos/summary.json
CHAOS_KEY = ("dataplane", "seed", "faults")
CHAOS_ROW = (*CHAOS_KEY, "kinds", "reports_acked", "reports_found", "decisions_acked", "decisions_applied",
             "max_restore_s", "final_acc", "undisturbed_acc", "command")  # fmt: skip


@dataclass
class Outcome:
    seed: int
    faults: list[Fault]
    run: RunResult
    base: RunResult | None
    rows: list[FaultRow]
    text: str
    out: Path
    plane: str = "ref"
    ledger_csvs: tuple[Path, ...] = ()

    def accuracy_delta_pp(self) -> float | None:
        acc = final_accuracy(self.run.records)
        bacc = final_accuracy(self.base.records) if self.base is not None else None
        return None if acc is None or bacc is None else 100 * (acc[1] - bacc[1])

    @property
    def ok(self) -> bool:
        """Every target met: completed, every fault fired and measured, every acknowledged report in the
        store and decision on the switches in time, the switches back on the latest decision within 1 s
        each time, accuracy within 0.5 pp (with a baseline)."""
        delta = self.accuracy_delta_pp()
        return (
            self.run.completed
            and len(self.rows) == len(self.faults)
            and self.run.ledger.ok
            and all(r.entries_ok for r in self.rows)
            and (delta is None or abs(delta) <= ACCURACY_TARGET_PP)
        )


def publish_row(o: Outcome, command: str) -> dict[str, Any]:
    """The seed's row for docs/data/chaos/summary.json (CHAOS_ROW's fields; no NaN: JSON has none)."""
    acc = final_accuracy(o.run.records)
    bacc = final_accuracy(o.base.records) if o.base is not None else None
    restores = [r.entries_s for r in o.rows]
    unmeasured = not restores or any(math.isnan(x) for x in restores)
    led = o.run.ledger
    return {
        "dataplane": o.plane,
        "seed": o.seed,
        "faults": len(o.faults),
        "kinds": dict(Counter(f.action for f in o.faults)),
        "reports_acked": led.reports_acked,
        "reports_found": led.reports_found,
        "decisions_acked": led.decisions_acked,
        "decisions_applied": led.decisions_applied,
        "max_restore_s": None if unmeasured else round(max(restores), 3),
        "final_acc": None if acc is None else acc[1],
        "undisturbed_acc": None if bacc is None else bacc[1],
        "command": command,
    }


def parse_seeds(text: str) -> list[int]:
    """``1,2,3`` or ``1-3`` (or both, ``1-3,7``) -> the seeds in order, each once."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            seeds = range(int(lo), int(hi) + 1) if sep else [int(lo)]
        except ValueError:
            raise ValueError(f"--seeds {text!r}: give integers, e.g. 1,2,3 or 1-3") from None
        if sep and not seeds:
            raise ValueError(f"--seeds {text!r}: the range {part} is empty")
        out += [s for s in seeds if s not in out]
    if not out:
        raise ValueError(f"--seeds {text!r}: no seed")
    return out


def run_chaos(
    seed: int,
    n_faults: int,
    iterations: int,
    plane: dataplanes.Dataplane,
    out_root: Path,
    *,
    baseline: bool = True,
    eval_every: int = 5,
    bottleneck_pps: int = 1500,
    check_bottleneck: bool = True,
    timeout: float = 1200.0,
    load_at_start: float | None = None,
    actions: tuple[str, ...] = ACTIONS,
) -> Outcome:
    """The undisturbed run (if ``baseline``) and the chaos run on one network; writes OUT/<plane>/seed<N>/."""
    topo = chaos_topology()
    faults = schedule(seed, n_faults, iterations, sorted(topo.switches), switch_links(topo), actions)
    for f in faults:
        say(f"  scheduled {f.index:2d}: {f.describe():<22} at iteration {f.at_iteration:4d}, for {f.outage_s:.2f} s")
    out = out_root.resolve() / plane.name / f"seed{seed}"  # the deployment file names paths relative to itself
    cfg = StackConfig(
        "chaos",
        jobs=(),
        iterations=iterations,
        priorities="maif",
        bottleneck_pps=bottleneck_pps,
        check_bottleneck=check_bottleneck,
    )
    preexisting = set(leftovers())
    base = None
    start_load = os.getloadavg()[0] if load_at_start is None else load_at_start
    try:
        with network_with_control(topo, cfg, out / "stack", plane) as ctl:
            if baseline:
                say("undisturbed run")
                d = out / "undisturbed"
                base = ChaosRun(ctl, topo, chaos_job(iterations, d / "ps.ckpt", eval_every), d, "undisturbed").run(
                    [], timeout
                )
                if not base.completed:
                    say(f"the undisturbed run did not complete: {base.errors}")
            say(f"chaos run: {len(faults)} faults")
            d = out / "chaos"
            run = ChaosRun(ctl, topo, chaos_job(iterations, d / "ps.ckpt", eval_every), d, "chaos").run(faults, timeout)
    finally:
        ours = ("ks1-", "ks2-", f"kj{JOB}", str(out))  # other experiments on this machine come and go meanwhile
        stray = [x for x in set(leftovers()) - preexisting if any(o in x for o in ours)]
        if stray:
            say(f"left behind: {sorted(stray)}")
    rows = fault_rows(run)
    text = summary_text(seed, dataplanes.describe(plane), faults, run, base, rows, (start_load, os.getloadavg()[0]))
    csvs = write_outputs(out, run, rows, text)
    return Outcome(seed, faults, run, base, rows, text, out, plane.name, tuple(csvs))


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m mlfc.lab.chaos", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--seed", type=int, default=None, help="the schedule's seed (default: a random one, printed)")
    which.add_argument("--seeds", default=None, help="several runs, one per seed: 1,2,3 or 1-3")
    ap.add_argument("--faults", type=int, default=len(KINDS), help=f"default {len(KINDS)}: every kind once")
    ap.add_argument(
        "--actions",
        type=lambda text: tuple(a.strip() for a in text.split(",") if a.strip()),
        default=ACTIONS,
        help="the kinds of fault to fire, among kill,stop,down (default: all)",
    )
    ap.add_argument("--iterations", type=int, default=150)
    ap.add_argument("--eval-every", type=int, default=5)
    ap.add_argument("--dataplane", default="ref", choices=("auto", "bmv2", "ref"))
    ap.add_argument("--bottleneck-pps", type=int, default=1500)
    ap.add_argument("--no-baseline", action="store_true", help="skip the undisturbed run")
    ap.add_argument("--timeout", type=float, default=1200.0, help="seconds per run")
    ap.add_argument("--out", type=Path, default=Path("results/chaos"))
    ap.add_argument(
        "--publish", action="store_true", help="merge one row per seed into docs/data/chaos/summary.json (+ ledgers)"
    )
    return ap


def seeds_of(args: argparse.Namespace) -> list[int]:
    if args.seeds is not None:
        return parse_seeds(args.seeds)
    return [args.seed if args.seed is not None else secrets.randbelow(1 << 31)]


def replay(args: argparse.Namespace, seed: int) -> str:
    """The command that reruns one seed as it ran (what a published row names)."""
    return (
        f"python -m mlfc.lab.chaos --seed {seed} --faults {args.faults} --iterations {args.iterations} "
        f"--dataplane {args.dataplane}"
        + (" --no-baseline" if args.no_baseline else "")
        + ("" if tuple(args.actions) == ACTIONS else f" --actions {','.join(args.actions)}")
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        seeds = seeds_of(args)
    except ValueError as exc:
        print(f"chaos: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    logging.getLogger("finsy").setLevel(logging.CRITICAL)  # the backup reads' "gNMI is not implemented" etc.
    for seed in seeds:
        print(f"chaos seed {seed} (replay: {replay(args, seed)})", flush=True)
    if os.geteuid() != 0:
        print("make chaos needs root (Mininet)", file=sys.stderr)
        return 2
    try:
        plane = dataplanes.select(args.dataplane)[0]
    except dataplanes.DataplaneMissing as exc:
        print(f"cannot run: {exc}", file=sys.stderr)
        return 2
    outcomes: list[Outcome] = []
    for seed in seeds:
        try:
            with measure_lock() as load:
                say(f"seed {seed}: measurement lock held, load average {load[0]:.2f}")
                outcome = run_chaos(
                    seed,
                    args.faults,
                    args.iterations,
                    plane,
                    args.out,
                    baseline=not args.no_baseline,
                    eval_every=args.eval_every,
                    bottleneck_pps=args.bottleneck_pps,
                    timeout=args.timeout,
                    load_at_start=load[0],
                    actions=args.actions,
                )
        except ValueError as exc:
            print(f"chaos: {exc}", file=sys.stderr)
            return 2
        except (StackError, BottleneckNotCarried) as exc:
            print(f"chaos: seed {seed}: {exc}", file=sys.stderr)
            return 1
        print(outcome.text)
        print(f"written to {outcome.out}/", flush=True)
        outcomes.append(outcome)
    if args.publish:
        rows = [publish_row(o, replay(args, o.seed) + " --publish") for o in outcomes]
        runs = [(p, f"{o.plane}-seed{o.seed}-{p.name}") for o in outcomes for p in o.ledger_csvs]
        path = summaries.publish("chaos", rows, key=CHAOS_KEY, runs=runs, meta={"schema": list(CHAOS_ROW)})
        say(f"published {len(rows)} row(s) to {path}; `make figures` regenerates the docs' tables")
    if len(outcomes) > 1:
        print("seeds: " + ", ".join(f"{o.seed} {'ok' if o.ok else 'FAILED'}" for o in outcomes))
    return 0 if all(o.ok for o in outcomes) else 1
