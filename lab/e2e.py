"""`make e2e`: every job mix under its treatments, with tables, CSVs and timeline plots.

    python -m mlfc.lab.e2e [--out results] [--mix NAME ...] [--iterations N] [--repeat N]
                           [--dataplane auto|bmv2|ref|both] [--f SLOPE:INTERCEPT[:SHAPE=ARG]]

For each mix the network and controller come up once and a calibration burst checks that the switches
carry the configured bottleneck (lab/validity.py); the jobs run alone first (the ideal), then under each
treatment, --repeat times. Results go to OUT/<mix>/<treatment>[-rN].csv and .png, and OUT/summary.md,
whose tables give each figure as mean (min..max) over the rounds. --f sets MLTCP's F for every MLTCP
treatment (default: each controller's, mlfc.policy.mltcp.default_params).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from mlfc.lab import dataplanes
from mlfc.lab.cleanup import interrupt_on_sigterm, leftovers
from mlfc.lab.fallback_watch import FallbackWatch
from mlfc.lab.fallback_watch import describe as describe_fallback
from mlfc.lab.results import format_table, plot_timeline, summarise, write_csv
from mlfc.lab.rounds import Rounds, TreatmentResult, rounds_table
from mlfc.lab.scenarios import (
    MIXES,
    PLAN,
    TREATMENTS,
    Mix,
    Treatment,
    ideal_iteration_times,
    interleaving_iteration,
    solo,
    stack_config,
)
from mlfc.lab.stack import Control, StackConfig, StackError, StackRun, job_counters, network_with_control, run_jobs
from mlfc.lab.validity import BottleneckNotCarried
from mlfc.policy.mltcp import MltcpParams, default_params, format_params, parse_params
from mlfc.policy.priority import PolicyError


def say(msg: str) -> None:
    print(msg, flush=True)


def counters_delta(after: dict[int, dict[str, int]], before: dict[int, dict[str, int]]) -> dict[int, dict[str, int]]:
    return {j: {k: v - before.get(j, {}).get(k, 0) for k, v in c.items()} for j, c in after.items()}


def run_mix(
    mix: Mix,
    treatments: list[Treatment],
    dataplane: dataplanes.Dataplane,
    iterations: int,
    out: Path,
    repeat: int = 1,
    mltcp_params: MltcpParams | None = None,
) -> str:
    """Solo runs, then ``repeat`` rounds of every treatment (rounds, not treatments, repeat, so slow drift of
    the machine hits every treatment alike); returns the mix's markdown section."""
    topo = mix.build_topology()
    run_dir = out / mix.name
    base_cfg = stack_config(mix, TREATMENTS["baseline"], iterations)
    f = mltcp_params
    used = sorted({format_params(f or default_params(t.cc)) for t in treatments if t.mltcp})
    lines = [f"## {mix.name} on {dataplane.label}: {mix.description}", "", f"MLTCP's F: {', '.join(used) or '-'}", ""]
    with network_with_control(topo, base_cfg, run_dir / "run", dataplane) as ctl:
        lines += [f"dataplane: {dataplanes.describe(dataplane)}; {ctl.probe.describe()}", ""]
        solo_t, solo_comm, solo_push = run_solo(ctl, topo, mix, iterations)
        ideal = ideal_iteration_times(solo_t, solo_comm, solo_push)
        lines.append(
            "alone: "
            + ", ".join(
                f"job {j} {solo_t[j]:.3f} s (comm {solo_comm[j]:.3f} s of which push {solo_push[j]:.3f} s, "
                f"a = {solo_comm[j] / solo_t[j]:.2f})"
                for j in sorted(solo_t)
            )
        )
        lines.append("")
        rows = {t.name: Rounds(t.name, t) for t in treatments}
        notes: list[str] = []  # when the coordinator's fallback engaged, per run
        for rnd in range(repeat):
            for k, treatment in enumerate(treatments):
                say(f"-- {mix.name} / {treatment.name}: round {rnd + 1}/{repeat} ({rnd * len(treatments) + k + 1}"
                    f"/{repeat * len(treatments)})")  # fmt: skip
                suffix = "" if repeat == 1 else f"-r{rnd + 1}"
                result = run_treatment(
                    ctl,
                    topo,
                    stack_config(mix, treatment, iterations, mltcp_params=f),
                    treatment,
                    run_dir / f"{treatment.name}{suffix}",
                    f"{mix.name} / {treatment.name} on {dataplane.label}: communication phases",
                    notes,
                )
                rows[treatment.name].results.append(result)
                if rnd == 0:
                    lines += _treatment_table(mix, treatment, result.run, result.per_job, result.overall)
                if result.run.errors:
                    lines += ["", f"errors ({treatment.name}, round {rnd + 1}): " + "; ".join(result.run.errors)]
                lines.append("")
    lines += _speedup_table(mix, rows, ideal, repeat)
    if notes:
        lines += [f"### {mix.name}: the coordinator's fallback (seconds after the run's start)", "", "```", *notes,
                  "```", ""]  # fmt: skip
    return "\n".join(lines)


def run_solo(ctl: Control, topo, mix: Mix, iterations: int) -> tuple[dict, dict, dict]:
    """Each job alone: its iteration, communication and push time without competition (the ideal)."""
    solo_t, solo_comm, solo_push = {}, {}, {}
    solo_iters = max(4, iterations // 3)
    for job in mix.jobs:
        cfg = stack_config(mix, TREATMENTS["baseline"], solo_iters, jobs=[solo(job)])
        res = run_jobs(ctl, topo, cfg, progress=say)
        if res.errors:
            raise RuntimeError(f"solo run of job {job.job} failed: {res.errors}")
        per_job, _ = summarise(res.records)
        solo_t[job.job] = per_job[0].avg
        solo_comm[job.job] = per_job[0].comm_avg
        solo_push[job.job] = per_job[0].push_avg
    return solo_t, solo_comm, solo_push


def run_treatment(
    ctl: Control, topo, cfg: StackConfig, treatment: Treatment, stem: Path, title: str, notes: list[str] | None = None
) -> TreatmentResult:
    """One run of the mix under ``cfg``; its CSV and timeline PNG are written next to ``stem``. With the
    coordinator's fallback, when it engaged (and why) is appended to ``notes`` and marked on the timeline."""
    before = job_counters(ctl.client)
    watch = FallbackWatch() if treatment.fallback else None
    try:
        res = run_jobs(ctl, topo, cfg, progress=say, on_coordinator=watch.hook if watch else None)
    finally:
        switches = watch.stop() if watch else []
    t0 = time.time() - res.duration  # run_jobs' zero: the records' times are relative to it
    marks = [("fallback engaged" if s.engaged else "released", s.time - t0) for s in switches]
    if watch is not None and notes is not None:
        notes += [f"{stem.name}: {line}" for line in describe_fallback(switches, t0)]
    res.counters = counters_delta(res.counters, before)
    per_job, overall = summarise(res.records)
    stem.parent.mkdir(parents=True, exist_ok=True)
    # Suffixes appended, not substituted: a stem like "reno-4_0.25" has a dot of its own.
    write_csv(stem.parent / f"{stem.name}.csv", res.records)
    if res.records:
        plot_timeline(stem.parent / f"{stem.name}.png", res.records, title, marks)
    return TreatmentResult(treatment, res, per_job, overall, interleaving_iteration(res.records))


def _treatment_table(mix: Mix, treatment: Treatment, res: StackRun, per_job, overall) -> list[str]:
    rows = []
    for s in per_job:
        c = res.counters.get(s.job, {})
        rows.append([s.job, s.iterations, s.avg, s.p99, s.comm_avg, c.get("ecn_marks", 0), c.get("drops", 0)])
    rows.append(
        [
            "all",
            overall.iterations,
            overall.avg,
            overall.p99,
            overall.comm_avg,
            sum(c.get("ecn_marks", 0) for c in res.counters.values()),
            sum(c.get("drops", 0) for c in res.counters.values()),
        ]
    )
    head = (
        f"### {mix.name} / {treatment.name} (cc {treatment.cc}, MLTCP {'on' if treatment.mltcp else 'off'}, "
        f"switch priorities: {treatment.priorities}{_fallback_note(treatment)})"
    )
    return [
        head,
        "",
        "```",
        format_table(["job", "iters", "avg s", "p99 s", "comm s", "ECN marks", "drops"], rows),
        "```",
    ]


def _fallback_note(treatment: Treatment) -> str:
    return f" once the coordinator's fallback engages ({treatment.fallback})" if treatment.fallback else ""


def _speedup_table(mix: Mix, rows: dict[str, Rounds], ideal: dict[int, float], repeat: int) -> list[str]:
    ideal_avg = sum(ideal.values()) / len(ideal)
    ordered = (
        [rows["baseline"], *(r for n, r in rows.items() if n != "baseline")]
        if "baseline" in rows
        else list(rows.values())
    )
    return [
        f"### {mix.name}: speed-up against the baseline over {repeat} round(s): mean (min..max); "
        "ideal = every job as fast as alone",
        "",
        "```",
        rounds_table(ordered, ideal_avg, baseline=rows, ideal_p99=max(ideal.values())),
        "```",
        "",
    ]


def _f_arg(text: str) -> MltcpParams:
    try:
        return parse_params(text)
    except PolicyError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main(argv: list[str] | None = None) -> int:
    interrupt_on_sigterm()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("results"))
    ap.add_argument("--mix", action="append", choices=sorted(MIXES), help="mix to run (repeatable; default all)")
    ap.add_argument("--treatment", action="append", choices=sorted(TREATMENTS), help="override the plan's treatments")
    ap.add_argument("--iterations", type=int, default=15)
    ap.add_argument("--dataplane", default="auto", choices=("auto", "bmv2", "ref", "both"))
    ap.add_argument("--repeat", type=int, default=1, help="rounds of every treatment (default 1)")
    ap.add_argument(
        "--f", type=_f_arg, default=None, help="MLTCP's F for the MLTCP treatments (default: each controller's)"
    )
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")
    if os.geteuid() != 0:
        print("make e2e needs root (Mininet)", file=sys.stderr)
        return 2
    try:
        planes = dataplanes.select(args.dataplane)
    except dataplanes.DataplaneMissing as exc:
        print(f"cannot run: {exc}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    preexisting = set(leftovers())  # not ours: only what this run leaves behind counts
    sections = [f"# mlfc end-to-end results ({time.strftime('%Y-%m-%d %H:%M')})", ""]
    for plane in planes:
        say(f"dataplane: {dataplanes.describe(plane)}")
        sections += [f"dataplane: {dataplanes.describe(plane)}", ""]
        for mix_name in args.mix or list(PLAN):
            names = args.treatment or list(PLAN[mix_name])
            if plane.priorities_only:
                names = [n for n in names if TREATMENTS[n].priorities != "none" or n == "baseline"]
            say(f"== {mix_name} on {plane.label}: {', '.join(names)}")
            try:
                section = run_mix(
                    MIXES[mix_name], [TREATMENTS[n] for n in names], plane, args.iterations, args.out / plane.name,
                    args.repeat, args.f,
                )  # fmt: skip
            except (BottleneckNotCarried, StackError) as exc:
                print(f"make e2e stopped on {mix_name}: {exc}", file=sys.stderr)
                return 2
            sections.append(section)
            (args.out / "summary.md").write_text("\n".join(sections))
    left = sorted(set(leftovers()) - preexisting)
    if left:
        print("left behind: " + "; ".join(left), file=sys.stderr)
        return 1
    print("\n".join(sections))
    print(f"\nwritten: {args.out}/summary.md and per-scenario CSV/PNG under {args.out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
