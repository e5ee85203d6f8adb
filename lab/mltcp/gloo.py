"""Lab experiment (``python -m mlfc.lab.mltcp.gloo``): unmodified PyTorch DDP over gloo, N jobs sharing the
kernel lab's shallow bottleneck, kernel MLTCP against the plain algorithm (issue 45 item 6).

Lab code, root only (network namespaces, BPF), torch needed. The network is the kernel lab's
(:func:`mlfc.lab.mltcp.kernel_net.build_network`): worker namespaces w1..w8 -> router r -> server s, the
router's egress toward s an ``htb`` at R over a ``bfifo`` of B bytes; with ``--mark-threshold K`` the tc/eBPF
marker (:mod:`mlfc.hosts.kernel.marker`) sets CE above K bytes of that queue and every rank's namespace asks
for ECN. The default regime is the kernel lab's (:data:`mlfc.lab.mltcp.kernel_net.DEFAULT_RATE_MBPS`,
:data:`~mlfc.lab.mltcp.kernel_net.DEFAULT_BUFFER`, ``DEFAULT_MARK_THRESHOLD``: 200 Mbit/s, CE above 60 kB of a
300 kB queue).

Jobs: N = 2 or 4 DDP jobs (``--jobs``), 2 ranks each, gloo on CPU, a small MLP on generated data; nothing in
the training script (:data:`WORKER`, one script for every treatment) knows about MLTCP. Job j's rank 1 runs
in worker namespace w<j> and its rank 0 in the server namespace, with its own rendezvous port
(``PORT_BASE + j``) on :data:`~mlfc.lab.mltcp.kernel_net.SERVER_ADDR`, so every job's gradient traffic
crosses the shared bottleneck. **Only one direction is shaped**: gloo's 2-rank ring allreduce sends about the
gradient's size each way per step, rank 1 -> rank 0 (w -> s) through the htb/bfifo bottleneck, rank 0 ->
rank 1 (s -> w) over the router's unshaped veths; the jobs contend (and MLTCP acts) on the w -> s half.

Each job sleeps "the rest of a real step" (``time.sleep``, as lab/mltcp/kernel_gloo.py does), then runs forward,
``loss.backward()`` (DDP's hooks allreduce the gradients before it returns) and the optimiser step. The
gradient size and the sleep make the jobs compatible: a job's communication alone is ~40 % of its step for
2 jobs (sum 0.8), ~20 % for 4 (sum 0.8) (:func:`layout`).

Per round and family (reno, cubic), on the same network: each job alone under the plain algorithm (the
ideal), all N jobs under the plain algorithm, all N under ``mltcp_<family>`` — each treatment the default
congestion control of every namespace that runs a rank (server included), set with
:func:`mlfc.hosts.kernel.namespaces.set_default_cc` before the ranks start, as a user would, and checked on
every socket with ``ss``. F is the family's default (:func:`mlfc.policy.mltcp.default_params`) unless
``--f``; the algorithms are loaded if not registered and unloaded at the end if this run loaded them.

Metrics are the lab's: average and p99 step time (first step left out) over both ranks of every job, the
share of the ideal gain (:func:`mlfc.lab.scenarios.share_of_ideal_gain`) against the plain algorithm of the
same round, the ideal from each job alone (:func:`mlfc.lab.scenarios.ideal_iteration_times`, solo step and
communication times), the step from which the jobs stay interleaved. Communication per step: the time in
``loss.backward()`` less the same backward's compute alone, measured by each rank before training under
DDP's ``no_sync()`` (no allreduce); the records' comm span is [backward start + that compute, backward end]
(DDP allreduces the big bucket once its gradients are all computed). Congestion signals per connection per
phase: loss events (``kernel_net.loss_events``) of every rank's namespace + the marker's CE marks on the
workers' packets, over (gloo data connections between w<j> and s, counted with ``ss -tn`` in w<j>, the
rendezvous store's excluded) x steps.

Output: a table per round, summary.md, rounds.csv, a CSV and a timeline PNG per run; ``--publish`` adds the
rows to docs/data/mltcp (dataplane ``real``, mix ``ddp-2``/``ddp-4``) and docs/data/mltcp-regime (platform
``kernel-ddp``).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import signal
import statistics
import sys
import time
from pathlib import Path

from mlfc.hosts.kernel import KernelMltcpError, build, loader, namespaces
from mlfc.lab import summaries
from mlfc.lab.mltcp import regime
from mlfc.lab.mltcp.figures import MLTCP_KEY, MLTCP_SCHEMA
from mlfc.lab.mltcp.gloo_ddp import COMM_SHARE, FAMILIES, DdpRun, Layout, file_stem, grad_bytes, layout, run_ddp, say
from mlfc.lab.mltcp.gloo_rows import ROUND_COUNTS, mix_name, published_rows, regime_rows, verdicts
from mlfc.lab.mltcp.kernel_net import (
    DEFAULT_BUFFER,
    DEFAULT_MARK_THRESHOLD,
    DEFAULT_RATE_MBPS,
    build_network,
)
from mlfc.lab.mltcp.rows import HEADERS, Cell, regime_label, summary_rows, write_round_csv
from mlfc.lab.results import format_table, markdown_table, plot_timeline, write_csv
from mlfc.lab.scenarios import ideal_iteration_times, share_of_ideal_gain
from mlfc.policy.mltcp import IterationDetection, MltcpParams, default_params, format_params, parse_params
from mlfc.testing.netns import NetnsError, NetnsLab, run

# ---- the experiment -----------------------------------------------------------------------------


def _solo(net, lab, n: int, job: Layout, fam: str, args, out: Path, rnd: int, t_start: float, marker):
    """Each of the ``n`` jobs alone under the plain ``fam``: (ideal average, slowest job's ideal)."""
    solo_t, solo_comm = {}, {}
    for j in range(1, n + 1):
        res = run_ddp(net, lab, f"{mix_name(n)}/solo-job{j}-{fam}", [j], job, fam, args.solo_steps, out / "logs",
                      marker)  # fmt: skip
        solo_t[j], solo_comm[j] = res.per_job()[j]
        write_csv(out / mix_name(n) / f"solo-job{j}-{fam}-r{rnd}.csv", res.records)
        say(f"[round {rnd}, {(time.time() - t_start) / 60:4.1f} min] {mix_name(n)} job {j} alone ({fam}): step "
            f"{solo_t[j]:.3f} s, comm {solo_comm[j]:.3f} s (a = {solo_comm[j] / solo_t[j]:.2f}), "
            f"{res.connections[j]} gloo connection(s), {res.signals_per_phase:.1f} signals/phase")  # fmt: skip
    ideal = ideal_iteration_times(solo_t, solo_comm)
    avg = statistics.fmean(ideal.values())
    load = sum(solo_comm[j] / solo_t[j] for j in solo_t)
    say(f"[round {rnd}] {mix_name(n)} ideal average {avg:.3f} s (load {load:.2f} of the bottleneck)")
    return avg, max(ideal.values())


def _record(cell: Cell, res: DdpRun, ideals, base_avg: float, out: Path, rnd: int, t_start: float, tag: str) -> None:
    ideal, slowest = ideals
    cell.runs.append(res)
    cell.ideal_avgs.append(ideal)
    cell.ideal_p99s.append(slowest)
    cell.base_avgs.append(base_avg)
    stem = file_stem(cell.treatment)
    cell.csvs.append(out / cell.mix / f"{stem}-r{rnd}.csv")
    write_csv(cell.csvs[-1], res.records)
    plot_timeline(out / cell.mix / f"{stem}-r{rnd}.png", res.records,
                  f"{cell.mix}: {cell.treatment} (DDP over gloo, kernel TCP, {tag}, round {rnd})")  # fmt: skip
    share = share_of_ideal_gain(base_avg, res.avg, ideal)
    gain = "" if cell.treatment == cell.family or math.isnan(share) else f", {share:.0%} of the ideal gain"
    inter = res.interleaved_at
    say(f"[{tag} round {rnd}, {(time.time() - t_start) / 60:4.1f} min] {cell.mix} {cell.treatment}: avg "
        f"{res.avg:.3f} s, p99 {res.p99:.3f} s, speed-up {base_avg / res.avg:.2f} (ideal {base_avg / ideal:.2f})"
        f"{gain}, interleaved from {'-' if inter is None else inter}, {res.signals_per_phase:.1f} signals/phase "
        f"({sum(res.connections.values())} connections, loss events {res.loss_events}, marks {res.marks}, "
        f"retransmits {res.retransmits})")  # fmt: skip


def _measure(args, lab: NetnsLab, params: dict[str, MltcpParams], detection, cells: dict, out: Path,
             t_start: float) -> None:  # fmt: skip
    rate, queue, mark = args.rate * 1e6, args.buffer, args.mark_threshold or None
    counts = [int(n) for n in args.jobs.split(",")]
    net = build_network(lab, rate, queue, workers=max(counts), ecn=mark is not None)
    if mark is not None:  # the server's rank 0 opens connections too: it asks for ECN like the workers
        run("ip", "netns", "exec", net.server, "sysctl", "-qw", "net.ipv4.tcp_ecn=1")
    marker = None
    if mark is not None:
        from mlfc.hosts.kernel import marker as ecn_marker  # only runs with a threshold load it

        marker = ecn_marker.attach(net.router, net.device, net.rate_bps, mark, net.queue_bytes, mode="step")
    tag = regime_label(queue, mark)
    say(f"bottleneck: htb {args.rate:g} Mbit/s, bfifo {queue} B"
        f"{'' if mark is None else f', CE above {mark} B (tc/eBPF marker)'}; shaped w -> s only")  # fmt: skip
    out = out / tag
    try:
        for rnd in range(1, args.rounds + 1):
            for n in counts:
                job = layout(n, rate, args.step)
                mix = mix_name(n)
                say(f"[round {rnd}] {mix}: {n} jobs, MLP width {job.width} ({grad_bytes(job.width) / 1e6:.2f} MB of "
                    f"gradients), sleep {job.compute_s:.3f} s per step: comm {job.comm_s:.3f} s of "
                    f"{job.step_s:.3f} s alone (a = {job.comm_share:.2f})")  # fmt: skip
                for fam in [f for f in args.cc.split(",") if f]:
                    ideal = _solo(net, lab, n, job, fam, args, out, rnd, t_start, marker)
                    base_avg = math.nan
                    name_mltcp = f"{FAMILIES[fam]} {format_params(params[fam])}"
                    for name, cc in ((fam, fam), (name_mltcp, FAMILIES[fam])):
                        if cc != fam:
                            loader.set_params([loader.algorithm(fam)], params[fam], detection)
                        res = run_ddp(net, lab, f"{mix}/{name}", range(1, n + 1), job, cc, args.steps, out / "logs",
                                      marker)  # fmt: skip
                        res.params = params[fam] if cc != fam else None
                        if cc == fam:
                            base_avg = res.avg
                        cell = cells.setdefault((queue, mark, mix, name), Cell(
                            mix, name, fam, queue_bytes=queue, mark_threshold_bytes=mark, rate_bps=rate))  # fmt: skip
                        _record(cell, res, ideal, base_avg, out, rnd, t_start, tag)
            say(f"== {tag}, after round {rnd}\n" + format_table(HEADERS, summary_rows(list(cells.values()))))
    finally:
        if marker is not None:
            marker.detach()


def experiment(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    families = [f for f in args.cc.split(",") if f]
    params = {f: default_params(f) if args.f is None else parse_params(args.f) for f in families}
    detection = IterationDetection() if args.idle_min is None else IterationDetection(idle_min=args.idle_min)
    algs = {f: loader.algorithm(FAMILIES[f]) for f in families}
    loaded_here = [f for f in families if not loader.registered(algs[f])]
    before = {f: loader.read_params(algs[f]) for f in families if f not in loaded_here}  # restored at the end
    for f in loaded_here:
        loader.load([algs[f]], params[f], detection, log=lambda m: say(f"  {m}"))
    allowed_before = namespaces.allowed()
    missing = [f for f in families if f not in allowed_before and f in namespaces.available()]
    if missing:
        namespaces.set_allowed(allowed_before + missing)
        say(f"  allowed {', '.join(missing)} as namespace defaults (net.ipv4.tcp_allowed_congestion_control)")
    load0 = os.getloadavg()
    cells: dict[tuple, Cell] = {}
    t_start = time.time()
    try:
        with NetnsLab("kddp") as lab:
            _measure(args, lab, params, detection, cells, out, t_start)
    finally:
        if missing:
            namespaces.set_allowed([c for c in namespaces.allowed() if c not in missing])
        for f, kept in before.items():
            if kept and kept[0].params is not None and kept[0].detection is not None:
                loader.set_params([algs[f]], kept[0].params, kept[0].detection)
        if loaded_here and not args.keep_loaded:
            for w in loader.unload([algs[f] for f in loaded_here], log=lambda m: say(f"  {m}")):
                say(f"  warning: {w}")
    _report(args, list(cells.values()), out, load0, os.getloadavg(), t_start)
    if args.publish:
        _publish(list(cells.values()), args.command)
    return 0


def _report(args, cells: list[Cell], out: Path, load0, load1, t_start: float) -> None:
    rows = summary_rows(cells)
    mark = "" if args.mark_threshold is None else f", CE marked above {args.mark_threshold} B"
    lines = [
        f"# Kernel MLTCP under PyTorch DDP (gloo): {args.rounds} round(s), {args.steps} steps per run",
        "",
        f"htb {args.rate:g} Mbit/s over bfifo {args.buffer} B{mark}, shaped in the w -> s direction only; job j: "
        f"rank 1 in w<j>, rank 0 in s; every rank's namespace defaults to the treatment's congestion control; "
        f"F {', '.join(sorted({c.treatment.split(' ', 1)[1] for c in cells if ' ' in c.treatment}))}; "
        f"load average {load0[0]:.1f} at the start, {load1[0]:.1f} at the end; "
        f"{(time.time() - t_start) / 60:.1f} min.",
        "",
        'Mean over the rounds with the range in brackets ("pooled": the share of the round-averaged times); '
        "speed-up and share of the ideal gain against the plain algorithm of the same family in the same round; "
        '"ideal": the speed-up if every job stepped as fast as alone (limited by the bottleneck\'s load); '
        '"signals/phase": loss events + CE marks per gloo connection per step.',
        "",
        markdown_table(HEADERS, rows),
        "",
        *[f"- {v}" for v in verdicts(cells)],
    ]
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    write_round_csv(out / "rounds.csv", cells, ROUND_COUNTS)
    say(format_table(HEADERS, rows))
    for v in verdicts(cells):
        say(v)
    say(f"results in {out}/ (summary.md, rounds.csv, per-run CSVs and timelines)")


def _publish(cells: list[Cell], command: str) -> None:
    published = published_rows(cells, command)
    rows = [row for row, _ in published]
    runs = [r for _, rs in published for r in rs]
    path = summaries.publish("mltcp", rows, key=MLTCP_KEY, runs=runs, meta={"schema": MLTCP_SCHEMA})
    say(f"published {len(rows)} row(s) to {path}")
    curve = regime_rows(cells, command)
    path = summaries.publish(regime.EXPERIMENT, curve, key=regime.KEY, meta={"schema": regime.SCHEMA})
    say(f"published {len(curve)} regime row(s) to {path}; `make figures` regenerates the docs' tables")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def missing_piece() -> str | None:
    """What this experiment cannot run without (root, torch, BTF, the BPF toolchain), or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, BPF)"
    if importlib.util.find_spec("torch") is None:
        return f"torch is not installed for {sys.executable} (pip install torch==2.13.0)"
    try:
        build.check_btf()
        if not build.up_to_date():
            build.find_toolchain()
    except KernelMltcpError as exc:
        return f"kernel MLTCP cannot be built or loaded: {exc}"
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mlfc.lab.mltcp.gloo", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="results/kernel-ddp")
    ap.add_argument("--jobs", default="2", help="DDP jobs sharing the bottleneck: 2, 4 or 2,4 (one mix each)")
    ap.add_argument("--cc", default="reno,cubic", help="families, comma-separated: reno, cubic")
    ap.add_argument("--f", help="MLTCP's F (mlfc.policy.mltcp's text form; default: the family's default_params)")
    ap.add_argument("--idle-min", type=float, metavar="S",
                    help="kernel MLTCP's iteration detection: idle seconds that start an iteration (default: "
                    "IterationDetection's)")  # fmt: skip
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=30, help="training steps per run (the first one left out)")
    ap.add_argument("--solo-steps", type=int, default=12, help="steps of each job alone (the ideal)")
    ap.add_argument("--step", type=float, metavar="S",
                    help="a step's time alone (default: 0.5 s for 2 jobs, 0.4 s for 4); the communication share "
                    "stays 0.4 / 0.2")  # fmt: skip
    ap.add_argument("--rate", type=float, default=DEFAULT_RATE_MBPS, help="bottleneck Mbit/s (%(default)g)")
    ap.add_argument("--buffer", type=int, default=DEFAULT_BUFFER, help="bottleneck queue, bytes (%(default)s)")
    ap.add_argument("--mark-threshold", type=int, metavar="BYTES", default=DEFAULT_MARK_THRESHOLD,
                    help="mark CE above this many bytes of the bottleneck's queue (tc/eBPF marker; the ranks ask "
                    "for ECN); 0: no marking, drops are the only signal (default %(default)s)")  # fmt: skip
    ap.add_argument("--keep-loaded", action="store_true", help="leave mltcp_* registered if this run loaded them")
    ap.add_argument("--publish", action="store_true",
                    help="merge the rows into docs/data/mltcp (dataplane real) and docs/data/mltcp-regime")  # fmt: skip
    args = ap.parse_args(argv)
    args.command = " ".join(["python -m mlfc.lab.mltcp.gloo", *(sys.argv[1:] if argv is None else argv)])
    try:
        counts = [int(n) for n in args.jobs.split(",")]
    except ValueError:
        ap.error(f"--jobs {args.jobs!r}: a comma-separated list of 2 and 4")
    if not counts or any(n not in COMM_SHARE for n in counts):
        ap.error(f"--jobs {args.jobs!r}: choose from {', '.join(map(str, COMM_SHARE))}")
    unknown = [f for f in args.cc.split(",") if f and f not in FAMILIES]
    if unknown or not any(args.cc.split(",")):
        ap.error(f"--cc: choose from {', '.join(FAMILIES)}")
    if args.f is not None:
        try:
            rule = parse_params(args.f).rule
        except ValueError as exc:
            ap.error(f"--f: {exc}")
        if rule != "increase":
            ap.error(f"--f {args.f}: kernel MLTCP scales only the additive increase (rule 'increase')")
    for name in ("rounds", "steps", "solo_steps", "buffer"):
        if getattr(args, name) <= 0:
            ap.error(f"--{name.replace('_', '-')} must be positive")
    if args.steps < 2 or args.solo_steps < 2:
        ap.error("--steps and --solo-steps must be at least 2 (the first step is left out)")
    if args.mark_threshold is not None and args.mark_threshold <= 0:
        ap.error("--mark-threshold must be a positive byte count")
    if (why := missing_piece()) is not None:
        print(f"kernel-ddp: {why}", file=sys.stderr)
        return 1
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return experiment(args)
    except (KernelMltcpError, NetnsError) as exc:
        print(f"kernel-ddp: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("kernel-ddp: interrupted; namespaces removed", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
