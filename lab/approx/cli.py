"""`make approx`: accuracy-centric approximate flow control against full delivery and rigid compression
(issue 25), with real PyTorch jobs.

    python -m mlfc.lab.approx [--model digits-cnn,synthetic-mlp] [--jobs 3] [--no-alone | --no-congested]
                              [--iterations N]
                              [--rounds 3] [--seeds 0,1] [--treatments full,fp16,topk-ef,selective-old,mlfc]
                              [--mlfc-bound 0.5] [--sweep 0.3,0.7] [--topk match|F] [--bottleneck-pps 600]
                              [--dataplane auto|bmv2|ref|both] [--publish] [--out results/approx]

--jobs identical data-parallel jobs (a PS and --workers workers each, same model and seed) share the
dumbbell's bottleneck, compute padded to the model's compute time so that their pushes overload it together
(congested); with --alone (the default) the same treatments' ``full``, ``mlfc``, ``mlfc-share``,
``mlfc-telemetry``, ``mlfc-precision`` and ``mlfc-precision-pulls`` also run one job by itself (uncongested:
the scheme must cost nothing there). Treatments, all in every round and seed:

* ``full``: every chunk delivered (loss bound 0: retransmitted until complete), tail drop only;
* ``fp16``: rigid half-precision pushes (hosts/training/compress.py), lossless;
* ``topk-ef``: rigid top-k pushes with error feedback, lossless; ``--topk match`` (default) sends as many
  push bytes as the same round's ``mlfc`` run did (top-k's k indices and k values take 8 bytes an element,
  so F = mlfc's push share / 2);
* ``selective-old``: the design measured before issue 25: the switch's selective drop
  (mlfc.policy.drop), a 0.1 loss bound, zero-filled elements lost for good, and each tolerated drop
  halving the window as a loss does;
* ``mlfc-push``: the network decides how much (mlfc.policy.withhold): before each push the worker withholds
  its least important chunks, as much as its congestion estimate says (nothing on a free link) and at most
  --mlfc-bound of each tensor; what is withheld or dropped goes out with the next push (error feedback:
  loss becomes delay); a tolerated drop cuts the window in proportion to the share dropped
  (hosts/transport/recovery.py); the switch's selective drop stays on for bursts;
* ``mlfc``: the same, and the pulls too (hosts/training/pull_copies.py): under congestion the PS leaves out
  the parameter chunks that changed least since the worker last got them, up to the same bound, and the
  worker keeps its previous values there; what was left out goes out once it is among the larger changes.
  Both directions read congestion as the share of chunks marked or dropped (mlfc.policy.withhold);
* ``mlfc-share``: ``mlfc`` with the third design's signal, the others' share of a standing queue
  (mlfc.policy.withhold), measured beside it in the same runs.
* ``mlfc-telemetry``: ``mlfc`` with issue 46's signal: the queue depth the switches wrote into the shim (the
  deepest on the path, echoed in the ACKs) says whether the link is congested, and the flow's delivery rate
  against the link's rate how much of the excess is its own (mlfc.policy.withhold); nothing withheld while
  the depth says the link has room.
* ``mlfc-precision``: ``mlfc-telemetry`` whose pushes shed the share first by precision (issue 46 item 3,
  mlfc.policy.precision): the whole push at fp16 or int8, whichever sheds nearest the share, and only what
  that cannot shed withheld; the rounding joins the error-feedback residual. The ``precision`` column says
  what share of the pushes' chunks went fp32, fp16, int8 or withheld.
* ``mlfc-precision-pulls``: ``mlfc-precision`` with the pulls by precision too (PS --pull-precision,
  hosts/training/pull_copies.py): a congested pull goes as the change since the worker's copy at fp16 or
  int8, and only what that cannot shed is left out, so the worker's model (the one rank 0 evaluates) stays
  within the rounding of the PS's instead of stale by whole chunks.
* ``mlfc-precision-repair``: ``mlfc-precision-pulls`` that tolerates only what the hosts shed by plan (the
  chunks withheld or left out): the switch tail-drops (no selective drop) and what it drops is retransmitted,
  both ways (worker --repair-drops, PS --pull-repair-drops; mlfc.policy.withhold.repair_bound), so the
  gradient the PS applies is short only by the planned, error-fed share.
* --sweep B,...: ``mlfc`` at other bounds (published as ``mlfc-bB``).

A* per model and seed is the converged accuracy of one job trained to a plateau in process (lab/astar.py,
cached under OUT/astar/), not a short run's. Per run: each job's time to 0.95 A* on its smoothed curve (mean
of 3 consecutive evaluations; the run's figure is the mean over its jobs, NaN unless all got there), the
final accuracy (each job's mean over its last 5 evaluations, then the mean over jobs), the bytes sent
(pushes as sent, pulls in full) as a share of full delivery's, the chunks zero-filled, the switch's drops.

Output in OUT/<model>/<dataplane>/: summary.md, approx.csv (a row per run), per run the iteration CSV and an
accuracy PNG, accuracy-s<seed>-r<round>.png (every treatment's mean accuracy over time). --publish merges one
row per model, dataplane, jobs and treatment into docs/data/approx/summary.json (``make figures``).
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from mlfc.lab import dataplanes, summaries
from mlfc.lab.approx.report import KEY, SCHEMA, plot_treatments, published_rows, summary, write_runs_csv
from mlfc.lab.approx.run import Experiment, run_references, run_variant
from mlfc.lab.approx.variants import ALONE_TREATMENTS, MODELS, TREATMENT_NAMES, Variant, run_order, stack, variants
from mlfc.lab.cleanup import interrupt_on_sigterm
from mlfc.lab.realjobs import real_compute_s, run_experiment, say
from mlfc.lab.stack import network_with_control
from mlfc.topologies import dumbbell


def parse_names(text: str, allowed: Sequence[str]) -> tuple[str, ...]:
    names = tuple(t.strip() for t in text.split(",") if t.strip())
    unknown = [t for t in names if t not in allowed]
    if unknown or not names or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a comma list of {', '.join(allowed)} (no repeats)")
    return names


def parse_treatments(text: str) -> tuple[str, ...]:
    return parse_names(text, TREATMENT_NAMES)


def parse_models(text: str) -> tuple[str, ...]:
    return parse_names(text, tuple(MODELS))


def parse_bounds(text: str) -> list[float]:
    out = []
    for item in (i for i in text.split(",") if i.strip()):
        try:
            b = float(item)
        except ValueError:
            b = math.nan
        if not 0.0 < b <= 1.0:
            raise argparse.ArgumentTypeError(f"loss bound {item!r}: expected a fraction in (0, 1]")
        out.append(b)
    return out


def parse_seeds(text: str) -> list[int]:
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seeds {text!r}: expected integers, e.g. 0,1") from None
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise argparse.ArgumentTypeError(f"--seeds {text!r}: distinct integers >= 0")
    return seeds


def parse_topk(text: str) -> float | None:
    if text == "match":
        return None
    try:
        f = float(text)
    except ValueError:
        f = math.nan
    if not 0.0 < f <= 1.0:
        raise argparse.ArgumentTypeError(f"--topk {text!r}: 'match' or a fraction in (0, 1]")
    return f


def run_plane(args: argparse.Namespace, plane: dataplanes.Dataplane, command: str) -> str:
    texts = []
    topo = dumbbell(args.jobs, args.workers)
    first = MODELS[args.model[0]]
    with network_with_control(topo, stack(args, first, Variant("full"), args.jobs, args.seeds[0]),
                              args.out / "run" / plane.name, plane) as ctl:  # fmt: skip
        probe = ctl.probe.describe()
        say(f"network up on {plane.label}: {probe}")
        for name in args.model:
            e = Experiment(args, name, plane, args.out / name / plane.name, probe=probe)
            e.padding = real_compute_s(e.model.task, e.model.width)
            run_references(e)
            vs = variants(args)
            alone = [v for v in vs if v.name in ALONE_TREATMENTS] if args.alone else []
            congested = vs if args.congested else []
            total = args.rounds * len(args.seeds) * (len(congested) + len(alone))
            k = 0
            for rnd in range(args.rounds):
                for seed in args.seeds:
                    for jobs, group in ((args.jobs, congested), (1, alone)):
                        for v in run_order(group, rnd):
                            k += 1
                            say(f"-- {name}: {v.name} ({v.describe()}), {jobs} job(s), seed {seed}, round "
                                f"{rnd + 1}/{args.rounds} ({k}/{total})")  # fmt: skip
                            e.results.append(run_variant(e, ctl, topo, v, jobs, seed, rnd))
                        if group:
                            plot_treatments(e.out / f"accuracy-j{jobs}-s{seed}-r{rnd + 1}.png", e, jobs, seed, rnd)
                    write_runs_csv(e.out / "approx.csv", e)
                    (e.out / "summary.md").write_text(summary(e))
                say(summary(e))
            if args.publish:
                rows, runs = zip(*published_rows(e, command), strict=True)
                path = summaries.publish("approx", list(rows), key=KEY, runs=[x for rs in runs for x in rs],
                                       meta={"schema": SCHEMA})  # fmt: skip
                say(f"published {len(rows)} row(s) to {path}; `make figures` regenerates the docs' tables")
            texts.append(summary(e))
    return "\n\n".join(texts)


def without_out(argv: list[str]) -> list[str]:
    """The command line without ``--out DIR``: where a run wrote its files is not what it measured, and a
    published row's command must rerun it anywhere."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--out":
            skip = True
        elif not arg.startswith("--out="):
            out.append(arg)
    return out


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(
        prog="python -m mlfc.lab.approx", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--model", type=parse_models, default=tuple(MODELS), help="comma list of %(default)s")
    ap.add_argument("--jobs", type=int, default=3, help="jobs on the bottleneck in the congested runs (%(default)s)")
    ap.add_argument("--no-alone", dest="alone", action="store_false", help="skip the one-job (uncongested) runs")
    ap.add_argument("--no-congested", dest="congested", action="store_false",
                    help="only the one-job runs (adds alone rows beside congested rows published earlier)")  # fmt: skip
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seeds", type=parse_seeds, default=[0, 1], help="model init and data order (0,1)")
    ap.add_argument("--eval-every", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=None, help="per run (default per model: "
                    + ", ".join(f"{n} {m.iterations}" for n, m in MODELS.items()) + ")")  # fmt: skip
    ap.add_argument("--mlfc-bound", type=float, default=0.5, help="mlfc's loss bound per tensor (%(default)s)")
    ap.add_argument("--sweep", type=parse_bounds, default=[], help="mlfc at these other bounds too, e.g. 0.3,0.7")
    ap.add_argument("--treatments", type=parse_treatments, default=TREATMENT_NAMES,
                    help=f"comma list of {', '.join(TREATMENT_NAMES)} (all)")  # fmt: skip
    ap.add_argument("--topk", type=parse_topk, default=None, help="topk-ef's fraction: match (mlfc's bytes) or F")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bottleneck-pps", type=int, default=600)
    ap.add_argument("--cache", type=Path, default=None, help="converged references (default OUT/astar)")
    ap.add_argument("--dataplane", default="auto", choices=("auto", "bmv2", "ref", "both"))
    ap.add_argument("--out", type=Path, default=Path("results/approx"))
    ap.add_argument("--publish", action="store_true", help="merge the rows into docs/data/approx/summary.json")
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.jobs < 2 or args.workers < 1 or args.eval_every < 1 or (args.iterations or 4) < 4:
        ap.error("--rounds, --workers, --eval-every must be >= 1, --jobs >= 2 (congested), --iterations >= 4")
    if not (args.congested or args.alone):
        ap.error("--no-congested with --no-alone leaves nothing to run")
    if not args.congested and not set(args.treatments) & set(ALONE_TREATMENTS):
        ap.error(f"--no-congested runs only {', '.join(ALONE_TREATMENTS)}: none among --treatments")
    if not 0.0 < args.mlfc_bound <= 1.0:
        ap.error("--mlfc-bound must be in (0, 1]")
    if "topk-ef" in args.treatments and args.topk is None and "mlfc" not in args.treatments:
        ap.error("topk-ef with --topk match needs mlfc among the treatments (or give --topk F)")
    args.cache = args.cache or args.out / "astar"
    command = shlex.join(["python", "-m", "mlfc.lab.approx", *without_out(argv)])
    interrupt_on_sigterm()
    return run_experiment(
        "approx",
        args.dataplane,
        lambda plane: run_plane(args, plane, command),
        f"{args.out}/<model>/<dataplane>/summary.md, approx.csv, accuracy-*.png, per-run CSV/PNG",
    )


if __name__ == "__main__":
    sys.exit(main())
