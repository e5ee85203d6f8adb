"""`make run`: the main job. Brings up the whole stack on a local emulated network — P4 switches,
controller daemon, coordinator, agents and two training jobs sharing a bottleneck — runs them with
MLTCP and MAIF priorities, prints live progress and a results table, and tears everything down.

    mlfc-run [--mix two-compatible] [--treatment mltcp+maif] [--iterations N] [--dataplane auto|bmv2|ref]
             [--bottleneck-bps R] [--training]

--training runs real PyTorch jobs (digits) for TRAINING_ITERATIONS iterations unless --iterations says
otherwise: long enough for the models to learn (a few iterations stay near chance, 0.1 on digits).

Needs root, Mininet and a dataplane: BMv2 (simple_switch_grpc with Thrift) or, where BMv2 is
missing, mlfc's reference switch. Exits non-zero, saying what is missing, when it cannot run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from mlfc.lab import dataplanes
from mlfc.lab.cleanup import interrupt_on_sigterm, leftovers
from mlfc.lab.network import mininet_missing
from mlfc.lab.results import format_table, plot_timeline, summarise, write_csv
from mlfc.lab.scenarios import DEFAULT_MIX, MIXES, TREATMENTS, stack_config, with_training
from mlfc.lab.stack import StackError, network_with_control, run_jobs
from mlfc.lab.validity import BottleneckNotCarried

EMULATOR_ITERATIONS = 10  # the emulator's jobs: enough to see MLTCP interleave and MAIF's classes
# Real digits jobs at the mix's padded compute: by this many iterations both are well above chance (0.1); the
# run takes about a second and a half per iteration.
TRAINING_ITERATIONS = 60
LEGEND = (
    "accuracy: the job's last validation accuracy (emulated jobs: their synthetic curve; digits: chance is 0.10). "
    "lost chunks: gradient chunks the network dropped and the receiver zero-filled, as approximate flow control "
    "allows within each tensor's loss bound (docs/training.md); 0 when every chunk arrived"
)


def final_accuracy(records, job: int) -> float:
    """The job's last measured accuracy (emulated or real), NaN if it measured none."""
    accs = [(r.iteration, r.accuracy) for r in records if r.job == job and r.accuracy is not None]
    return max(accs)[1] if accs else float("nan")


def missing_pieces(choice: str) -> list[str]:
    problems = []
    if os.geteuid() != 0:
        problems.append("root: Mininet creates network namespaces (run as root, e.g. sudo make run)")
    mn = mininet_missing()
    if mn:
        problems.append(mn)
    for tool in ("ethtool", "ping"):
        if not shutil.which(tool):
            problems.append(f"{tool} not found: apt-get install ethtool iputils-ping")
    try:
        dataplanes.select(choice)
    except dataplanes.DataplaneMissing as exc:
        problems.append(f"{exc} (p4lang's packages or the p4lang/behavioral-model image; docs/toolchain.md)")
    return problems


def main(argv: list[str] | None = None) -> int:
    interrupt_on_sigterm()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mix", default=DEFAULT_MIX, choices=sorted(MIXES))
    ap.add_argument("--treatment", default="mltcp+maif", choices=sorted(TREATMENTS))
    ap.add_argument(
        "--iterations",
        type=int,
        default=None,
        help=f"iterations per job (default {EMULATOR_ITERATIONS}; with --training {TRAINING_ITERATIONS})",
    )
    ap.add_argument("--dataplane", default="auto", choices=("auto", "bmv2", "ref"))
    ap.add_argument("--out", type=Path, default=Path("results/run"))
    ap.add_argument("--training", action="store_true", help="real PyTorch training (digits) instead of the emulator")
    ap.add_argument(
        "--bottleneck-bps",
        type=int,
        default=None,
        metavar="R",
        help="on the reference switch, the bottleneck is a link of R bit/s (a packet of L bytes takes L*8/R s) "
        "instead of a packet rate; BMv2 has packet rates only",
    )
    args = ap.parse_args(argv)
    if args.iterations is None:
        args.iterations = TRAINING_ITERATIONS if args.training else EMULATOR_ITERATIONS
    if args.iterations < 1:
        ap.error("--iterations must be >= 1")
    if args.bottleneck_bps is not None and args.bottleneck_bps <= 0:
        ap.error("--bottleneck-bps must be > 0")

    problems = missing_pieces(args.dataplane)
    if problems:
        print("mlfc run cannot start; missing:", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        return 2
    plane = dataplanes.select(args.dataplane)[0]
    mix, treatment = MIXES[args.mix], TREATMENTS[args.treatment]
    if args.training:
        mix = with_training(mix)
    cfg = stack_config(mix, treatment, args.iterations, bottleneck_bps=args.bottleneck_bps)
    print(f"dataplane: {plane.label}")
    if cfg.bytes_link(plane.target):
        print(f"bottleneck: a link of {cfg.bottleneck_bps} bit/s")
    elif args.bottleneck_bps is not None:
        print(f"bottleneck: {cfg.bottleneck_pps} pkt/s (BMv2 has no byte rate: --bottleneck-bps is for refswitch)")
    print(
        f"scenario:  {mix.name} ({mix.description}); treatment {treatment.name}: cc {treatment.cc}, "
        f"MLTCP {'on' if treatment.mltcp else 'off'}, switch priorities {treatment.priorities}",
        flush=True,
    )
    topo = mix.build_topology()
    preexisting = set(leftovers())  # not ours: only what this run leaves behind counts
    try:
        with network_with_control(topo, cfg, args.out, plane) as ctl:
            print(
                f"network up: {len(topo.switches)} switches, {len(topo.hosts)} hosts; controller at {ctl.intent_addr}",
                flush=True,
            )
            res = run_jobs(ctl, topo, cfg, progress=lambda m: print(m, flush=True))
    except KeyboardInterrupt:
        print("interrupted: torn down", file=sys.stderr)
        return 130
    except (BottleneckNotCarried, StackError) as exc:
        print(f"mlfc run stopped: {exc}", file=sys.stderr)
        return 2
    per_job, overall = summarise(res.records)
    rows = [
        [
            s.job,
            s.iterations,
            s.avg,
            s.p99,
            s.comm_avg,
            res.counters.get(s.job, {}).get("ecn_marks", 0),
            res.counters.get(s.job, {}).get("drops", 0),
            final_accuracy(res.records, s.job),
            sum(r.lost_chunks for r in res.records if r.job == s.job),
        ]
        for s in per_job
    ]
    rows.append(["all", overall.iterations, overall.avg, overall.p99, overall.comm_avg, "", "", "", ""])
    headers = ["job", "iters", "avg s", "p99 s", "comm s", "ECN marks", "drops", "accuracy", "lost chunks"]
    print(format_table(headers, rows))
    print(LEGEND)
    print(f"{ctl.probe.describe()}; pushes used {100 * res.utilisation:.0f} % of it; "
          f"{res.cpu.describe() if res.cpu else ''}")  # fmt: skip
    write_csv(args.out / "iterations.csv", res.records)
    if res.records:
        plot_timeline(args.out / "timeline.png", res.records, f"{mix.name} / {treatment.name} on {plane.label}")
    print(f"written: {args.out}/iterations.csv, {args.out}/timeline.png, logs in {args.out}/")
    left = sorted(set(leftovers()) - preexisting)
    if left:
        print("left behind: " + "; ".join(left), file=sys.stderr)
        return 1
    if res.errors:
        print("errors: " + "; ".join(res.errors), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
