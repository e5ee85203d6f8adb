"""`make approx`: approximate flow control under congestion, with real PyTorch jobs.

    python -m mlfc.lab.approx [--jobs 3] [--width 16] [--lr 0.1] [--compute-s 0.1] [--iterations 80]
                              [--loss-bound 0.1] [--sweep 0.02,0.05,0.2,0.4] [--rigid fp16] [--rounds 3]
                              [--treatments full,selective,rigid] [--loss-feedback] [--tolerated-loss loss]
                              [--bottleneck-pps 600] [--dataplane auto|bmv2|ref|both] [--out results/approx]

--jobs identical data-parallel jobs (a PS and --workers workers each, digits, the same seed) share the
dumbbell's bottleneck; compute is padded to --compute-s so that their pushes overload it together. Treatments:

* ``full``: every chunk delivered (loss bound 0: the transport retransmits until complete); the switch's
  selective drop off (plain tail drop), so nothing but congestion loses packets;
* ``selective``: the switch's drop policy on (mlfc.policy.drop's default: chunks below importance 2, 4, 8
  dropped from queue depths 16, 32, 48) and the bounded-loss PS: a push tolerates --loss-bound of each
  tensor's bytes (unprotected chunks only), zero-filled and averaged over what arrived
  (mlfc/policy/aggregation.py);
* ``rigid``: the host-side baseline that ignores the network: every push compressed (--rigid: fp16, or
  topk:F with error feedback; hosts/training/compress.py), loss bound 0, no selective drop;
* the sweep: ``selective`` at each --sweep loss bound, to show where accuracy starts to suffer.

``selective`` and the sweep lose zero-filled elements for good unless --loss-feedback (the worker adds them to
the tensor's next push: hosts/training/residual.py); --tolerated-loss sets every sender's window reaction to
a tolerated loss (loss: halve, as today; ecn: as one ECN mark; none; hosts/transport/config.py).

A* is the final validation accuracy of one job trained alone (full delivery); per run the table gives the
average and p99 iteration time, each job's time to 0.95 A* (mean over the jobs; how many got there), the
final accuracy (mean over the jobs), the chunks the PS zero-filled and the switch's selective drops. Rounds
repeat every treatment (rotated order); figures are mean (min..max) over rounds.

Output in OUT/<dataplane>/: summary.md, approx.csv (one row per run), per run the iteration CSV and an
accuracy-vs-time PNG; accuracy.png (full, selective, rigid in one plot), sweep.png (loss bound vs final
accuracy and time to 0.95 A*).
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from mlfc.hosts.transport.recovery import TOLERATED_LOSS_REACTIONS
from mlfc.lab import dataplanes
from mlfc.lab.cleanup import interrupt_on_sigterm
from mlfc.lab.jobs import JobSpec
from mlfc.lab.realjobs import RealRun, real_compute_s, run_experiment, run_real, say, start_lead, training_spec
from mlfc.lab.results import format_table, percentile, write_csv
from mlfc.lab.rounds import spread
from mlfc.lab.scenarios import TREATMENTS
from mlfc.lab.stack import StackConfig, network_with_control
from mlfc.lab.tta import AccuracyPoint, final_accuracy, job_time_to_accuracy, plot_accuracy, reduction
from mlfc.policy.drop import DropPolicy
from mlfc.topologies import dumbbell

NO_SELECTIVE_DROP = DropPolicy(min_importance=(0, 0, 0, 0))  # tail drop only
FRACTION = 0.95


@dataclass(frozen=True)
class Variant:
    """One way of running the jobs: a loss bound, a drop policy at the switch, a push compression."""

    name: str
    loss_bound: float = 0.0
    drop_policy: DropPolicy = NO_SELECTIVE_DROP
    compress: str = "none"
    sweep: bool = False  # a point of the loss-bound sweep, not one of the three treatments
    loss_feedback: bool = False  # zero-filled elements go out with the next push (off: the measured "selective")

    def describe(self) -> str:
        drop = "selective drop on" if self.drop_policy != NO_SELECTIVE_DROP else "tail drop only"
        comp = f", pushes {self.compress}" if self.compress != "none" else ""
        feedback = ", loss feedback" if self.loss_feedback and self.loss_bound > 0 else ""
        return f"loss bound {self.loss_bound:g}, {drop}{comp}{feedback}"


TREATMENT_NAMES = ("full", "selective", "rigid")


def variants(args: argparse.Namespace) -> list[Variant]:
    out = [
        v
        for v in (
            Variant("full"),
            Variant("selective", args.loss_bound, DropPolicy(), loss_feedback=args.loss_feedback),
            Variant("rigid", compress=args.rigid),
        )
        if v.name in args.treatments
    ]
    taken = {args.loss_bound} if "selective" in args.treatments else set()  # that point is the treatment's
    out += [
        Variant(f"bound {b:g}", b, DropPolicy(), sweep=True, loss_feedback=args.loss_feedback)
        for b in args.sweep
        if b not in taken
    ]
    return out


def parse_treatments(text: str) -> tuple[str, ...]:
    names = tuple(t.strip() for t in text.split(",") if t.strip())
    unknown = [t for t in names if t not in TREATMENT_NAMES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a comma list of {', '.join(TREATMENT_NAMES)}")
    return names


def parse_bounds(text: str) -> list[float]:
    out = []
    for item in text.split(","):
        try:
            b = float(item)
        except ValueError:
            b = math.nan
        if not 0.0 < b <= 1.0:
            raise argparse.ArgumentTypeError(f"loss bound {item!r}: expected a fraction in (0, 1]")
        out.append(b)
    return out


def jobs_for(args: argparse.Namespace, v: Variant, n: int) -> tuple[JobSpec, ...]:

    out = []
    for j in range(1, n + 1):
        spec = training_spec(
            j,
            task=args.task,
            width=args.width,
            lr=args.lr,
            compute_s=args.compute_s,
            workers=args.workers,
            eval_every=args.eval_every,
            seed=args.seed,
            loss_bound=v.loss_bound,
            name=v.name,
        )
        if v.compress != "none":
            spec = replace(spec, training=replace(spec.training, compress=v.compress))
        spec = replace(spec, training=replace(spec.training, loss_feedback=v.loss_feedback))
        out.append(spec)
    return tuple(out)


def stack(args: argparse.Namespace, v: Variant, n: int) -> StackConfig:
    t = TREATMENTS["baseline"]
    return StackConfig(
        name=f"approx/{v.name}",
        jobs=jobs_for(args, v, n),
        iterations=args.iterations,
        cc=t.cc,
        bottleneck_pps=args.bottleneck_pps,
        drop_policy=v.drop_policy,
        start_lead_s=start_lead(n),
        tolerated_loss=args.tolerated_loss,
    )


@dataclass
class Result:
    variant: Variant
    round: int
    run: RealRun
    a_star: float

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
        return [job_time_to_accuracy(p, target, self.run.start) for p in self.points().values()]

    @property
    def mean_tta(self) -> float:
        """Mean over the jobs of each job's time to 0.95 A*; NaN unless every job got there."""
        t = self.tta()
        return statistics.fmean(t) if t and not any(math.isnan(x) for x in t) else math.nan

    @property
    def final(self) -> float:
        f = [final_accuracy(p) for p in self.points().values()]
        return statistics.fmean(f) if f else math.nan

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
    plane: dataplanes.Dataplane
    out: Path
    a_star: float = math.nan
    solo_iter: float = math.nan
    solo_tta: float = math.nan
    probe: str = ""
    padding: float = math.nan
    results: list[Result] = field(default_factory=list)

    def rows(self, name: str) -> list[Result]:
        return sorted((r for r in self.results if r.variant.name == name), key=lambda r: r.round)


def run_solo(e: Experiment, ctl, topo) -> None:
    v = Variant("alone")
    run = run_real(ctl, topo, stack(e.args, v, 1), watch=False)
    if run.errors:
        raise RuntimeError(f"solo run failed: {'; '.join(run.errors)}")
    write_csv(e.out / "alone.csv", run.records)
    pts = run.points().get(1, [])
    e.a_star = final_accuracy(pts)
    d = [r.duration for r in run.records if r.iteration >= 1]
    e.solo_iter = statistics.fmean(d)
    e.solo_tta = job_time_to_accuracy(pts, FRACTION * e.a_star, run.start)
    say(f"   alone: A* = {e.a_star:.3f}, {e.solo_iter:.3f} s/iteration, 0.95 A* after {e.solo_tta:.1f} s")


def run_variant(e: Experiment, ctl, topo, v: Variant, rnd: int) -> Result:
    run = run_real(ctl, topo, stack(e.args, v, e.args.jobs), watch=False)
    res = Result(v, rnd, run, e.a_star)
    stem = e.out / f"{v.name.replace(' ', '')}-r{rnd + 1}"
    write_csv(stem.parent / f"{stem.name}.csv", run.records)
    plot_accuracy(
        stem.parent / f"{stem.name}-accuracy.png",
        res.points(),
        f"{v.name} ({v.describe()}), round {rnd + 1}, {e.plane.label}",
        run.start,
        {"0.95 A*": FRACTION * e.a_star},
    )
    n_hit = sum(not math.isnan(t) for t in res.tta())
    say(
        f"   {v.name} round {rnd + 1}: {res.avg:.3f} s/iteration (p99 {res.p99:.3f}), 0.95 A* after "
        f"{res.mean_tta:.1f} s ({n_hit}/{len(res.tta())} jobs), final accuracy {res.final:.3f}, "
        f"{res.lost_chunks} chunks zero-filled, {res.drops} selective drops, {res.retransmits} retransmits"
    )
    if run.errors:
        say(f"   errors: {'; '.join(run.errors)}")
    return res


def table(e: Experiment, names: list[str]) -> str:
    full = {r.round: r for r in e.rows("full")}
    rows = []
    for name in names:
        mine = e.rows(name)
        if not mine:
            continue
        v = mine[0].variant
        faster = (
            "-"
            if name == "full"
            else spread(
                [reduction(full[r.round].mean_tta, r.mean_tta) if r.round in full else math.nan for r in mine],
                100,
                unit=" %",
            )
        )
        acc_drop = (
            "-"
            if name == "full"
            else spread(
                [100 * (full[r.round].final - r.final) if r.round in full else math.nan for r in mine],
                fmt=".1f",
                unit=" pp",
            )
        )
        hit = "/".join(f"{sum(not math.isnan(t) for t in r.tta())}" for r in mine)
        rows.append(
            [
                name,
                v.describe(),
                len(mine),
                spread([r.avg for r in mine], fmt=".3f"),
                spread([r.p99 for r in mine], fmt=".3f"),
                spread([r.mean_tta for r in mine], fmt=".1f"),
                hit,
                faster,
                spread([r.final for r in mine], fmt=".3f"),
                acc_drop,
                spread([r.lost_chunks for r in mine]),
                spread([r.drops for r in mine]),
                spread([r.retransmits for r in mine]),
                f"{100 * min(r.run.run.utilisation for r in mine):.0f} %",
            ]
        )
    headers = [
        "variant",
        "what",
        "rounds",
        "avg iter s",
        "p99 iter s",
        "to 0.95 A* s",
        "jobs there",
        "faster than full",
        "final acc",
        "acc below full",
        "zero-filled chunks",
        "switch drops",
        "retransmits",
        "link use (min)",
    ]
    return format_table(headers, rows)


def plot_three(path: Path, e: Experiment, rnd: int) -> None:
    curves, starts = {}, {}
    for name in ("full", "selective", "rigid"):
        r = next((x for x in e.rows(name) if x.round == rnd), None)
        if r is not None:
            # one series per treatment: the mean accuracy over its jobs at each evaluated iteration
            pts = r.points()
            by_it: dict[int, list[AccuracyPoint]] = {}
            for p in (p for ps in pts.values() for p in ps):
                by_it.setdefault(p.iteration, []).append(p)
            curves[name] = {
                0: [
                    AccuracyPoint(max(p.time for p in ps), it, statistics.fmean(p.accuracy for p in ps))
                    for it, ps in sorted(by_it.items())
                ]
            }
            starts[name] = r.run.start
    if not curves:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5))
    for i, (name, c) in enumerate(curves.items()):
        pts = c[0]
        ax.plot(
            [p.time - starts[name] for p in pts],
            [p.accuracy for p in pts],
            label=name,
            color=plt.get_cmap("tab10")(i),
            marker=".",
            markersize=3,
        )
    ax.axhline(FRACTION * e.a_star, color="grey", linestyle="--", linewidth=0.8)
    ax.annotate("0.95 A*", (0, FRACTION * e.a_star), xytext=(2, 2), textcoords="offset points", fontsize="small")
    ax.set_xlabel("time since the start (s)")
    ax.set_ylabel(f"validation accuracy (mean of {e.args.jobs} jobs)")
    ax.set_ylim(0, 1)
    ax.set_title(
        f"full delivery vs selective drop vs {e.args.rigid}, round {rnd + 1}, {e.plane.label}", fontsize="medium"
    )
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_sweep(path: Path, e: Experiment) -> None:
    bounds = sorted({r.variant.loss_bound for r in e.results if r.variant.drop_policy != NO_SELECTIVE_DROP})
    if not bounds:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def at(b: float, f) -> list[float]:
        return [f(r) for r in e.results if r.variant.drop_policy != NO_SELECTIVE_DROP and r.variant.loss_bound == b]

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    full_final = [r.final for r in e.rows("full")]
    full_tta = [r.mean_tta for r in e.rows("full")]
    for b in bounds:
        finals, ttas = at(b, lambda r: r.final), at(b, lambda r: r.mean_tta)
        a1.plot([100 * b] * len(finals), finals, "k.", markersize=5)
        a2.plot([100 * b] * len(ttas), ttas, "k.", markersize=5)
    a1.plot(
        [100 * b for b in bounds],
        [statistics.fmean(at(b, lambda r: r.final)) for b in bounds],
        "o-",
        color="tab:blue",
        label="selective drop",
    )
    ttas = [[t for t in at(b, lambda r: r.mean_tta) if not math.isnan(t)] for b in bounds]
    a2.plot(
        [100 * b for b, t in zip(bounds, ttas, strict=True) if t],
        [statistics.fmean(t) for t in ttas if t],
        "o-",
        color="tab:blue",
        label="selective drop",
    )
    if full_final:
        a1.axhline(statistics.fmean(full_final), color="tab:green", linestyle="--", label="full delivery")
        a1.axhline(statistics.fmean(full_final) - 0.005, color="tab:red", linestyle=":", label="full - 0.5 pp")
    if [t for t in full_tta if not math.isnan(t)]:
        a2.axhline(
            statistics.fmean(t for t in full_tta if not math.isnan(t)),
            color="tab:green",
            linestyle="--",
            label="full delivery",
        )
    a1.set_xlabel("loss bound (% of each tensor)")
    a1.set_ylabel("final accuracy (mean of the jobs)")
    a2.set_xlabel("loss bound (% of each tensor)")
    a2.set_ylabel("time to 0.95 A* (s)")
    for a in (a1, a2):
        a.grid(alpha=0.3)
        a.legend(fontsize="small")
    fig.suptitle(f"loss-bound sweep, {e.plane.label}", fontsize="medium")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_runs_csv(path: Path, e: Experiment) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            [
                "dataplane",
                "variant",
                "loss_bound",
                "selective_drop",
                "compress",
                "round",
                "avg_s",
                "p99_s",
                "tta_0.95_s",
                "jobs_reached",
                "final_accuracy",
                "zero_filled_chunks",
                "switch_drops",
                "retransmits",
                "utilisation",
                "cpu_busy",
                "errors",
            ]
        )
        for r in e.results:
            v = r.variant
            w.writerow(
                [
                    e.plane.name,
                    v.name,
                    v.loss_bound,
                    v.drop_policy != NO_SELECTIVE_DROP,
                    v.compress,
                    r.round + 1,
                    f"{r.avg:.4f}",
                    f"{r.p99:.4f}",
                    f"{r.mean_tta:.3f}",
                    sum(not math.isnan(t) for t in r.tta()),
                    f"{r.final:.4f}",
                    r.lost_chunks,
                    r.drops,
                    r.retransmits,
                    f"{r.run.run.utilisation:.3f}",
                    f"{r.run.run.cpu.mean_busy:.1f}" if r.run.run.cpu else "",
                    "; ".join(r.run.errors),
                ]
            )


def summary(e: Experiment, names: list[str]) -> str:
    a = e.args
    nbytes = jobs_for(a, Variant("x"), 1)[0].profile.push_bytes
    lines = [
        f"## Approximate flow control on {e.plane.label} ({time.strftime('%Y-%m-%d %H:%M')})",
        "",
        f"dataplane: {dataplanes.describe(e.plane)}; {e.probe}",
        f"{a.jobs} identical jobs, each a PS + {a.workers} workers: {a.task} CNN width {a.width}, lr {a.lr:g}, "
        f"seed {a.seed} ({nbytes:,} bytes pushed per worker per iteration), {a.iterations} iterations, compute "
        f"padded to {a.compute_s:g} s (real forward/backward {1000 * e.padding:.1f} ms), bottleneck "
        f"{a.bottleneck_pps} pkt/s, queue depth 64; {a.rounds} round(s).",
        f"Alone (full delivery): A* = {e.a_star:.3f}, {e.solo_iter:.3f} s/iteration, 0.95 A* after {e.solo_tta:.1f} s.",
        "",
        "```",
        table(e, names),
        "```",
        "",
    ]
    return "\n".join(lines)


def run_plane(args: argparse.Namespace, plane: dataplanes.Dataplane) -> str:
    out = args.out / plane.name
    e = Experiment(args, plane, out, padding=real_compute_s(args.task, args.width))
    topo = dumbbell(args.jobs, args.workers)
    vs = variants(args)
    names = [v.name for v in vs]
    with network_with_control(topo, stack(args, vs[0], args.jobs), out / "run", plane) as ctl:
        e.probe = ctl.probe.describe()
        say(f"network up on {plane.label}: {e.probe}")
        say("-- one job alone (A*)")
        run_solo(e, ctl, topo)
        total, k = args.rounds * len(vs), 0
        for rnd in range(args.rounds):
            for v in vs[rnd % len(vs) :] + vs[: rnd % len(vs)]:
                k += 1
                say(f"-- {v.name} ({v.describe()}), round {rnd + 1}/{args.rounds} ({k}/{total})")
                e.results.append(run_variant(e, ctl, topo, v, rnd))
            plot_three(out / f"accuracy-r{rnd + 1}.png", e, rnd)
            plot_sweep(out / "sweep.png", e)
            write_runs_csv(out / "approx.csv", e)
            text = summary(e, names)
            (out / "summary.md").write_text(text)
            say(text)
    return summary(e, names)


def main(argv: list[str] | None = None) -> int:
    interrupt_on_sigterm()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", default="digits")
    ap.add_argument("--jobs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--width", type=int, default=16)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval-every", type=int, default=2)
    ap.add_argument("--compute-s", type=float, default=0.1, help="pad compute to this per iteration (%(default)s s)")
    ap.add_argument("--iterations", type=int, default=80)
    ap.add_argument("--loss-bound", type=float, default=0.1, help="the selective treatment's bound (%(default)s)")
    ap.add_argument("--sweep", type=parse_bounds, default=[0.02, 0.05, 0.2, 0.4], help="loss bounds to sweep")
    ap.add_argument(
        "--treatments",
        type=parse_treatments,
        default=TREATMENT_NAMES,
        help="which of full,selective,rigid to run (all; e.g. 'full' with --sweep for a sweep of its own)",
    )
    ap.add_argument("--rigid", default="fp16", help="the rigid baseline's compression: fp16 | topk:F (%(default)s)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bottleneck-pps", type=int, default=600)
    ap.add_argument(
        "--loss-feedback", action="store_true", help="selective/sweep: zero-filled elements go out with the next push"
    )
    ap.add_argument(
        "--tolerated-loss",
        default="loss",
        choices=TOLERATED_LOSS_REACTIONS,
        help="the senders' window reaction to a tolerated loss (%(default)s)",
    )
    ap.add_argument("--dataplane", default="auto", choices=("auto", "bmv2", "ref", "both"))
    ap.add_argument("--out", type=Path, default=Path("results/approx"))
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.jobs < 1 or args.workers < 1 or args.iterations < 4:
        ap.error("--rounds, --jobs, --workers must be >= 1, --iterations >= 4")
    if not 0.0 < args.loss_bound <= 1.0:
        ap.error("--loss-bound must be in (0, 1]")
    try:
        from mlfc.hosts.training.compress import parse

        if not parse(args.rigid).active:
            raise ValueError("the rigid baseline needs a compression")
    except ValueError as exc:
        ap.error(f"--rigid: {exc}")
    return run_experiment(
        "approx",
        args.dataplane,
        lambda plane: run_plane(args, plane),
        f"{args.out}/<dataplane>/summary.md, approx.csv, accuracy-r*.png, sweep.png, per-run CSV/PNG",
    )


if __name__ == "__main__":
    sys.exit(main())
