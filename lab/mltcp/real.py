"""`make mltcp-real`: MLTCP's interleaving of two compatible jobs, real PyTorch jobs next to the emulator.

    python -m mlfc.lab.mltcp.real [--width 16] [--compute-s 0.6] [--iterations 24] [--rounds 3]
                                  [--workloads training,emulator] [--dataplane auto|bmv2|ref|both]
                                  [--out results/mltcp-real]

Two identical data-parallel jobs (a PS and --workers workers each) share the dumbbell's bottleneck, as in
`make e2e`'s two-compatible mix; here each job is either real training (digits, the CNN of --width, compute
padded to --compute-s) or the training-job emulator with the same shape (the model's float32 bytes pushed
and pulled, the same compute time slept, the same workers). Each workload first runs each job alone (the
ideal: perfect interleaving makes a job as fast as alone while the link can carry both, lab/scenarios.py),
then, --rounds times, under plain Reno (baseline) and MLTCP-Reno. Per workload: average and p99 iteration
time, speed-up, the share of the ideal gain (mean (min..max) over rounds) and the iteration from which the
jobs stayed interleaved, the same figures as `make e2e`/`make sweep`.

Output in OUT/<dataplane>/: summary.md, mltcp-real.csv (one row per run), per run the iteration CSV and
timeline PNG, gain.png (share of the ideal gain per workload and round).
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

from mlfc.lab import dataplanes
from mlfc.lab.cleanup import interrupt_on_sigterm
from mlfc.lab.emulator import JobProfile
from mlfc.lab.jobs import JobSpec
from mlfc.lab.realjobs import real_compute_s, run_experiment, run_real, say, start_lead, training_spec
from mlfc.lab.results import plot_timeline, summarise, write_csv
from mlfc.lab.rounds import Rounds, TreatmentResult, rounds_table, spread
from mlfc.lab.scenarios import (
    BOTTLENECK_PPS,
    TREATMENTS,
    ideal_iteration_times,
    interleaving_iteration,
    share_of_ideal_gain,
)
from mlfc.lab.stack import StackConfig, network_with_control
from mlfc.lab.tta import accuracy_points, final_accuracy
from mlfc.topologies import dumbbell

WORKLOADS = ("training", "emulator")
DEFAULT_TREATMENTS = ("baseline", "mltcp-reno")


def jobs_for(workload: str, args: argparse.Namespace) -> tuple[JobSpec, ...]:
    """Two identical jobs; the emulator's copy keeps the real job's profile and drops its training."""
    out = []
    for j in (1, 2):
        spec = training_spec(
            j,
            task=args.task,
            width=args.width,
            lr=args.lr,
            compute_s=args.compute_s,
            workers=args.workers,
            eval_every=args.eval_every,
            seed=args.seed,
            name="real",
        )
        if workload == "emulator":
            p = spec.profile
            spec = replace(spec, training=None, profile=JobProfile("emulated", p.push_bytes, p.pull_bytes, p.compute_s))
        out.append(spec)
    return tuple(out)


def stack(args: argparse.Namespace, treatment: str, jobs, name: str) -> StackConfig:
    t = TREATMENTS[treatment]
    training = any(j.training is not None for j in jobs)
    return StackConfig(
        name=name,
        jobs=tuple(jobs),
        iterations=args.iterations,
        cc=t.cc,
        mltcp=t.mltcp,
        priorities=t.priorities,
        bottleneck_pps=args.bottleneck_pps,
        start_lead_s=start_lead(len(jobs)) if training else None,
    )


@dataclass
class Workload:
    name: str
    solo_t: dict[int, float] = field(default_factory=dict)
    solo_comm: dict[int, float] = field(default_factory=dict)
    solo_push: dict[int, float] = field(default_factory=dict)
    rows: dict[str, Rounds] = field(default_factory=dict)
    finals: dict[str, list[float]] = field(default_factory=dict)  # treatment -> final accuracy per run

    @property
    def ideal_avg(self) -> float:
        ideal = ideal_iteration_times(self.solo_t, self.solo_comm, self.solo_push)
        return statistics.fmean(ideal.values())


def run_solo(w: Workload, args, ctl, topo) -> None:
    for spec in jobs_for(w.name, args):
        solo_iters = max(6, args.iterations // 2)
        cfg = replace(stack(args, "baseline", [spec], f"{w.name}/solo"), iterations=solo_iters)
        run = run_real(ctl, topo, cfg, watch=False)
        if run.errors:
            raise RuntimeError(f"{w.name} solo run of job {spec.job} failed: {'; '.join(run.errors)}")
        per_job, _ = summarise(run.records)
        w.solo_t[spec.job], w.solo_comm[spec.job], w.solo_push[spec.job] = (
            per_job[0].avg,
            per_job[0].comm_avg,
            per_job[0].push_avg,
        )
        say(
            f"   {w.name} job {spec.job} alone: {per_job[0].avg:.3f} s/iteration, comm {per_job[0].comm_avg:.3f} s "
            f"(push {per_job[0].push_avg:.3f} s), a = {per_job[0].comm_avg / per_job[0].avg:.2f}"
        )


def run_one(w: Workload, args, ctl, topo, treatment: str, rnd: int, out: Path, plane) -> None:
    t = TREATMENTS[treatment]
    run = run_real(ctl, topo, stack(args, treatment, jobs_for(w.name, args), f"{w.name}/{treatment}"), watch=False)
    per_job, overall = summarise(run.records)
    stem = out / f"{w.name}-{treatment}-r{rnd + 1}"
    write_csv(stem.parent / f"{stem.name}.csv", run.records)
    if run.records:
        plot_timeline(
            stem.parent / f"{stem.name}.png",
            run.records,
            f"two compatible {w.name} jobs / {treatment}, round {rnd + 1}, {plane.label}",
        )
    result = TreatmentResult(t, run.run, per_job, overall, interleaving_iteration(run.records))
    w.rows.setdefault(treatment, Rounds(treatment, t)).results.append(result)
    pts = accuracy_points(run.records)
    w.finals.setdefault(treatment, []).append(
        statistics.fmean(final_accuracy(p) for p in pts.values()) if pts else math.nan
    )
    base = w.rows.get("baseline")
    gain = ""
    if treatment != "baseline" and base and len(base.results) > rnd:
        gain = f", {100 * share_of_ideal_gain(base.results[rnd].avg, result.avg, w.ideal_avg):.0f} % of the ideal gain"
    say(
        f"   {w.name} / {treatment} round {rnd + 1}: {result.avg:.3f} s/iteration (ideal {w.ideal_avg:.3f})"
        f"{gain}; interleaved from {result.interleaved_at}"
    )
    if run.errors:
        say(f"   errors: {'; '.join(run.errors)}")


def table(w: Workload, names: list[str]) -> str:
    rows = [w.rows[n] for n in names if n in w.rows]
    return rounds_table(rows, w.ideal_avg, baseline={"baseline": w.rows["baseline"]} if "baseline" in w.rows else None)


def plot_gain(path: Path, loads: list[Workload], treatment: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    for i, w in enumerate(loads):
        row, base = w.rows.get(treatment), w.rows.get("baseline")
        if row is None or base is None:
            continue
        pairs = zip(base.results, row.results, strict=False)  # an interrupted round may lack its MLTCP run
        gains = [100 * share_of_ideal_gain(b.avg, r.avg, w.ideal_avg) for b, r in pairs]
        gains = [g for g in gains if not math.isnan(g)]
        if gains:
            ax.bar(i, statistics.fmean(gains), color="tab:blue" if w.name == "training" else "tab:grey")
            ax.plot([i] * len(gains), gains, "k.", markersize=6)
    ax.set_xticks(range(len(loads)), [w.name for w in loads])
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_ylabel(f"{treatment}: share of ideal gain (%)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_runs_csv(path: Path, plane: str, loads: list[Workload]) -> None:
    with path.open("w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(
            [
                "dataplane",
                "workload",
                "treatment",
                "round",
                "avg_s",
                "p99_s",
                "ideal_avg_s",
                "share_of_gain",
                "interleaved_from",
                "utilisation",
                "cpu_busy",
                "final_accuracy",
                "errors",
            ]
        )
        for w in loads:
            base = w.rows.get("baseline")
            for name, row in w.rows.items():
                for rnd, r in enumerate(row.results):
                    g = (
                        share_of_ideal_gain(base.results[rnd].avg, r.avg, w.ideal_avg)
                        if base and name != "baseline" and rnd < len(base.results)
                        else math.nan
                    )
                    wr.writerow(
                        [
                            plane,
                            w.name,
                            name,
                            rnd + 1,
                            f"{r.avg:.4f}",
                            f"{r.p99:.4f}",
                            f"{w.ideal_avg:.4f}",
                            f"{g:.4f}",
                            "" if r.interleaved_at is None else r.interleaved_at,
                            f"{r.run.utilisation:.3f}",
                            f"{r.run.cpu.mean_busy:.1f}" if r.run.cpu else "",
                            f"{w.finals[name][rnd]:.4f}",
                            "; ".join(r.run.errors),
                        ]
                    )


def summary(args, plane, probe: str, loads: list[Workload], names: list[str], padding: float) -> str:
    lines = [
        f"## MLTCP with real jobs on {plane.label} ({time.strftime('%Y-%m-%d %H:%M')})",
        "",
        f"dataplane: {dataplanes.describe(plane)}; {probe}",
        f"two identical jobs, each a PS + {args.workers} workers: {args.task} CNN width {args.width} "
        f"({jobs_for('training', args)[0].profile.push_bytes:,} bytes pushed and pulled per worker), compute padded "
        f"to {args.compute_s:g} s per iteration (real forward/backward {1000 * padding:.1f} ms: "
        f"x{args.compute_s / padding:.0f}); the emulator copy has the same shape; {args.iterations} iterations, "
        f"{args.rounds} round(s), bottleneck {args.bottleneck_pps} pkt/s.",
        "",
    ]
    for w in loads:
        alone = ", ".join(f"job {j} {w.solo_t[j]:.3f} s (a = {w.solo_comm[j] / w.solo_t[j]:.2f})" for j in w.solo_t)
        lines += [f"### {w.name}: alone {alone}; ideal {w.ideal_avg:.3f} s", "", "```", table(w, names), "```", ""]
        if any(not math.isnan(v) for vs in w.finals.values() for v in vs):
            lines += [
                "final accuracy (mean of the two jobs) per treatment: "
                + ", ".join(f"{n} {spread(w.finals[n], fmt='.3f')}" for n in names if n in w.finals),
                "",
            ]
    return "\n".join(lines)


def run_plane(args, plane) -> str:
    out = args.out / plane.name
    topo = dumbbell(2, args.workers)
    names = list(args.treatments)
    loads = [Workload(n) for n in args.workloads]
    padding = real_compute_s(args.task, args.width)
    with network_with_control(
        topo, stack(args, "baseline", jobs_for("emulator", args), "mltcp-real"), out / "run", plane
    ) as ctl:
        probe = ctl.probe.describe()
        say(f"network up on {plane.label}: {probe}")
        for w in loads:
            say(f"-- {w.name}: each job alone")
            run_solo(w, args, ctl, topo)
        total, k = args.rounds * len(names) * len(loads), 0
        for rnd in range(args.rounds):
            for w in loads:
                for name in names:  # the baseline first: each round's gain is against that round's baseline
                    k += 1
                    say(f"-- {w.name} / {name}, round {rnd + 1}/{args.rounds} ({k}/{total})")
                    run_one(w, args, ctl, topo, name, rnd, out, plane)
            text = summary(args, plane, probe, loads, names, padding)
            (out / "summary.md").write_text(text)
            write_runs_csv(out / "mltcp-real.csv", plane.name, loads)
            say(text)
    for name in names:
        if name != "baseline":
            plot_gain(
                out / f"gain-{name}.png",
                loads,
                name,
                f"two compatible jobs, {name} vs Reno, {plane.label}, {args.rounds} round(s)",
            )
    return summary(args, plane, probe, loads, names, padding)


def main(argv: list[str] | None = None) -> int:
    interrupt_on_sigterm()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", default="digits")
    ap.add_argument("--width", type=int, default=16)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--eval-every", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--compute-s", type=float, default=0.6, help="pad compute to this per iteration (%(default)s s)")
    ap.add_argument("--iterations", type=int, default=24)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bottleneck-pps", type=int, default=BOTTLENECK_PPS)
    ap.add_argument("--workloads", type=lambda t: t.split(","), default=list(WORKLOADS))
    ap.add_argument("--treatments", type=lambda t: t.split(","), default=list(DEFAULT_TREATMENTS))
    ap.add_argument("--dataplane", default="auto", choices=("auto", "bmv2", "ref", "both"))
    ap.add_argument("--out", type=Path, default=Path("results/mltcp-real"))
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.iterations < 4 or args.workers < 1:
        ap.error("--rounds and --workers must be >= 1, --iterations >= 4")
    if bad := [w for w in args.workloads if w not in WORKLOADS]:
        ap.error(f"unknown workload(s) {', '.join(bad)}: choose from {', '.join(WORKLOADS)}")
    if bad := [t for t in args.treatments if t not in TREATMENTS]:
        ap.error(f"unknown treatment(s) {', '.join(bad)}")
    if args.treatments[0] != "baseline":
        ap.error("the first treatment must be baseline (the gains are against it)")
    return run_experiment(
        "mltcp-real",
        args.dataplane,
        lambda plane: run_plane(args, plane),
        f"{args.out}/<dataplane>/summary.md, mltcp-real.csv, per-run CSV/PNG, gain-*.png",
    )


if __name__ == "__main__":
    sys.exit(main())
