"""`make e2e`: every job mix under its treatments, with tables, CSVs and timeline plots.

    python -m mlfc.lab.e2e [--out results] [--mix NAME ...] [--iterations N] [--repeat N]
                           [--dataplane auto|bmv2|ref|both] [--f SLOPE:INTERCEPT[:SHAPE=ARG]]
                           [--link-bps BPS] [--queue-depth PKTS] [--mark-threshold BYTES]

For each mix the network and controller come up once and a calibration burst checks that the switches
carry the configured bottleneck (lab/validity.py); the jobs run alone first (the ideal), then under each
treatment, --repeat times. Results go to OUT/<mix>/<treatment>[-rN].csv and .png, and OUT/summary.md,
whose tables give each figure as mean (min..max) over the rounds. --f sets MLTCP's F for every MLTCP
treatment (default: each controller's, mlfc.policy.mltcp.default_params). --link-bps, --queue-depth and
--mark-threshold set the bottleneck's regime (lab.scenarios.Regime); every published MLTCP row says its regime
and also goes to docs/data/mltcp-regime (the regime curve).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from mlfc.hosts.transport.config import DEFAULT_CHUNK
from mlfc.lab import dataplanes, summaries
from mlfc.lab.cleanup import interrupt_on_sigterm, leftovers
from mlfc.lab.e2e.figures import COORDINATED_SCHEMA
from mlfc.lab.e2e.regime import mean_signals, regime_row, run_names, signals_per_phase
from mlfc.lab.fallback_watch import FallbackWatch
from mlfc.lab.fallback_watch import describe as describe_fallback
from mlfc.lab.mltcp import regime as regime_curve
from mlfc.lab.mltcp.figures import MLTCP_KEY, MLTCP_SCHEMA
from mlfc.lab.results import format_table, plot_timeline, summarise, write_csv
from mlfc.lab.rounds import Rounds, TreatmentResult, rounds_table
from mlfc.lab.scenarios import (
    DEEP,
    MIXES,
    PLAN,
    TREATMENTS,
    Mix,
    Regime,
    Treatment,
    ideal_iteration_times,
    interleaving_iteration,
    share_of_ideal_gain,
    solo,
    stack_config,
)
from mlfc.lab.stack import Control, StackConfig, StackError, StackRun, job_counters, network_with_control, run_jobs
from mlfc.lab.validity import BottleneckNotCarried
from mlfc.policy.mltcp import MltcpParams, default_params, format_params, parse_params
from mlfc.policy.priority import PolicyError

# the schema stored with each summary e2e publishes to
SCHEMAS = {"mltcp": MLTCP_SCHEMA, "coordinated": COORDINATED_SCHEMA, regime_curve.EXPERIMENT: regime_curve.SCHEMA}
KEYS = {"mltcp": MLTCP_KEY, "coordinated": MLTCP_KEY, regime_curve.EXPERIMENT: regime_curve.KEY}


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
    fs: Sequence[MltcpParams | None] = (None,),
    published: dict[str, list] | None = None,
    ack_delay: float | None = None,
    regime: Regime = DEEP,
) -> str:
    """Solo runs, then ``repeat`` rounds of every treatment (rounds, not treatments, repeat, so slow drift of
    the machine hits every treatment alike); an MLTCP treatment runs once per F of ``fs`` in each round
    (None: the controller's default F). Returns the mix's markdown section; with ``published`` given, the
    rows of docs/data/<experiment> are appended to ``published[experiment]`` (lab/summaries.py): one per
    MLTCP treatment and F under "mltcp", one per treatment of the coordinator's under "coordinated"."""
    topo = mix.build_topology()
    run_dir = out / mix.name
    base_cfg = stack_config(mix, TREATMENTS["baseline"], iterations, ack_delay=ack_delay, regime=regime)
    variants = [(t, f) for t in treatments for f in (fs if t.mltcp else (None,))]
    labelled = len(fs) > 1

    def label(t: Treatment, f: MltcpParams | None) -> str:
        return f"{t.name}@{format_params(f or default_params(t.cc))}" if labelled and t.mltcp else t.name

    used = sorted({format_params(f or default_params(t.cc)) for t, f in variants if t.mltcp})
    lines = [f"## {mix.name} on {dataplane.label}: {mix.description}", "", f"MLTCP's F: {', '.join(used) or '-'}", ""]
    with network_with_control(topo, base_cfg, run_dir / "run", dataplane) as ctl:
        lines += [f"dataplane: {dataplanes.describe(dataplane)}; {ctl.probe.describe()}", ""]
        solo_t, solo_comm, solo_push, acks = run_solo(ctl, topo, mix, iterations, ack_delay, regime)
        ack_cost = regime.ack_cost(dataplane.target)  # an ACK on a link in bit/s costs its bytes, not a slot
        ideal = ideal_iteration_times(solo_t, solo_comm, solo_push, {j: a * ack_cost for j, a in acks.items()})
        lines.append(
            "alone: "
            + ", ".join(
                f"job {j} {solo_t[j]:.3f} s (comm {solo_comm[j]:.3f} s of which push {solo_push[j]:.3f} s, "
                f"a = {solo_comm[j] / solo_t[j]:.2f}, {acks.get(j, math.nan):.2f} ACKs per data packet)"
                for j in sorted(solo_t)
            )
        )
        lines.append("")
        rows = {label(t, f): Rounds(label(t, f), t) for t, f in variants}
        csvs: dict[str, list[Path]] = {name: [] for name in rows}
        notes: list[str] = []  # when the coordinator's fallback engaged, per run
        for rnd in range(repeat):
            for k, (treatment, f) in enumerate(variants):
                name = label(treatment, f)
                say(f"-- {mix.name} / {name}: round {rnd + 1}/{repeat} ({rnd * len(variants) + k + 1}"
                    f"/{repeat * len(variants)})")  # fmt: skip
                suffix = "" if repeat == 1 else f"-r{rnd + 1}"
                stem = run_dir / f"{name.replace(':', '_')}{suffix}"
                result = run_treatment(
                    ctl,
                    topo,
                    stack_config(mix, treatment, iterations, mltcp_params=f, ack_delay=ack_delay, regime=regime),
                    treatment,
                    stem,
                    f"{mix.name} / {name} on {dataplane.label}: communication phases",
                    notes,
                )
                check_f(name, treatment, f, result)
                rows[name].results.append(result)
                csvs[name].append(stem.parent / f"{stem.name}.csv")
                if rnd == 0:
                    lines += _treatment_table(mix, treatment, result.run, result.per_job, result.overall)
                if result.run.errors:
                    lines += ["", f"errors ({treatment.name}, round {rnd + 1}): " + "; ".join(result.run.errors)]
                lines.append("")
    lines += _speedup_table(mix, rows, ideal, repeat)
    if published is not None:
        for experiment, which in PUBLISHED.items():
            chosen = [(t, f) for t, f in variants if which(t)]
            made = comparison_rows(
                mix, dataplane, rows, ideal, chosen, label, csvs, iterations, ack_delay, acks, regime
            )
            published.setdefault(experiment, []).extend(made)
            if experiment == "mltcp":  # every MLTCP row is also a point of the regime curve
                curve = [(regime_row(record, dataplane.name), []) for record, _ in made]
                published.setdefault(regime_curve.EXPERIMENT, []).extend(curve)
    if notes:
        lines += [f"### {mix.name}: the coordinator's fallback (seconds after the run's start)", "", "```", *notes,
                  "```", ""]  # fmt: skip
    return "\n".join(lines)


def check_f(name: str, treatment: Treatment, f: MltcpParams | None, result: TreatmentResult) -> None:
    """The jobs record the F they ran with: a run whose jobs did not use the requested F stops the experiment
    (it once ran a rule the emulator was never told about, under the rule's name)."""
    want = format_params(f or default_params(treatment.cc)) if treatment.mltcp else ""
    ran = {rec.mltcp_f for rec in result.run.records}
    if ran and ran != {want}:
        raise StackError(f"{name}: the jobs ran F {', '.join(sorted(ran)) or '-'}, not the requested {want or '-'}")


# What each published experiment holds: MLTCP alone (issue 24's targets), and every treatment in which the
# coordinator sets the switches' priorities (MAIF, interleaving, MLTCP with either, the fallback).
PUBLISHED: dict[str, Callable[[Treatment], bool]] = {
    "mltcp": lambda t: t.mltcp and t.priorities == "none",
    "coordinated": lambda t: t.priorities != "none",
}


def comparison_rows(
    mix: Mix,
    dataplane: dataplanes.Dataplane,
    rows: dict[str, Rounds],
    ideal: dict[int, float],
    variants: Sequence[tuple[Treatment, MltcpParams | None]],
    label: Callable[[Treatment, MltcpParams | None], str],
    csvs: dict[str, list[Path]],
    iterations: int,
    ack_delay: float | None = None,
    acks: dict[int, float] | None = None,
    regime: Regime = DEEP,
) -> list[tuple[dict, list[tuple[Path, str]]]]:
    """docs/data rows (issue 24's schema) of ``variants`` against their baselines, each with its CSVs to
    copy and its baseline's (same run, same rounds)."""
    ideal_avg = sum(ideal.values()) / len(ideal)
    ideal_p99 = max(ideal.values())
    out = []
    plane = dataplane.name
    for t, f in variants:
        if t.baseline not in rows:
            continue
        name, base = label(t, f), rows[t.baseline]
        row = rows[name]
        text = format_params(f or default_params(t.cc)) if t.mltcp else "-"
        command = (
            f"python -m mlfc.lab.e2e --mix {mix.name} --treatment {t.baseline} --treatment {t.name} "
            f"--dataplane {plane} --iterations {iterations} --repeat {len(row.results)}"
            f"{f' --f {text}' if t.mltcp else ''}{'' if ack_delay is None else f' --ack-delay {ack_delay:g}'}"
            f"{f' {regime.flags()}' if regime.flags() else ''} --publish"
        )
        record = {
            "mix": mix.name,
            "cc": t.cc,
            "dataplane": plane,
            "treatment": t.name,
            "jobs": len(mix.jobs),
            "rounds": len(row.results),
            "share_of_ideal": [
                round(share_of_ideal_gain(b.avg, r.avg, ideal_avg), 4)
                for b, r in zip(base.results, row.results, strict=True)
            ],
            "avg_speedup": round(base.avg / row.avg, 4),
            "p99_speedup": round(base.p99 / row.p99, 4),
            "ideal_avg": round(base.avg / ideal_avg, 4),
            "ideal_p99": round(base.p99 / ideal_p99, 4),
            "interleaved_from": [r.interleaved_at for r in row.results],
            "f": text,
            "command": command,
            "baseline_avg_s": round(base.avg, 4),
            "avg_s": round(row.avg, 4),
            "drops": [sum(c.get("drops", 0) for c in r.run.counters.values()) for r in row.results],
            "baseline_drops": [sum(c.get("drops", 0) for c in r.run.counters.values()) for r in base.results],
            "cpu_busy": [None if r.run.cpu is None else round(r.run.cpu.mean_busy, 1) for r in row.results],
            "measured": time.strftime("%Y-%m-%d"),
            "ack_delay": ack_delay,
            # ACK packets per data packet alone, per job: the ideal counts them on the packet-rate bottleneck
            "ack_share": {str(j): round(a, 3) for j, a in sorted((acks or {}).items())},
            # the regime (issue 45): rate, queue, marking, and the congestion signals a flow saw per phase
            "link_bps": regime.rate_bps(),
            "queue_bytes": regime.queue_bytes,
            "mark_threshold_bytes": regime.mark_threshold_bytes,
            "signals_per_phase": mean_signals([r.run for r in row.results]),
            "baseline_signals_per_phase": mean_signals([b.run for b in base.results]),
            "avg_over_ideal": [round(r.avg / ideal_avg, 4) for r in row.results],
            "baseline_avg_over_ideal": [round(b.avg / ideal_avg, 4) for b in base.results],
            "signals_per_round": [round(signals_per_phase(r.run), 3) for r in row.results],
            "baseline_signals_per_round": [round(signals_per_phase(b.run), 3) for b in base.results],
        }
        if t.fallback:
            record["fallback_engaged_s"] = [
                None if r.fallback_at is None else round(r.fallback_at, 1) for r in row.results
            ]
        runs = run_names(mix.name, plane, ack_delay, regime, t, text, csvs[name], csvs[t.baseline])
        record["runs"] = [n for _, n in runs]
        out.append((record, runs))
    return out


# Longer than two of the controller's counter reads (ControllerSettings.counter_interval_s, 1 s): the counters
# read after this include every packet of the run that just ended on every switch.
COUNTER_SETTLE_S = 2.5


def run_solo(
    ctl: Control, topo, mix: Mix, iterations: int, ack_delay: float | None = None, regime: Regime = DEEP
) -> tuple[dict, dict, dict, dict]:
    """Each job alone: its iteration, communication and push time without competition, and (on a
    dumbbell, where every packet crosses both switches) the ACK packets per data packet its receivers
    sent, from the switches' counters: what the ideal needs."""
    solo_t, solo_comm, solo_push, acks = {}, {}, {}, {}
    solo_iters = max(4, iterations // 3)
    for job in mix.jobs:
        cfg = stack_config(
            mix, TREATMENTS["baseline"], solo_iters, jobs=[solo(job)], ack_delay=ack_delay, regime=regime
        )
        before = job_counters(ctl.client)
        res = run_jobs(ctl, topo, cfg, progress=say)
        if res.errors:
            raise RuntimeError(f"solo run of job {job.job} failed: {res.errors}")
        time.sleep(COUNTER_SETTLE_S)  # the controller reads the counters once a second: wait for a read after the run
        packets = counters_delta(job_counters(ctl.client), before).get(job.job, {}).get("packets", 0)
        packets /= len(topo.switches)
        data = solo_iters * job.workers * (math.ceil(job.profile.push_bytes / DEFAULT_CHUNK)
                                           + math.ceil(job.profile.pull_bytes / DEFAULT_CHUNK))  # fmt: skip
        if mix.topology == "dumbbell" and packets > data:
            acks[job.job] = packets / data - 1
        per_job, _ = summarise(res.records)
        solo_t[job.job] = per_job[0].avg
        solo_comm[job.job] = per_job[0].comm_avg
        solo_push[job.job] = per_job[0].push_avg
    return solo_t, solo_comm, solo_push, acks


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
    engaged = [s.time - t0 for s in switches if s.engaged]
    return TreatmentResult(
        treatment, res, per_job, overall, interleaving_iteration(res.records), min(engaged) if engaged else None
    )


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
    ap = argparse.ArgumentParser(
        prog="python -m mlfc.lab.e2e", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", type=Path, default=Path("results"))
    ap.add_argument("--mix", action="append", choices=sorted(MIXES), help="mix to run (repeatable; default all)")
    ap.add_argument("--treatment", action="append", choices=sorted(TREATMENTS), help="override the plan's treatments")
    ap.add_argument("--iterations", type=int, default=15)
    ap.add_argument("--dataplane", default="auto", choices=("auto", "bmv2", "ref", "both"))
    ap.add_argument("--repeat", type=int, default=1, help="rounds of every treatment (default 1)")
    ap.add_argument(
        "--f",
        type=_f_arg,
        action="append",
        help="MLTCP's F for the MLTCP treatments (default: each controller's); repeatable: each MLTCP treatment "
        "then runs once per F in every round, labelled TREATMENT@F",
    )
    ap.add_argument(
        "--ack-delay",
        type=float,
        default=None,
        help="every receiver's ACK delay in s, every run alike (hosts.transport.ReceiverConfig.ack_delay)",
    )
    ap.add_argument(
        "--link-bps",
        type=int,
        default=None,
        help="the reference switch's bottleneck as a link of this many bit/s (default: 1,500 packets/s)",
    )
    ap.add_argument("--queue-depth", type=int, default=DEEP.queue_pkts, help="packets per queue (%(default)s)")
    ap.add_argument(
        "--mark-threshold",
        type=int,
        default=None,
        metavar="BYTES",
        help="DCTCP's step: mark every ECT packet above this many queued bytes (default: DCQCN's RED profile)",
    )
    ap.add_argument(
        "--publish",
        action="store_true",
        help="merge the MLTCP rows into docs/data/mltcp/summary.json (+ per-run CSVs) for `make figures`",
    )
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")
    try:
        regime = Regime(args.link_bps, args.queue_depth, args.mark_threshold)
        regime.ecn()
    except (PolicyError, ValueError) as exc:
        ap.error(f"regime: {exc}")
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
    published: dict[str, list] | None = {} if args.publish else None
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
                    args.repeat, args.f or [None], published, args.ack_delay, regime,
                )  # fmt: skip
            except (BottleneckNotCarried, StackError) as exc:
                print(f"make e2e stopped on {mix_name}: {exc}", file=sys.stderr)
                return 2
            sections.append(section)
            (args.out / "summary.md").write_text("\n".join(sections))
    for experiment, made in (published or {}).items():
        if not made:
            continue
        rows, runs = zip(*made, strict=True)
        path = summaries.publish(
            experiment,
            list(rows),
            key=KEYS[experiment],
            runs=[r for rs in runs for r in rs],
            meta={"schema": SCHEMAS[experiment]},
        )
        say(f"published {len(rows)} row(s) to {path}; `make figures` regenerates the docs' tables")
    left = sorted(set(leftovers()) - preexisting)
    if left:
        print("left behind: " + "; ".join(left), file=sys.stderr)
        return 1
    print("\n".join(sections))
    print(f"\nwritten: {args.out}/summary.md and per-scenario CSV/PNG under {args.out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
