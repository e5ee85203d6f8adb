"""`make approx`: accuracy-centric approximate flow control against full delivery and rigid compression
(issue 25), with real PyTorch jobs.

    python -m mlfc.lab.approx [--model digits-cnn,synthetic-mlp] [--jobs 3] [--no-alone] [--iterations N]
                              [--rounds 3] [--seeds 0,1] [--treatments full,fp16,topk-ef,selective-old,mlfc]
                              [--mlfc-bound 0.5] [--sweep 0.3,0.7] [--topk match|F] [--bottleneck-pps 600]
                              [--dataplane auto|bmv2|ref|both] [--publish] [--out results/approx]

--jobs identical data-parallel jobs (a PS and --workers workers each, same model and seed) share the
dumbbell's bottleneck, compute padded to the model's compute time so that their pushes overload it together
(congested); with --alone (the default) the same treatments' ``full``, ``mlfc`` and ``mlfc-share`` also run
one job by itself (uncongested: the scheme must cost nothing there). Treatments, all in every round and seed:

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
import csv
import math
import shlex
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from mlfc.hosts.transport.recovery import DEFAULT_TOLERATED_LOSS
from mlfc.lab import astar, dataplanes, summaries
from mlfc.lab.cleanup import interrupt_on_sigterm
from mlfc.lab.jobs import JobSpec
from mlfc.lab.realjobs import RealRun, real_compute_s, run_experiment, run_real, say, start_lead, training_spec
from mlfc.lab.results import format_table, percentile, write_csv
from mlfc.lab.rounds import spread
from mlfc.lab.scenarios import TREATMENTS
from mlfc.lab.stack import StackConfig, network_with_control
from mlfc.lab.tta import (
    SMOOTH_WINDOW,
    AccuracyPoint,
    final_mean,
    job_time_to_accuracy,
    plot_accuracy,
    reduction,
)
from mlfc.policy.drop import DropPolicy
from mlfc.policy.withhold import WithholdPolicy
from mlfc.topologies import dumbbell

NO_SELECTIVE_DROP = DropPolicy(min_importance=(0, 0, 0, 0))  # tail drop only
FRACTION = 0.95
FINAL_EVALUATIONS = 5  # the final accuracy is the mean of a job's last 5 evaluations
OLD_LOSS_BOUND = 0.1  # selective-old: the bound measured before issue 25


@dataclass(frozen=True)
class Model:
    """One of the experiment's models: a task, its width and learning rate, the compute it is padded to and
    how many iterations a run takes (enough for full delivery to reach 0.95 A* with room to spare)."""

    task: str
    width: int
    lr: float
    compute_s: float
    iterations: int
    what: str


# digits-cnn: the digits CNN (153 KB of gradients, compute padded to 0.1 s); synthetic-mlp: a wide MLP on
# the generated task, whose real compute is a fraction of a millisecond: communication dominates.
MODELS: dict[str, Model] = {
    "digits-cnn": Model("digits", 16, 0.1, 0.1, 100, "digits CNN, width 16"),
    "synthetic-mlp": Model("synthetic", 256, 0.1, 0.05, 160, "MLP width 256 on the generated 8-class task"),
}
TREATMENT_NAMES = ("full", "fp16", "topk-ef", "selective-old", "mlfc-push", "mlfc", "mlfc-share")
ALONE_TREATMENTS = ("full", "mlfc", "mlfc-share")  # the schemes must cost nothing alone


@dataclass(frozen=True)
class Variant:
    """One way of running the jobs: a loss bound, a drop policy at the switch, a push compression, whether
    the worker withholds and feeds back, and the window's reaction to a tolerated drop."""

    name: str
    loss_bound: float = 0.0
    drop_policy: DropPolicy = NO_SELECTIVE_DROP
    compress: str = "none"  # none | fp16 | topk (the fraction in ``topk``)
    topk: float | None = None  # topk's fraction; None: matched to the round's mlfc run
    loss_feedback: bool = False  # zero-filled (and withheld) elements go out with the next push
    withhold: bool = False  # the network decides how much of a push is withheld
    withhold_signal: str = WithholdPolicy().signal  # by which congestion signal (mlfc.policy.withhold)
    pull_bound: float = 0.0  # approximate pulls: at most this share of a pulled tensor left out (0: whole)
    tolerated_loss: str = DEFAULT_TOLERATED_LOSS

    def compression(self, topk: float | None = None) -> str:
        if self.compress != "topk":
            return self.compress
        f = self.topk if self.topk is not None else topk
        if f is None:
            raise ValueError(f"{self.name}: no top-k fraction (no mlfc run of this round to match)")
        return f"topk:{f:.4g}"

    def describe(self) -> str:
        if self.compress == "topk":
            return "top-k pushes with error feedback, " + (
                f"F = {self.topk:g}" if self.topk is not None else "bytes matched to mlfc"
            )
        if self.compress != "none":
            return f"{self.compress} pushes"
        if self.loss_bound == 0:
            return "every chunk delivered, tail drop"
        parts = [f"loss bound {self.loss_bound:g}", "selective drop"]
        parts.append(f"withheld as congested ({self.withhold_signal})" if self.withhold else "")
        parts.append("loss feedback" if self.loss_feedback else "lost for good")
        parts.append(f"pulls left out up to {self.pull_bound:g}" if self.pull_bound else "")
        parts.append(f"tolerated drop: {self.tolerated_loss}")
        return ", ".join(p for p in parts if p)


def variants(args: argparse.Namespace) -> list[Variant]:
    """The treatments in the order named, then the sweep; topk-ef runs after mlfc when it matches it."""
    made = {
        "full": Variant("full"),
        "fp16": Variant("fp16", compress="fp16"),
        "topk-ef": Variant("topk-ef", compress="topk", topk=args.topk),
        "selective-old": Variant(
            "selective-old", OLD_LOSS_BOUND, DropPolicy(), loss_feedback=False, tolerated_loss="loss"
        ),
        "mlfc-push": mlfc_variant("mlfc-push", args.mlfc_bound, pulls=False),
        "mlfc": mlfc_variant("mlfc", args.mlfc_bound),
        "mlfc-share": replace(mlfc_variant("mlfc-share", args.mlfc_bound), withhold_signal="share"),
    }
    out = [made[n] for n in args.treatments]
    out += [mlfc_variant(f"mlfc-b{b:g}", b) for b in args.sweep if b != args.mlfc_bound]
    return out


def mlfc_variant(name: str, bound: float, pulls: bool = True) -> Variant:
    return Variant(name, bound, DropPolicy(), loss_feedback=True, withhold=True, pull_bound=bound if pulls else 0.0)


def run_order(vs: Sequence[Variant], rnd: int) -> list[Variant]:
    """Round ``rnd``'s order: rotated by the round (slow drift of the machine hits all alike), a matched
    topk-ef moved right after mlfc (it needs mlfc's bytes)."""
    k = rnd % len(vs) if vs else 0
    order = list(vs[k:]) + list(vs[:k])
    matched = [v for v in order if v.compress == "topk" and v.topk is None]
    if matched and any(v.name == "mlfc" for v in order):
        order = [v for v in order if v not in matched]
        i = next(i for i, v in enumerate(order) if v.name == "mlfc")
        order[i + 1 : i + 1] = matched
    return order


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


def jobs_for(
    args: argparse.Namespace, model: Model, v: Variant, n: int, seed: int, topk: float | None
) -> tuple[JobSpec, ...]:
    out = []
    for j in range(1, n + 1):
        spec = training_spec(j, task=model.task, width=model.width, lr=model.lr, compute_s=model.compute_s,
                             workers=args.workers, eval_every=args.eval_every, seed=seed, loss_bound=v.loss_bound,
                             name=v.name)  # fmt: skip
        t = replace(spec.training, compress=v.compression(topk), loss_feedback=v.loss_feedback, withhold=v.withhold,
                    withhold_signal=v.withhold_signal, pull_loss_bound=v.pull_bound)  # fmt: skip
        out.append(replace(spec, training=t))
    return tuple(out)


def stack(
    args: argparse.Namespace, model: Model, v: Variant, n: int, seed: int, topk: float | None = None
) -> StackConfig:
    return StackConfig(
        name=f"approx/{v.name}",
        jobs=jobs_for(args, model, v, n, seed, topk),
        iterations=args.iterations or model.iterations,
        cc=TREATMENTS["baseline"].cc,
        bottleneck_pps=args.bottleneck_pps,
        drop_policy=v.drop_policy,
        start_lead_s=start_lead(n),
        tolerated_loss=v.tolerated_loss,
    )


@dataclass
class Result:
    model: str
    variant: Variant
    jobs: int
    seed: int
    round: int
    run: RealRun
    a_star: float
    model_bytes: int  # one worker's full push (and pull) per iteration
    compression: str = "none"
    csv: Path | None = None

    @property
    def congested(self) -> bool:
        return self.jobs > 1

    def points(self) -> dict[int, list[AccuracyPoint]]:
        return self.run.points()

    def durations(self) -> list[float]:
        return [r.duration for r in self.run.records if r.iteration >= 1]

    @property
    def avg(self) -> float:
        d = self.durations()
        return statistics.fmean(d) if d else math.nan

    @property
    def p99(self) -> float:
        return percentile(self.durations(), 99)

    def tta(self) -> list[float]:
        target = FRACTION * self.a_star
        return [job_time_to_accuracy(p, target, self.run.start, SMOOTH_WINDOW) for p in self.points().values()]

    @property
    def mean_tta(self) -> float:
        """Mean over the jobs of each job's time to 0.95 A*; NaN unless every job got there."""
        t = self.tta()
        return statistics.fmean(t) if t and not any(math.isnan(x) for x in t) else math.nan

    @property
    def final(self) -> float:
        f = [final_mean(p, FINAL_EVALUATIONS) for p in self.points().values()]
        return statistics.fmean(f) if f else math.nan

    def _share(self, sent) -> float:
        """The mean of ``sent(record)`` over the run's records, over one full tensor set's bytes."""
        recs = self.run.records
        if not recs or self.model_bytes <= 0:
            return math.nan
        return statistics.fmean(sent(r) for r in recs) / self.model_bytes

    @property
    def push_share(self) -> float:
        """Bytes the pushes handed to the network over full delivery's (withheld chunks and compression off)."""
        return self._share(lambda r: r.sent_bytes if r.sent_bytes is not None else r.bytes)

    @property
    def pull_share(self) -> float:
        """Bytes the pulls brought over full delivery's (the chunks the PS left out off)."""
        return self._share(lambda r: r.pull_sent_bytes if r.pull_sent_bytes is not None else self.model_bytes)

    @property
    def bytes_share(self) -> float:
        """Pushes and pulls as sent over full delivery's pushes and pulls."""
        return (self.push_share + self.pull_share) / 2.0

    @property
    def lost_chunks(self) -> int:
        return sum(r.lost_chunks for r in self.run.records)

    @property
    def drops(self) -> int:
        return sum(c.get("drops", 0) for c in self.run.run.counters.values())

    @property
    def retransmits(self) -> int:
        return sum(r.retransmits for r in self.run.records)


@dataclass
class Experiment:
    args: argparse.Namespace
    model_name: str
    plane: dataplanes.Dataplane
    out: Path
    references: dict[int, astar.Reference] = field(default_factory=dict)  # seed -> converged run
    probe: str = ""
    padding: float = math.nan
    results: list[Result] = field(default_factory=list)

    @property
    def model(self) -> Model:
        return MODELS[self.model_name]

    def rows(self, name: str, jobs: int) -> list[Result]:
        mine = (r for r in self.results if r.variant.name == name and r.jobs == jobs)
        return sorted(mine, key=lambda r: (r.round, r.seed))

    def groups(self) -> list[tuple[int, str]]:
        """(jobs, treatment) in the order they first ran, congested first."""
        seen: dict[tuple[int, str], None] = {}
        for r in sorted(self.results, key=lambda r: -r.jobs):
            seen.setdefault((r.jobs, r.variant.name), None)
        return list(seen)


def run_references(e: Experiment) -> None:
    a, m = e.args, e.model
    plateau = astar.Plateau(window=SMOOTH_WINDOW, eval_every=a.eval_every)
    for seed in a.seeds:
        ref = astar.reference(a.cache, m.task, m.width, m.lr, seed, a.workers, None, plateau)
        e.references[seed] = ref
        reach = ref.iteration_reaching(FRACTION * ref.a_star)
        how = "cached" if ref.cached else f"trained in {ref.seconds:.0f} s"
        say(f"-- A* ({e.model_name}, seed {seed}): {ref.a_star:.3f} after {ref.iterations[-1]} iterations "
            f"({how}); 0.95 A* at iteration {reach} in process")  # fmt: skip
        if reach is None or reach > stack(a, m, Variant("x"), 1, seed).iterations:
            say("   warning: the runs are shorter than where full delivery reaches 0.95 A* in process")


def run_variant(e: Experiment, ctl, topo, v: Variant, jobs: int, seed: int, rnd: int) -> Result:
    topk = None
    if v.compress == "topk" and v.topk is None:
        mine = [
            r for r in e.results if r.variant.name == "mlfc" and r.round == rnd and r.seed == seed and r.jobs == jobs
        ]
        if not mine:
            raise RuntimeError("topk-ef --topk match needs the round's mlfc run first (treatments include mlfc)")
        topk = max(1e-3, min(1.0, mine[-1].push_share / 2))
    cfg = stack(e.args, e.model, v, jobs, seed, topk)
    run = run_real(ctl, topo, cfg, watch=False)
    res = Result(e.model_name, v, jobs, seed, rnd, run, e.references[seed].a_star, cfg.jobs[0].profile.push_bytes,
                 v.compression(topk))  # fmt: skip
    stem = e.out / f"{v.name}-j{jobs}-s{seed}-r{rnd + 1}"
    res.csv = stem.parent / f"{stem.name}.csv"
    write_csv(res.csv, run.records)
    plot_accuracy(stem.parent / f"{stem.name}-accuracy.png", res.points(),
                  f"{e.model_name} {v.name} ({res.compression if v.compress != 'none' else v.describe()}), {jobs} "
                  f"job(s), seed {seed}, round {rnd + 1}, {e.plane.label}",
                  run.start, {"0.95 A*": FRACTION * res.a_star})  # fmt: skip
    n_hit = sum(not math.isnan(t) for t in res.tta())
    say(
        f"   {v.name}, {jobs} job(s), seed {seed}, round {rnd + 1}: {res.avg:.3f} s/iteration (p99 {res.p99:.3f}), "
        f"0.95 A* after {res.mean_tta:.1f} s ({n_hit}/{len(res.tta())} jobs), final accuracy {res.final:.4f}, "
        f"bytes {100 * res.bytes_share:.0f} % of full (pushes {100 * res.push_share:.0f} %, pulls "
        f"{100 * res.pull_share:.0f} %), {res.lost_chunks} "
        f"chunks zero-filled, {res.drops} switch drops, {res.retransmits} retransmits"
    )
    if run.errors:
        say(f"   errors: {'; '.join(run.errors)}")
    return res


def table(e: Experiment) -> str:
    rows = []
    for jobs, name in e.groups():
        mine = e.rows(name, jobs)
        full = {(r.round, r.seed): r for r in e.rows("full", jobs)}
        base = [full.get((r.round, r.seed)) for r in mine]
        faster = [reduction(b.mean_tta, r.mean_tta) if b else math.nan for r, b in zip(mine, base, strict=True)]
        below = [100 * (b.final - r.final) if b else math.nan for r, b in zip(mine, base, strict=True)]
        hit = "/".join(f"{sum(not math.isnan(t) for t in r.tta())}" for r in mine)
        rows.append([
            name, jobs, mine[0].variant.describe(), len(mine),
            spread([r.avg for r in mine], fmt=".3f"), spread([r.p99 for r in mine], fmt=".3f"),
            spread([r.mean_tta for r in mine], fmt=".1f"), hit,
            "-" if name == "full" else spread(faster, 100, unit=" %"),
            spread([r.final for r in mine], fmt=".4f"),
            "-" if name == "full" else spread(below, fmt=".2f", unit=" pp"),
            spread([r.bytes_share for r in mine], 100, unit=" %"),
            spread([r.lost_chunks for r in mine]), spread([r.drops for r in mine]),
            spread([r.retransmits for r in mine]),
            f"{100 * min(r.run.run.utilisation for r in mine):.0f} %",
        ])  # fmt: skip
    headers = ["treatment", "jobs", "what", "runs", "avg iter s", "p99 iter s", "to 0.95 A* s", "jobs there",
               "less time than full", "final acc (last 5)", "acc below full", "bytes vs full", "zero-filled chunks",
               "switch drops", "retransmits", "link use (min)"]  # fmt: skip
    return format_table(headers, rows)


def mean_curve(r: Result) -> list[AccuracyPoint]:
    """The mean accuracy over a run's jobs at each evaluated iteration, at the time the last job had it."""
    by_it: dict[int, list[AccuracyPoint]] = {}
    for p in (p for ps in r.points().values() for p in ps):
        by_it.setdefault(p.iteration, []).append(p)
    return [AccuracyPoint(max(p.time for p in ps), it, statistics.fmean(p.accuracy for p in ps))
            for it, ps in sorted(by_it.items())]  # fmt: skip


def plot_treatments(path: Path, e: Experiment, jobs: int, seed: int, rnd: int) -> None:
    runs = [r for r in e.results if r.jobs == jobs and r.seed == seed and r.round == rnd]
    if not runs:
        return
    curves = {r.variant.name: {0: mean_curve(r)} for r in runs}
    starts = {r.variant.name: r.run.start for r in runs}
    title = (f"{e.model_name}: mean accuracy of {jobs} job(s) per treatment, seed {seed}, round {rnd + 1}, "
             f"{e.plane.label}")  # fmt: skip
    plot_accuracy(path, curves, title, starts, {"0.95 A*": FRACTION * e.references[seed].a_star})


RUN_FIELDS = ("dataplane", "model", "treatment", "jobs", "seed", "round", "compression", "loss_bound", "a_star",
              "avg_s", "p99_s", "tta_095_s", "jobs_reached", "final_acc", "bytes_share", "push_share",
              "zero_filled_chunks", "switch_drops", "retransmits", "utilisation", "cpu_busy", "errors")  # fmt: skip


def write_runs_csv(path: Path, e: Experiment) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(RUN_FIELDS)
        for r in e.results:
            w.writerow([
                e.plane.name, r.model, r.variant.name, r.jobs, r.seed, r.round + 1, r.compression,
                r.variant.loss_bound, f"{r.a_star:.4f}", f"{r.avg:.4f}", f"{r.p99:.4f}", f"{r.mean_tta:.3f}",
                sum(not math.isnan(t) for t in r.tta()), f"{r.final:.4f}", f"{r.bytes_share:.4f}",
                f"{r.push_share:.4f}", r.lost_chunks, r.drops, r.retransmits, f"{r.run.run.utilisation:.3f}",
                f"{r.run.run.cpu.mean_busy:.1f}" if r.run.run.cpu else "", "; ".join(r.run.errors),
            ])  # fmt: skip


def summary(e: Experiment) -> str:
    a, m = e.args, e.model
    refs = ", ".join(f"seed {s}: {r.a_star:.3f}" for s, r in e.references.items())
    lines = [
        f"## Approximate flow control, {e.model_name}, on {e.plane.label} ({time.strftime('%Y-%m-%d %H:%M')})",
        "",
        f"dataplane: {dataplanes.describe(e.plane)}; {e.probe}",
        f"{m.what} ({e.results[0].model_bytes if e.results else '?'} bytes pushed per worker per "
        f"iteration), lr {m.lr:g}, {a.workers} workers per job, {a.iterations or m.iterations} iterations, compute "
        f"padded to {m.compute_s:g} s (real forward/backward {1000 * e.padding:.1f} ms), bottleneck "
        f"{a.bottleneck_pps} pkt/s, queue depth 64; {a.rounds} round(s) x seeds {','.join(map(str, a.seeds))}.",
        f"A* (converged in process, lab/astar.py): {refs}. Time to 0.95 A* on the smoothed curve (mean of "
        f"{SMOOTH_WINDOW} evaluations); final accuracy: mean of the last {FINAL_EVALUATIONS} evaluations.",
        "",
        "```",
        table(e),
        "```",
        "",
    ]
    return "\n".join(lines)


# --- the published rows (docs/data/approx, issue 25 item 8) -------------------------------------------

KEY = ("model", "dataplane", "jobs", "treatment")
SCHEMA = (
    "issue 25: one row per model, dataplane, jobs and treatment; time_to_095 (s, smoothed curve, mean over the "
    "run's jobs) and final_acc (mean of each job's last 5 evaluations, mean over jobs) one per run; "
    "bytes_sent_share: pushes as sent plus pulls over full delivery's, mean over runs"
)


def published_rows(e: Experiment, command: str) -> list[tuple[dict, list[tuple[Path, str]]]]:
    out = []
    prefix = f"{e.model_name}/{e.plane.name}"
    for jobs, name in e.groups():
        mine = e.rows(name, jobs)
        full = {(r.round, r.seed): r for r in e.rows("full", jobs)}
        less = [reduction(full[(r.round, r.seed)].mean_tta, r.mean_tta) if (r.round, r.seed) in full else math.nan
                for r in mine]  # fmt: skip
        row = {
            "model": e.model_name,
            "dataplane": e.plane.name,
            "jobs": jobs,
            "congested": jobs > 1,
            "treatment": name,
            "rounds": len({r.round for r in mine}),
            "seeds": sorted({r.seed for r in mine}),
            "time_to_095": [_num(r.mean_tta) for r in mine],
            "final_acc": [_num(r.final) for r in mine],
            "bytes_sent_share": _num(statistics.fmean(r.bytes_share for r in mine)),
            "less_than_full_095": [_num(x) for x in less],
            "runs": [{"round": r.round + 1, "seed": r.seed, "compression": r.compression} for r in mine],
            "what": mine[0].variant.describe(),
            "loss_bound": mine[0].variant.loss_bound,
            "a_star": {str(s): round(ref.a_star, 4) for s, ref in e.references.items()},
            "iterations": e.args.iterations or e.model.iterations,
            "bottleneck_pps": e.args.bottleneck_pps,
            "errors": sum(len(r.run.errors) for r in mine),
            "measured": time.strftime("%Y-%m-%d"),
            "command": command,
        }
        runs = [(r.csv, f"{prefix}/{r.csv.name}") for r in mine if r.csv is not None]
        out.append((row, runs))
    return out


def _num(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, 4)


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
            total = args.rounds * len(args.seeds) * (len(vs) + len(alone))
            k = 0
            for rnd in range(args.rounds):
                for seed in args.seeds:
                    for jobs, group in ((args.jobs, vs), (1, alone)):
                        for v in run_order(group, rnd):
                            k += 1
                            say(f"-- {name}: {v.name} ({v.describe()}), {jobs} job(s), seed {seed}, round "
                                f"{rnd + 1}/{args.rounds} ({k}/{total})")  # fmt: skip
                            e.results.append(run_variant(e, ctl, topo, v, jobs, seed, rnd))
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
