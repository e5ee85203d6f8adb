r"""`make hpsearch`: MAIF's time to accuracy in a hyper-parameter search of real PyTorch jobs (issue 26).

    python -m mlfc.lab.hpsearch [--task digits,synthetic] [--grid default|8:0.02,8:0.05,...] [--iterations N]
                                [--rounds 3] [--treatments baseline,maif,maif-search] [--compute-s 0.3]
                                [--bottleneck-pps 800] [--dataplane auto|bmv2|ref|both] [--until target|end]
                                [--publish]
                                [--out results/hpsearch]

The defaults are the documented method (`make hpsearch` runs them with --publish): both tasks, each a grid
of 12 configurations (model width x learning rate; ``GRIDS``), 3 rounds, FIFO and both MAIF objectives in
every round. Each configuration is a data-parallel job (a PS and --workers workers) on the dumbbell, all
sharing the s1-s2 bottleneck, all starting together.

* **A\***: every configuration of the grid trained to a plateau in process, without the network
  (lab/astar.py: the PS path's SGD, stopped when the mean of 3 consecutive evaluations has not risen by
  more than 0.002 for --plateau-patience evaluations), cached under OUT/astar/ by task, configuration,
  seed and workers and reused; A* is the best configuration's plateau. The summary and summary.json
  record the value, the configuration, whether it came from the cache and how it was made.
* **Alone**: every configuration once on the network by itself (FIFO): its iteration time alone (the
  top-class job's slowdown is over it) and its accuracy per iteration (the search's curves must match).
* **The search**, --rounds times, under each treatment, all of a round's against the same round's FIFO:

  * ``baseline`` (published as ``fifo``): no scheduling (every job in the default class), plain Reno;
  * ``maif`` (``maif-sum``): the coordinator's MAIF classes with the sum objective (the job with the
    largest predicted accuracy gain per network second served first), Reno;
  * ``maif-search``: MAIF with the search objective (``--objective best``: a job's gain counts only where
    it raises the best accuracy among the jobs; docs/coordinator.md), Reno;
  * ``maif-potential``: the search judged by optimistic curves (``--objective potential``: what a job's
    95 % band top at the search's next doubling adds to the best; not in the defaults);
  * ``maif-elimination``: the jobs that band cannot rule out as the best share the top class
    (``--objective elimination``; not in the defaults);
  * ``maif-chance``: the top class time-shared in proportion to each job's probability of being the best at
    the search's next doubling (``--objective chance``; not in the defaults);
  * ``mltcp+maif``: MAIF with MLTCP on (not in the defaults).

The metric is the wall time from the search's start (iteration 0) until the best smoothed validation
accuracy among the jobs (the mean of 3 consecutive evaluations, lab/tta.py) first reaches 0.90 A* and
0.95 A*. Which configuration becomes which job (and so which registers first, MAIF's tie-break before any
curve exists) is shuffled every round (seeded by the round: reproducible), the same for every treatment of
the round, and written into every per-run CSV (``configuration`` column); the treatments' order rotates per
round, so slow drift of the machine hits all alike. With nothing lost, a configuration's accuracy at each
iteration is the same in every run (same seeds, exact aggregation): the treatments differ in timing only,
which every table checks. A search run ends 15 s after its best smoothed accuracy reaches 0.95 A*
(``--until target``, the default: nothing after that moment can change a time to accuracy, and it spares
the minutes strict priority keeps the bottom tier waiting; ``--until end`` runs every job to its last
iteration and also says when the last one finished). ``top_job_slowdown``: the job that held MAIF's top
class longest, its mean iteration time over the iterations it ran entirely in the top class, over its
time alone (FIFO: the same job's over the whole run).

Output in OUT/<task>/<dataplane>/: summary.md (tables, decision timeline), hpsearch.csv (one row per run),
per run the iteration CSV, accuracy-vs-time PNG and (MAIF) the decision CSV and timeline PNG;
compare-rN.png (best accuracy so far, every treatment). --publish merges one row per task, dataplane and
treatment into docs/data/hpsearch/summary.json (lab/summaries.py) with the per-run CSVs beside it.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from mlfc.lab import astar, dataplanes, summaries
from mlfc.lab.cleanup import interrupt_on_sigterm
from mlfc.lab.hpsearch import rows as hrows
from mlfc.lab.hpsearch.report import plot_compare, published_rows, summary, treatment_table, write_runs_csv
from mlfc.lab.hpsearch.search import (
    DEFAULT_ITERATIONS,
    DEFAULT_TASKS,
    DEFAULT_TREATMENTS,
    HPSEARCH_PPS,
    Config,
    Search,
    assignment,
    fifo_slowdown,
    grid_for,
    run_references,
    run_search,
    run_solos,
    spec_for,
    stack,
    write_reference,
)
from mlfc.lab.realjobs import (
    real_compute_s,
    run_experiment,
    say,
)
from mlfc.lab.scenarios import TREATMENTS
from mlfc.lab.stack import network_with_control
from mlfc.topologies import dumbbell


def run_plane(args: argparse.Namespace, configs: list[Config], plane: dataplanes.Dataplane) -> Search:
    out = args.out / args.task / plane.name
    s = Search(args, configs, plane, out)
    run_references(s)
    write_reference(s)
    for w in sorted({c.width for c in configs}):
        s.padding[w] = real_compute_s(args.task, w)
    topo = dumbbell(len(configs), args.workers)
    names = list(args.treatments)
    base_cfg = stack(args, TREATMENTS["baseline"], [spec_for(configs[0], 1, args)], "hpsearch")
    with network_with_control(topo, base_cfg, out / "run", plane) as ctl:
        s.probe = ctl.probe.describe()
        say(f"network up on {plane.label}: {s.probe}")
        run_solos(s, ctl, topo)
        say(
            f"A* = {s.a_star:.3f} (converged); targets "
            + ", ".join(f"{f:.2f} A* = {t:.3f}" for f, t in s.targets().items())
        )
        total = args.rounds * len(names)
        k = 0
        for rnd in range(args.rounds):
            rotated = names[rnd % len(names) :] + names[: rnd % len(names)]
            for name in rotated:
                k += 1
                order = assignment(len(configs), rnd)
                say(
                    f"-- {name}, round {rnd + 1}/{args.rounds} ({k}/{total}); jobs 1..{len(configs)} = "
                    + ", ".join(configs[c].name for c in order)
                )
                s.runs.append(run_search(s, ctl, topo, TREATMENTS[name], rnd))
            fifo_slowdown(s, rnd)
            plot_compare(out / f"compare-r{rnd + 1}.png", s, rnd)
            write_runs_csv(out / "hpsearch.csv", s)
            (out / "summary.md").write_text(summary(s, names))
            say(treatment_table(s, names))
    return s


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(
        prog="python -m mlfc.lab.hpsearch", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--task",
        type=lambda t: t.split(","),
        default=list(DEFAULT_TASKS),
        help="comma-separated: digits, synthetic (%(default)s)",
    )
    ap.add_argument(
        "--grid",
        default="default",
        help="WIDTH:LR configurations, comma-separated, for every task; default: each task's 12 (GRIDS)",
    )
    per = ", ".join(f"{t} {n}" for t, n in DEFAULT_ITERATIONS.items())
    ap.add_argument("--iterations", type=int, default=None, help=f"per job (default per task: {per})")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2, help="workers per job (%(default)s)")
    ap.add_argument("--eval-every", type=int, default=2, help="validation every k iterations (%(default)s)")
    ap.add_argument("--seed", type=int, default=0, help="model init and data order, every configuration")
    ap.add_argument("--compute-s", type=float, default=0.3, help="pad compute to this per iteration (%(default)s s)")
    ap.add_argument("--start-lead", type=float, default=None, help="s from launch to the common start (20 + 10/job)")
    ap.add_argument("--bottleneck-pps", type=int, default=HPSEARCH_PPS)
    ap.add_argument(
        "--treatments",
        type=lambda t: t.split(","),
        default=list(DEFAULT_TREATMENTS),
        help="comma-separated, first one the baseline (%(default)s)",
    )
    ap.add_argument(
        "--coordinator-arg",
        action="append",
        metavar="ARG",
        help="extra mlfc-coordinator run option, e.g. --coordinator-arg=--horizon=10 (repeatable)",
    )
    ap.add_argument("--plateau-patience", type=int, default=astar.Plateau.patience,
                    help="A*: evaluations without a > 0.002 rise of the smoothed accuracy (%(default)s)")  # fmt: skip
    ap.add_argument("--plateau-max", type=int, default=astar.Plateau.max_iterations,
                    help="A*: at most this many iterations in process (%(default)s)")  # fmt: skip
    ap.add_argument("--cache", type=Path, default=None, help="converged references (default OUT/astar)")
    ap.add_argument("--dataplane", default="auto", choices=("auto", "bmv2", "ref", "both"))
    ap.add_argument(
        "--until",
        default="target",
        choices=("target", "end"),
        help="end each search run 15 s after it reaches 0.95 A* (target: the times cannot change after it) "
        "or when every job has run all its iterations (end: also says when the last job finishes) (%(default)s)",
    )
    ap.add_argument("--out", type=Path, default=Path("results/hpsearch"))
    ap.add_argument(
        "--publish",
        action="store_true",
        help="merge one row per task, dataplane and treatment into docs/data/hpsearch/summary.json (+ per-run CSVs)",
    )
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.workers < 1 or args.eval_every < 1 or (args.iterations or 4) < 4:
        ap.error("--rounds, --workers, --eval-every must be >= 1 and --iterations >= 4")
    if args.plateau_patience < 1 or args.plateau_max < astar.Plateau.min_iterations:
        ap.error(f"--plateau-patience must be >= 1 and --plateau-max >= {astar.Plateau.min_iterations}")
    unknown = [t for t in args.treatments if t not in TREATMENTS]
    if unknown:
        ap.error(f"unknown treatment(s) {', '.join(unknown)}: choose from {', '.join(TREATMENTS)}")
    if "baseline" not in args.treatments:
        ap.error("the treatments must include baseline (the times are compared with it)")
    per_task = []
    for task in args.task:
        try:
            grid = grid_for(task, args.grid)
        except argparse.ArgumentTypeError as exc:
            ap.error(str(exc))
        if len(grid) < 2:
            ap.error("a search needs at least 2 configurations")
        iterations = args.iterations or DEFAULT_ITERATIONS.get(task)
        if iterations is None:
            ap.error(f"task {task}: no default --iterations; give one")
        cache = args.cache or args.out / "astar"
        per_task.append((argparse.Namespace(**{**vars(args), "task": task, "iterations": iterations, "cache": cache}),
                         grid))  # fmt: skip
    command = shlex.join(["python", "-m", "mlfc.lab.hpsearch", *argv])
    interrupt_on_sigterm()  # only once the arguments are good: the teardown runs on SIGTERM as on Ctrl-C

    def run_plane_tasks(plane: dataplanes.Dataplane) -> str:
        texts = []
        for targs, grid in per_task:
            say(f"== {targs.task}: {len(grid)} configurations on {plane.label}")
            s = run_plane(targs, grid, plane)
            texts.append(summary(s, targs.treatments))
            if args.publish:
                rows, runs = zip(*published_rows(s, command), strict=True)
                path = summaries.publish("hpsearch", list(rows), key=hrows.KEY, runs=[r for rs in runs for r in rs],
                                       meta={"schema": hrows.SCHEMA})  # fmt: skip
                say(f"published {len(rows)} row(s) to {path}; `make figures` regenerates the docs' tables")
        return "\n\n".join(texts)

    return run_experiment(
        "hpsearch",
        args.dataplane,
        run_plane_tasks,
        f"{args.out}/<task>/<dataplane>/summary.md, hpsearch.csv, reference.json, per-run CSV/PNG",
    )


if __name__ == "__main__":
    sys.exit(main())
