r"""`make search`: an Optuna study's time to accuracy with and without MAIF (issue 47 item 1).

    python -m mlfc.lab.search [--task digits] [--trials 24] [--concurrency 6] [--pruners median,asha]
                              [--rounds 3] [--treatments baseline,maif] [--iterations N] [--sampler-seed 0]
                              [--dataplane ref|bmv2|both|auto] [--publish] [--out results/search]

A grid launched at once is not how people search: a sampler proposes trials over time, k run at once, a
pruner stops the weak ones. Here an Optuna study (TPE, seeded) proposes --trials trials over the task's space
(model width, learning rate, batch size per worker; study.py SPACES), --concurrency at a time; every trial is
a data-parallel job (a PS and --workers workers) on the dumbbell, all trials through the one s1-s2
bottleneck. Each pruner is its own study: ``median`` (MedianPruner) and ``asha`` (SuccessiveHalvingPruner).

* **A\***: as `make hpsearch` defines it (lab/astar.py): the best plateau among the task's hpsearch grid
  (--reference-grid) trained in process, cached under --cache (shared with `make hpsearch`).
* **Treatments**, every pruner, every round, against the same round's FIFO: ``baseline`` (published as
  ``fifo``: every job in the default class) and ``maif`` (``maif-sum``: the coordinator's default objective).
  The treatments' order rotates per round.
* **The same proposals**: in a round every study's sampler has the same seed (--sampler-seed + round), so
  its first proposals (TPE's 10 startup trials, seeded independent draws) are the same under every
  treatment. Later proposals depend on the values told so far and so on which trials finished first, which
  the treatment changes: that is part of what a scheduler does to a study, so it is kept and measured
  (``same_params_as_fifo``: trials proposed as under the round's FIFO), not forced away.

The metric is the wall time from the study's start (its first trial's iteration 0) until the study's best
smoothed validation accuracy (any trial's mean of its last 3 evaluations, pruned trials with what they
reported) first reaches 0.90 and 0.95 A*, and the study's final best value (Optuna's best completed trial).
Every study runs all its trials: the final best needs them.

Output in OUT/<task>/<dataplane>/: reference.json, search.csv (one row per study), summary.md, per study
<pruner>/<treatment>-rN.csv (iterations with trial and parameters), -trials.csv, -accuracy.png and (MAIF)
-decisions.csv; <pruner>/compare-rN.png (best accuracy over time, every treatment). --publish merges one row
per task, dataplane, pruner and treatment into docs/data/search/summary.json (lab/summaries.py) with the
per-run CSVs beside it.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import optuna

from mlfc.lab import astar, dataplanes, summaries
from mlfc.lab.cleanup import interrupt_on_sigterm
from mlfc.lab.hpsearch.search import DEFAULT_ITERATIONS, HPSEARCH_PPS, Search, grid_for, run_references, write_reference
from mlfc.lab.realjobs import run_experiment, say
from mlfc.lab.scenarios import TREATMENTS
from mlfc.lab.search import report
from mlfc.lab.search import rows as srows
from mlfc.lab.search.study import PRUNERS, SPACES, StudyPlan, StudyRunner
from mlfc.lab.stack import StackConfig, network_with_control
from mlfc.topologies import dumbbell

DEFAULT_TREATMENTS = ("baseline", "maif")


def plan_for(args: argparse.Namespace) -> StudyPlan:
    return StudyPlan(task=args.task, space=SPACES[args.task], trials=args.trials, concurrency=args.concurrency,
                     iterations=args.iterations, workers=args.workers, eval_every=args.eval_every,
                     compute_s=args.compute_s, model_seed=args.seed, bottleneck_pps=args.bottleneck_pps,
                     timeout_s=args.study_timeout)  # fmt: skip


@dataclass
class Progress:
    """Which study of how many, and an estimate of the time left from the studies so far."""

    total: int
    done: int = 0
    started: float = field(default_factory=time.monotonic)

    def next(self) -> str:
        self.done += 1
        if self.done == 1:
            return f"study 1/{self.total}"
        left = (time.monotonic() - self.started) / (self.done - 1) * (self.total - self.done + 1)
        return f"study {self.done}/{self.total}, about {left / 60:.0f} min left"


def run_plane(args: argparse.Namespace, plane: dataplanes.Dataplane, command: str) -> str:
    out = args.out / args.task / plane.name
    ref = Search(args, grid_for(args.task, args.reference_grid), plane, out)
    run_references(ref)
    write_reference(ref)
    topo = dumbbell(args.trials, args.workers)  # trial n is job n + 1, on that job's hosts
    studies: list[report.Measured] = []
    progress = Progress(args.rounds * len(args.pruners) * len(args.treatments))
    base = StackConfig(name="search", jobs=(), bottleneck_pps=args.bottleneck_pps)
    with network_with_control(topo, base, out / "run", plane) as ctl:
        say(f"network up on {plane.label}: {ctl.probe.describe() if ctl.probe else '-'}")
        runner = StudyRunner(ctl, topo, plan_for(args))
        for rnd in range(args.rounds):
            for pruner in args.pruners:
                studies += run_round(args, runner, ref, plane, rnd, pruner, progress)
                report.write_runs_csv(out / "search.csv", studies)
                (out / "summary.md").write_text(report.summary(rows_of(studies, args, plane, command, ref)) + "\n")
    rows = rows_of(studies, args, plane, command, ref)
    if args.publish:
        runs = report.published_runs(studies, args.task, plane.name, out)
        path = summaries.publish("search", rows, key=srows.KEY, runs=runs, meta={"schema": srows.SCHEMA})
        say(f"published {len(rows)} row(s) to {path}; `make figures` regenerates the docs' table")
    return report.summary(rows)


def run_round(args: argparse.Namespace, runner: StudyRunner, ref: Search, plane: dataplanes.Dataplane, rnd: int,
              pruner: str, progress: Progress) -> list[report.Measured]:  # fmt: skip
    """Round ``rnd``'s study under every treatment (rotated per round) with ``pruner``, the same sampler seed."""
    seed = args.sampler_seed + rnd
    names = list(args.treatments)
    targets = ref.targets()
    mine = []
    for name in names[rnd % len(names) :] + names[: rnd % len(names)]:
        say(f"-- {name}, {pruner}, round {rnd + 1}/{args.rounds} ({progress.next()}); sampler seed {seed}")
        run = runner.run(
            TREATMENTS[name], pruner, rnd, seed, f"search/{name}/{pruner}", tuple(args.coordinator_arg or ())
        )
        mine.append(report.measure(run, targets))
        title = f"{args.task} study, {name}, {pruner}, round {rnd + 1}, {plane.label}: accuracy per trial"
        report.write_study(ref.out, mine[-1], targets, title)
    fifo = next((m for m in mine if m.run.treatment == "baseline"), None)
    for m in mine:
        if fifo is not None and m is not fifo:
            m.same_as_fifo = srows.same_params(m.run.trials, fifo.run.trials)
        say(report.say_study(m))
    title = f"{args.task} study, {pruner}, round {rnd + 1}, {plane.label}: best smoothed accuracy so far"
    report.plot_round(ref.out / pruner / f"compare-r{rnd + 1}.png", mine, targets, title)
    return mine


def rows_of(studies: list[report.Measured], args: argparse.Namespace, plane: dataplanes.Dataplane, command: str,
            ref: Search) -> list[dict]:  # fmt: skip
    space = SPACES[args.task]
    extra = {"a_star": ref.best.describe(), "iterations": args.iterations, "workers": args.workers,
             "bottleneck_pps": args.bottleneck_pps, "measured": time.strftime("%Y-%m-%d"),
             "space": {"width": list(space.widths), "lr": list(space.lr),
                       "batch_size": list(space.batch_sizes)}}  # fmt: skip
    return report.published_rows(studies, task=args.task, dataplane=plane.name, trials=args.trials,
                                 concurrency=args.concurrency, command=command, extra=extra)  # fmt: skip


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m mlfc.lab.search", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--task", default="digits", choices=sorted(SPACES))
    ap.add_argument("--trials", type=int, default=24, help="trials per study (%(default)s)")
    ap.add_argument("--concurrency", type=int, default=6, help="trials at once (%(default)s)")
    ap.add_argument(
        "--pruners", type=lambda t: t.split(","), default=list(PRUNERS), help="comma-separated: median, asha"
    )
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--treatments", type=lambda t: t.split(","), default=list(DEFAULT_TREATMENTS),
                    help="comma-separated, with baseline (%(default)s)")  # fmt: skip
    per = ", ".join(f"{t} {n}" for t, n in DEFAULT_ITERATIONS.items())
    ap.add_argument("--iterations", type=int, default=None, help=f"per trial (default per task, as hpsearch: {per})")
    ap.add_argument("--sampler-seed", type=int, default=0, help="round r's studies: TPE seeded with this + r")
    ap.add_argument("--workers", type=int, default=2, help="workers per trial (%(default)s)")
    ap.add_argument("--eval-every", type=int, default=2, help="validation every k iterations (%(default)s)")
    ap.add_argument("--seed", type=int, default=0, help="model init and data order, every trial")
    ap.add_argument("--compute-s", type=float, default=0.3, help="pad compute to this per iteration (%(default)s s)")
    ap.add_argument("--bottleneck-pps", type=int, default=HPSEARCH_PPS)
    ap.add_argument("--study-timeout", type=float, default=3600.0, help="s; then the study stops (%(default)s)")
    ap.add_argument("--coordinator-arg", action="append", metavar="ARG", help="extra mlfc-coordinator run option")
    ap.add_argument("--reference-grid", default="default", help="A*'s configurations: the task's hpsearch grid")
    ap.add_argument("--plateau-patience", type=int, default=astar.Plateau.patience)
    ap.add_argument("--plateau-max", type=int, default=astar.Plateau.max_iterations)
    ap.add_argument("--cache", type=Path, default=Path("results/hpsearch/astar"), help="A*'s references (%(default)s)")
    ap.add_argument("--dataplane", default="ref", choices=("auto", "bmv2", "ref", "both"))
    ap.add_argument("--out", type=Path, default=Path("results/search"))
    ap.add_argument("--publish", action="store_true", help="merge the rows into docs/data/search/summary.json")
    args = ap.parse_args(argv)
    args.iterations = args.iterations or DEFAULT_ITERATIONS.get(args.task)
    if min(args.trials, args.concurrency, args.rounds, args.workers, args.eval_every) < 1 or args.iterations < 4:
        ap.error("--trials, --concurrency, --rounds, --workers, --eval-every must be >= 1 and --iterations >= 4")
    if args.trials < args.concurrency:
        ap.error("--trials must be >= --concurrency")
    if unknown := [p for p in args.pruners if p not in PRUNERS]:
        ap.error(f"unknown pruner(s) {', '.join(unknown)}: choose from {', '.join(PRUNERS)}")
    if unknown := [t for t in args.treatments if t not in TREATMENTS]:
        ap.error(f"unknown treatment(s) {', '.join(unknown)}: choose from {', '.join(TREATMENTS)}")
    if "baseline" not in args.treatments:
        ap.error("the treatments must include baseline (the times are compared with it)")
    if args.plateau_patience < 1 or args.plateau_max < astar.Plateau.min_iterations:
        ap.error(f"--plateau-patience must be >= 1 and --plateau-max >= {astar.Plateau.min_iterations}")
    try:
        grid_for(args.task, args.reference_grid)
    except argparse.ArgumentTypeError as exc:
        ap.error(str(exc))
    return args


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse(argv)
    command = shlex.join(["python", "-m", "mlfc.lab.search", *argv])
    interrupt_on_sigterm()  # only once the arguments are good: the teardown runs on SIGTERM as on Ctrl-C
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the study's own progress lines say what happens
    return run_experiment("search", args.dataplane, lambda plane: run_plane(args, plane, command),
                          f"{args.out}/{args.task}/<dataplane>/summary.md, search.csv, per-study CSV/PNG")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
