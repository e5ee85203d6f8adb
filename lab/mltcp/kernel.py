"""Lab experiment (``make kernel-mltcp``): MLTCP in kernel TCP against plain Reno/CUBIC, in a regime.

Lab code: it drives the product (``mlfc.hosts.kernel``: loader, namespace defaults, the ECN marker) and
uses the lab's metric definitions (``mlfc.lab.results``, ``mlfc.lab.scenarios``). Root only. The
network and the jobs are in :mod:`mlfc.lab.mltcp.kernel_net`.

The regime (issue 45): the bottleneck's rate, its queue (``--buffer``, bytes; a comma-separated list
sweeps it) and, with ``--mark-threshold K``, a tc/eBPF marker that sets CE above K bytes of the
shaper's queue (the workers then ask for ECN). Every run counts its congestion signals per
connection per communication phase (retransmitted segments + CE marks), so each figure says its
regime; ``--publish`` writes the MLTCP rows (docs/data/mltcp) and the regime curve's rows
(docs/data/mltcp-regime).

Per queue, mix and round: each job profile alone (under each family: the ideal), then the plain
algorithm and MLTCP with each F of the grid. Metrics are the lab's: average and p99 iteration time
(first iteration left out), share of the ideal gain against the plain algorithm of the same family
in the same round, the iteration from which the jobs stay interleaved.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import time
from pathlib import Path

from mlfc.hosts.kernel import KernelMltcpError, loader, namespaces
from mlfc.lab import summaries
from mlfc.lab.mltcp import regime, rows
from mlfc.lab.mltcp.figures import MLTCP_KEY, MLTCP_SCHEMA
from mlfc.lab.mltcp.kernel_net import (
    DEFAULT_BUFFER,
    DEFAULT_MARK_THRESHOLD,
    DEFAULT_RATE_MBPS,
    FAMILIES,
    MIXES,
    PLAIN_F,
    Bottleneck,
    Mix,
    Profile,
    RunResult,
    build_network,
    run_jobs,
)
from mlfc.lab.mltcp.rows import HEADERS, Cell, regime_label, summary_rows
from mlfc.lab.results import format_table, markdown_table, plot_timeline, summarise, write_csv
from mlfc.lab.scenarios import ideal_iteration_times, share_of_ideal_gain
from mlfc.policy.mltcp import IterationDetection, MltcpParams, default_params, format_params, parse_params
from mlfc.testing.netns import NetnsLab


def say(msg: str) -> None:
    print(msg, flush=True)


# ---- the experiment -----------------------------------------------------------------------------


def label(params: MltcpParams | None) -> str:
    return "" if params is None else f" {format_params(params)}"


# kernel's own columns of rounds.csv (lab/mltcp/rows.py writes the rest)
ROUND_COUNTS: rows.RoundCounts = (
    ("retransmits", lambda r: sum(x.retransmits for x in r.records)),
    ("ce_marks", lambda r: r.marks),
    ("signals_per_phase", lambda r: f"{r.signals_per_phase:.3f}"),
)


def published_rows(cells: list[Cell], command: str) -> list[tuple[dict, list[tuple[Path, str]]]]:
    """docs/data/mltcp rows (dataplane "kernel") of the MLTCP treatments with their runs' CSVs."""
    return rows.published_rows(cells, command, dataplane="kernel", jobs=lambda c: len(MIXES[c.mix].profiles))


def regime_rows(cells: list[Cell], command: str) -> list[dict]:
    """docs/data/mltcp-regime rows (platform "kernel") of the MLTCP treatments."""
    return rows.regime_rows(cells, command, platform="kernel")


def targets(cells: list[Cell]) -> list[str]:
    """The rows' verdicts (lab/mltcp/rows.py) and issue 24's largest ideal gain."""
    out = rows.verdicts([row for row, _ in published_rows(cells, "")])
    best = max((s for c in cells for s in c.ideal_speedups()), default=math.nan)
    out.append(
        f"largest ideal average gain of a run: {best:.2f}x (target >= 1.8x): {'met' if best >= 1.8 else 'MISSED'}"
    )
    return out


def _plain(family: str) -> tuple[str, MltcpParams | None]:
    """(congestion control, F) of a family's plain algorithm: the kernel's own where it has one, else the MLTCP
    program with F = 1 (PLAIN_F)."""
    if family in namespaces.available():
        return family, None
    return FAMILIES[family], PLAIN_F


def _marker(net: Bottleneck, k_bytes: int):
    """The tc/eBPF ECN marker on the bottleneck (mlfc.hosts.kernel.marker): CE above ``k_bytes`` of its queue."""
    from mlfc.hosts.kernel import marker  # only runs with a threshold load it

    return marker.attach(net.router, net.device, net.rate_bps, k_bytes, net.queue_bytes, mode="step")


def _marks(marker, net: Bottleneck, jobs: int, before: dict[str, int]) -> int:
    """CE marks on the first ``jobs`` workers' packets since ``before`` (the marker's counts by source)."""
    if marker is None:
        return 0
    now = marker.stats().marks_by_source
    return sum(now.get(net.worker_address(j), 0) - before.get(net.worker_address(j), 0) for j in range(jobs))


def _measure_queue(args, lab: NetnsLab, queue: int, grid, detection, cells: dict, out: Path, t_start: float) -> None:
    """Every round of every mix and family at one queue depth (and marking threshold)."""
    rate = args.rate * 1e6
    mark = args.mark_threshold
    net = build_network(lab, rate, queue, slow_start_after_idle=args.slow_start_after_idle, rto_min_ms=args.rto_min,
                        ecn=mark is not None)  # fmt: skip
    marker = _marker(net, mark) if mark is not None else None
    regime_tag = regime_label(queue, mark)
    marking = "" if mark is None else f", CE above {mark} B (tc/eBPF marker)"
    say(f"bottleneck: htb {args.rate:g} Mbit/s, bfifo {queue} B{marking}; {len(net.workers)} worker namespaces")
    out = out / regime_tag
    try:
        for rnd in range(1, args.rounds + 1):
            for mix_name in args.mixes.split(","):
                mix = MIXES[mix_name]
                jobs = len(mix.profiles)
                for fam in [f for f in args.cc.split(",") if f]:
                    ideal = _ideal(net, mix, fam, args, rate, out, rnd)  # (average, slowest job)
                    runs = [(fam, *_plain(fam))]
                    points = grid or [default_params(fam)]
                    mltcp = FAMILIES[fam] + ("+job" if detection.group else "")  # one progress per job
                    runs += [(mltcp + label(params), FAMILIES[fam], params) for params in points]
                    base_avg = math.nan
                    for name, cc, params in runs:
                        if params is not None:
                            loader.set_params([loader.algorithm(fam)], params, detection)
                        before = marker.stats().marks_by_source if marker is not None else {}
                        res = run_jobs(net, f"{mix.name}/{name}", mix.profiles, cc, args.iterations, rate, args.flows)
                        res.params = None if name == fam else params
                        res.marks = _marks(marker, net, jobs, before)
                        if name == fam:
                            base_avg = res.avg
                        cell = cells.setdefault((queue, mark, mix.name, name),
                                                Cell(mix.name, name, fam, queue_bytes=queue, mark_threshold_bytes=mark,
                                                     rate_bps=rate))  # fmt: skip
                        _record(cell, res, ideal, base_avg, out, rnd, t_start, regime_tag)
            say(f"== {regime_tag}, after round {rnd}\n" + format_table(HEADERS, summary_rows(list(cells.values()))))
    finally:
        if marker is not None:
            marker.detach()


def experiment(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.time_scale != 1:
        for name, m in list(MIXES.items()):
            scaled = (Profile(p.name, p.comm_s * args.time_scale, p.compute_s * args.time_scale) for p in m.profiles)
            MIXES[name] = Mix(m.name, m.description, tuple(scaled))
    grid = [parse_params(text) for text in args.grid.split(",")] if args.grid else []  # []: each family's default
    queues = [int(q) for q in args.buffer.split(",")]
    detection = IterationDetection(group=args.group)
    families = [f for f in args.cc.split(",") if f]
    algs = [loader.algorithm(FAMILIES[f]) for f in families]
    loaded_here = [a for a in algs if not loader.registered(a)]
    if loaded_here:
        loader.load(loaded_here, grid[0] if grid else None, detection, log=lambda m: say(f"  {m}"))
    # The plain algorithms must be allowed as namespace defaults too (cubic is not when the host's default
    # is something else); restored at the end.
    allowed_before = namespaces.allowed()
    missing = [f for f in families if f not in allowed_before and f in namespaces.available()]
    if missing:
        namespaces.set_allowed(allowed_before + missing)
        say(f"  allowed {', '.join(missing)} as namespace defaults (net.ipv4.tcp_allowed_congestion_control)")
    load0 = os.getloadavg()
    cells: dict[tuple, Cell] = {}
    t_start = time.time()
    try:
        for queue in queues:
            with NetnsLab("kmltcp") as lab:
                _measure_queue(args, lab, queue, grid, detection, cells, out, t_start)
    finally:
        if missing:
            namespaces.set_allowed([c for c in namespaces.allowed() if c not in missing])
        if loaded_here and not args.keep_loaded:
            for w in loader.unload(loaded_here, log=lambda m: say(f"  {m}")):
                say(f"  warning: {w}")
    load1 = os.getloadavg()
    _report(args, list(cells.values()), out, load0, load1, t_start)
    if args.publish:
        _publish(list(cells.values()), args.command)
    return 0


def _report(args, cells: list[Cell], out: Path, load0, load1, t_start: float) -> None:
    table = summary_rows(cells)  # not "rows": that is the module that writes rounds.csv
    mark = "" if args.mark_threshold is None else f", CE marked above {args.mark_threshold} B"
    f_text = args.grid or "each family's default"
    lines = [
        f"# Kernel MLTCP: {args.rounds} rounds, {args.iterations} iterations per run",
        "",
        f"htb {args.rate:g} Mbit/s over bfifo {args.buffer} B{mark} between network namespaces; {args.flows} "
        f"connection(s) per job; workers' default congestion control set per namespace; F ({f_text}); "
        f"load average {load0[0]:.1f} at the start, {load1[0]:.1f} at the end; "
        f"{(time.time() - t_start) / 60:.1f} min.",
        "",
        'Mean over the rounds with the range in brackets ("pooled": the share of the round-averaged times); '
        "speed-up and share of the ideal gain are against the "
        'plain algorithm of the same family in the same round; "ideal" is the speed-up if every job ran as fast '
        'as alone (limited by the bottleneck\'s load); "signals/phase": retransmitted segments + CE marks per '
        "connection per communication phase.",
        "",
        markdown_table(HEADERS, table),
        "",
        *[f"- {t}" for t in targets(cells)],
        "",
        "Mixes: " + "; ".join(f"{m.name}: {m.description}" for m in MIXES.values() if m.name in args.mixes.split(",")),
    ]
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    rows.write_round_csv(out / "rounds.csv", cells, ROUND_COUNTS)
    say(format_table(HEADERS, table))
    for t in targets(cells):
        say(t)
    say(f"results in {out}/ (summary.md, rounds.csv, per-run CSVs and timelines)")


def _publish(cells: list[Cell], command: str) -> None:
    published = published_rows(cells, command)
    mltcp_rows, runs = zip(*published, strict=True) if published else ((), ())
    path = summaries.publish("mltcp", list(mltcp_rows), key=MLTCP_KEY, runs=[r for rs in runs for r in rs],
                             meta={"schema": MLTCP_SCHEMA})  # fmt: skip
    say(f"published {len(mltcp_rows)} row(s) to {path}")
    curve = regime_rows(cells, command)
    path = summaries.publish(regime.EXPERIMENT, curve, key=regime.KEY, meta={"schema": regime.SCHEMA})
    say(f"published {len(curve)} regime row(s) to {path}; `make figures` regenerates the docs' tables")


def _ideal(net: Bottleneck, mix: Mix, fam: str, args, rate: float, out: Path, rnd: int) -> tuple[float, float]:
    """Each distinct profile alone under ``fam``: the mix's ideal average iteration time and its slowest
    job's."""
    solo_t, solo_comm = {}, {}
    by_profile: dict[Profile, RunResult] = {}
    for p in dict.fromkeys(mix.profiles):
        cc, params = _plain(fam)
        if params is not None:
            loader.set_params([loader.algorithm(fam)], params, IterationDetection())
        by_profile[p] = run_jobs(
            net, f"{mix.name}/solo-{p.name}-{fam}", [p], cc, args.solo_iterations, rate, args.flows
        )
    for j, p in enumerate(mix.profiles):
        overall = summarise(by_profile[p].records)[1]
        solo_t[j + 1], solo_comm[j + 1] = overall.avg, overall.comm_avg
    ideal = ideal_iteration_times(solo_t, solo_comm)
    avg = sum(ideal.values()) / len(ideal)
    alone = ", ".join(f"{p.name} {r.avg:.3f} s" for p, r in by_profile.items())
    say(f"[round {rnd}] {mix.name} alone ({fam}): {alone}; ideal average {avg:.3f} s")
    return avg, max(ideal.values())


def _record(cell: Cell, res: RunResult, ideals: tuple[float, float], base_avg: float, out: Path, rnd: int,
            t_start: float, regime_tag: str) -> None:  # fmt: skip
    ideal, ideal_slowest = ideals
    cell.runs.append(res)
    cell.ideal_avgs.append(ideal)
    cell.ideal_p99s.append(ideal_slowest)
    cell.base_avgs.append(base_avg)
    mix, name = cell.mix, cell.treatment
    stem = name.replace(" ", "_").replace(":", "_")
    cell.csvs.append(out / mix / f"{stem}-r{rnd}.csv")
    write_csv(cell.csvs[-1], res.records)
    plot_timeline(
        out / mix / f"{stem}-r{rnd}.png", res.records, f"{mix}: {name} (kernel TCP, {regime_tag}, round {rnd})"
    )
    share = share_of_ideal_gain(base_avg, res.avg, ideal)
    gain = "" if name == cell.family or math.isnan(share) else f", {share:.0%} of the ideal gain"
    inter = res.interleaved_at
    elapsed = (time.time() - t_start) / 60
    say(f"[{regime_tag} round {rnd}, {elapsed:4.1f} min] {mix} {name}: avg {res.avg:.3f} s, p99 {res.p99:.3f} s, "
        f"speed-up {base_avg / res.avg:.2f} (ideal {base_avg / ideal:.2f}){gain}, interleaved from "
        f"{'-' if inter is None else inter}, {res.signals_per_phase:.1f} signals/phase "
        f"(retransmits {sum(r.retransmits for r in res.records)}, marks {res.marks})")  # fmt: skip


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="results/kernel-mltcp")
    ap.add_argument("--mixes", default=",".join(MIXES), help=f"comma-separated, from {', '.join(MIXES)}")
    ap.add_argument("--cc", default="reno,cubic", help="families: reno, cubic, dctcp (dctcp needs --mark-threshold)")
    ap.add_argument("--grid", default=None,
                    help="MLTCP's F, comma-separated (mlfc.policy.mltcp's text form; default: each family's, "
                    "mlfc.policy.mltcp.default_params)")  # fmt: skip
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--solo-iterations", type=int, default=12)
    ap.add_argument("--time-scale", type=float, default=1.0, help="multiply every job's compute and communication time")
    ap.add_argument(
        "--flows", type=int, default=2, help="connections per job (its workers), all answered before it iterates"
    )
    ap.add_argument("--rate", type=float, default=DEFAULT_RATE_MBPS, help="bottleneck Mbit/s (%(default)g)")
    ap.add_argument("--buffer", default=str(DEFAULT_BUFFER),
                    help="bottleneck queue, bytes; comma-separated: one network per value, the regime curve "
                    "(default %(default)s, 12 ms at 200 Mbit/s, the switch marking at --mark-threshold)")  # fmt: skip
    ap.add_argument("--mark-threshold", type=int, metavar="BYTES", default=DEFAULT_MARK_THRESHOLD,
                    help="mark CE above this many bytes of the bottleneck's queue (tc/eBPF marker; the workers "
                    "ask for ECN); 0: no marking, drops are the only signal (default %(default)s)")  # fmt: skip
    ap.add_argument("--slow-start-after-idle", type=int, choices=(0, 1), default=1,
                    help="the workers' net.ipv4.tcp_slow_start_after_idle (Linux's default 1)")  # fmt: skip
    ap.add_argument("--rto-min", type=float, help="ms: the workers' route rto_min (Linux's default 200)")
    ap.add_argument("--group", action="store_true",
                    help="kernel MLTCP's job grouping: a job's connections share one bytes ratio (treatment "
                    "mltcp_<cc>+job; docs/kernel-mltcp.md)")  # fmt: skip
    ap.add_argument("--keep-loaded", action="store_true", help="leave mltcp_* registered if this run loaded them")
    ap.add_argument(
        "--publish",
        action="store_true",
        help="merge the MLTCP rows (dataplane kernel) into docs/data/mltcp/summary.json for `make figures`",
    )
    args = ap.parse_args(argv)
    args.command = " ".join(["python -m mlfc.lab.kernel_mltcp", *(sys.argv[1:] if argv is None else argv)])
    try:
        if any(int(q) <= 0 for q in args.buffer.split(",")):
            ap.error("--buffer: queue depths must be positive byte counts")
        for text in (args.grid or "").split(",") if args.grid else ():
            parse_params(text)
    except ValueError as exc:
        ap.error(f"{exc}")
    if args.mark_threshold < 0:
        ap.error("--mark-threshold must be a byte count >= 0 (0: no marking)")
    args.mark_threshold = args.mark_threshold or None
    if "dctcp" in args.cc.split(",") and args.mark_threshold is None:
        ap.error("--cc dctcp needs ECN marks: give --mark-threshold BYTES")
    unknown_cc = [f for f in args.cc.split(",") if f and f not in FAMILIES]
    if unknown_cc:
        ap.error(f"unknown family {unknown_cc[0]!r}: choose from {', '.join(FAMILIES)}")
    unknown = [m for m in args.mixes.split(",") if m not in MIXES]
    if unknown:
        ap.error(f"unknown mix {unknown[0]!r}")
    if os.geteuid() != 0:
        print("kernel-mltcp: needs root (network namespaces, BPF)", file=sys.stderr)
        return 1
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return experiment(args)
    except KernelMltcpError as exc:
        print(f"kernel-mltcp: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("kernel-mltcp: interrupted; namespaces removed", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
