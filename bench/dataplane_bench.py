"""Packet rate of mlfc.p4 against plain L3 forwarding (l3fwd.p4) on the same BMv2.

    python bench/dataplane_bench.py [--seconds 5] [--trials 3] [--size 200] [--udp-checksum] [--bmv2 PATH ...]

One simple_switch_grpc (no logging) with two veth ports. For each program in turn: load it over
P4Runtime, install its entries (for mlfc: a route plus a full policy — job priorities with a window,
ECN profile, drop levels, a 5-tuple flow — so every table is looked up), then offer tagged ECT(0)
gradient packets on port 0 as fast as a raw socket can send for --seconds and count what leaves
port 1 (the interface's rx counter, no capture). Trials alternate between the programs; the median
of each is reported with their ratio (target >= 0.85). The frames carry UDP checksum 0 (none) unless
--udp-checksum, as the kernel sends the transport's datagrams: the queue telemetry then also updates the
checksum. Needs root and BMv2.

--bmv2 names a simple_switch_grpc binary (repeat it to compare builds; default: $MLFC_BMV2, else
the one on PATH).

    python bench/dataplane_bench.py --design "before=/path/to/old/p4src/build" --design "now=p4src/build" \
        --rounds 2 --publish [--experiment dataplane-telemetry]

compares program layouts instead: each --design LABEL=DIR names a directory holding mlfc.json,
mlfc.p4info.txtpb, l3fwd.json and l3fwd.p4info.txtpb (the bench's entries follow each design's P4Info:
bench/dataplane_packets.py's Layout). Per round every design runs its --trials against its own l3fwd, the
designs in alternating order; bench/bmv2_ops.py's counts come with each, and every trial records BMv2's CPU
time per forwarded packet (all its threads, /proc/PID/task/*/schedstat). --paced PPS offers PPS packets/s
instead of as many as possible (below saturation a packet's CPU time includes the wakeups of BMv2's threads,
so it is a different figure, not a steadier one). --publish writes docs/data/dataplane/ (summary.json and
runs/trials.csv), the table `make figures` puts in docs/results.md; --experiment dataplane-telemetry
publishes issue 46's comparison (the telemetry's cost) there instead, beside issue 28's layouts.

p4lang's performance notes measure BMv2 built with --disable-logging-macros; the logging macros cost
every table lookup and action something, so the ratio depends on the build as well as the program.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from bmv2_ops import trace_one
from dataplane_packets import entries_for, frame, layout_of
from summary import Row, command_line, record
from summary import verdict as verdict_of

from mlfc import contract
from mlfc.controller.pipeline import Pipeline
from mlfc.controller.sync import SwitchConnection
from mlfc.launch.switches import Bmv2Switch, bmv2_binary, bmv2_missing
from mlfc.testing.veth import unique_prefix, veth_pairs


def rx_packets(iface: str) -> int:
    return int(Path(f"/sys/class/net/{iface}/statistics/rx_packets").read_text())


def offer(iface: str, data: bytes, seconds: float, pps: float | None = None) -> int:
    """Send ``data`` on ``iface`` for ``seconds``: as fast as a raw socket can, or ``pps`` packets/s (paced in
    bursts every PACE_S)."""
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    sent = 0
    start = time.monotonic()
    end = start + seconds
    send = s.send
    while (now := time.monotonic()) < end:
        burst = 256 if pps is None else int(pps * (now - start)) + 1 - sent
        for _ in range(burst):
            try:
                send(data)
                sent += 1
            except BlockingIOError:
                pass
        if pps is not None:
            time.sleep(PACE_S)
    s.close()
    return sent


PACE_S = 0.002


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread of process ``pid`` so far (the scheduler's, in ns: /proc/PID/task/*/schedstat)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended meanwhile
    return total / 1e9


def measure(
    switch: Bmv2Switch,
    program: str,
    in_iface: str,
    out_iface: str,
    size: int,
    seconds: float,
    build: Path = contract.P4_BUILD,
    udp_checksum: bool = False,
    pps: float | None = None,
) -> tuple[float, float, float]:
    """(forwarded, offered) packets per second of ``program`` compiled into ``build`` and BMv2's CPU time per
    forwarded packet (µs); ``udp_checksum``: the frames carry a UDP checksum (as the transport's do), which the
    telemetry's rewrite updates; ``pps``: offered at that rate rather than as fast as possible."""
    pipeline = Pipeline.load(build / f"{program}.p4info.txtpb", build / f"{program}.json", checked=False)
    with SwitchConnection(switch.grpc_addr, switch.device_id, pipeline=pipeline) as conn:
        conn.load_pipeline(force=True)
        layout = layout_of(pipeline)
        conn.reconcile(entries_for(program, layout))
        data = frame(size, telemetry=layout.telemetry, udp_checksum=udp_checksum)
        offer(in_iface, data, 0.5)  # warm-up
        time.sleep(1.0)
        pid = switch.pid
        assert pid is not None, "the switch is running"
        before, cpu0 = rx_packets(out_iface), cpu_seconds(pid)
        t0 = time.monotonic()
        sent = offer(in_iface, data, seconds, pps)
        offered = sent / (time.monotonic() - t0)
        time.sleep(1.0)  # let BMv2 drain what it accepted
        forwarded, cpu = rx_packets(out_iface) - before, cpu_seconds(pid) - cpu0
        return forwarded / (time.monotonic() - t0 - 1.0), offered, 1e6 * cpu / max(forwarded, 1)


def bench_build(binary: str, args: argparse.Namespace) -> tuple[float, float]:
    """Median packet rates (mlfc, l3fwd) of one simple_switch_grpc build."""
    rates: dict[str, list[float]] = {"mlfc": [], "l3fwd": []}
    with (
        veth_pairs(2, prefix=unique_prefix("mlfcb")) as pairs,
        Bmv2Switch(name="bench", ports={0: pairs[0].switch_side, 1: pairs[1].switch_side}, binary=binary) as sw,
    ):
        for trial in range(args.trials):
            for program in ("l3fwd", "mlfc") if trial % 2 == 0 else ("mlfc", "l3fwd"):
                pps, offered, _cpu = measure(sw, program, pairs[0].test_side, pairs[1].test_side, args.size,
                                             args.seconds, udp_checksum=args.udp_checksum)  # fmt: skip
                rates[program].append(pps)
                # Offered far above forwarded: the switch, not the sender, sets the rate.
                print(f"  trial {trial + 1}: {program:5s} {pps:10.0f} packets/s ({offered:.0f} offered)", flush=True)
    return statistics.median(rates["mlfc"]), statistics.median(rates["l3fwd"])


TARGET_RATIO = 0.85  # issue 28: mlfc.p4 / l3fwd.p4 on BMv2's default build
# the published design comparisons: issue 28's program layouts; issue 46's cost of the queue telemetry
DESIGN_EXPERIMENTS = ("dataplane", "dataplane-telemetry")


def parse_design(text: str) -> tuple[str, Path]:
    label, sep, where = text.partition("=")
    build = Path(where)
    if not sep or not label:
        raise argparse.ArgumentTypeError(f"--design {text!r}: expected LABEL=DIR")
    missing = [f for f in ("mlfc.json", "mlfc.p4info.txtpb", "l3fwd.json", "l3fwd.p4info.txtpb")
               if not (build / f).is_file()]  # fmt: skip
    if missing:
        raise argparse.ArgumentTypeError(f"--design {text!r}: {build} lacks {', '.join(missing)}")
    return label, build


def compare_designs(binary: str, designs: list[tuple[str, Path]], args: argparse.Namespace) -> list[dict]:
    """Per-trial packet rates of every design's mlfc.p4 and l3fwd.p4 on one switch, round by round."""
    trials: list[dict] = []
    with (
        veth_pairs(2, prefix=unique_prefix("mlfcd")) as pairs,
        Bmv2Switch(name="designs", ports={0: pairs[0].switch_side, 1: pairs[1].switch_side}, binary=binary) as sw,
    ):
        for rnd in range(1, args.rounds + 1):
            for label, build in designs if rnd % 2 else designs[::-1]:
                load = os.getloadavg()[0]
                for trial in range(1, args.trials + 1):
                    for program in ("l3fwd", "mlfc") if trial % 2 else ("mlfc", "l3fwd"):
                        pps, offered, cpu_us = measure(
                            sw,
                            program,
                            pairs[0].test_side,
                            pairs[1].test_side,
                            args.size,
                            args.seconds,
                            build,
                            args.udp_checksum,
                            args.paced,
                        )
                        trials.append({"design": label, "round": rnd, "trial": trial, "program": program,
                                       "pps": round(pps, 1), "offered_pps": round(offered),
                                       "cpu_us_per_packet": round(cpu_us, 3), "load": load})  # fmt: skip
                        print(f"  round {rnd} {label}: trial {trial} {program:5s} {pps:8.0f} packets/s "
                              f"{cpu_us:7.2f} us CPU/packet", flush=True)  # fmt: skip
                        if args.paced and pps < 0.98 * args.paced:
                            print(f"  (forwarded below --paced {args.paced:g}: the switch saturated)", flush=True)
    return trials


def design_ops(
    designs: list[tuple[str, Path]], size: int, udp_checksum: bool = False
) -> dict[str, dict[str, dict[str, int]]]:
    """BMv2's work per packet for each design's programs (bench/bmv2_ops.py), before any trial runs."""
    out = {}
    with tempfile.TemporaryDirectory(prefix="mlfc-ops-") as tmp:
        for k, (label, build) in enumerate(designs):
            workdir = Path(tmp) / f"design-{k}"
            workdir.mkdir()
            out[label] = {p: dict(trace_one(p, size, workdir, build, udp_checksum)) for p in ("l3fwd", "mlfc")}
    return out


def design_rows(designs: list[tuple[str, Path]], trials: list[dict], ops: Mapping[str, dict],
                args: argparse.Namespace) -> list[dict]:  # fmt: skip
    """One row per design: the medians of each round, their ratio, and BMv2's work per packet; the median of
    all its mlfc.p4 trials and what it costs against the first design's (the reference, same run)."""

    def mlfc_trials(label: str, key: str) -> list[float]:
        return [t[key] for t in trials if t["design"] == label and t["program"] == "mlfc"]

    overall = {label: statistics.median(mlfc_trials(label, "pps")) for label, _build in designs}
    cpu = {label: statistics.median(mlfc_trials(label, "cpu_us_per_packet")) for label, _build in designs}
    reference = designs[0][0]
    rows = []
    for label, _build in designs:
        rounds = []
        for rnd in range(1, args.rounds + 1):
            med = {
                prog: statistics.median(t["pps"] for t in trials
                                        if t["design"] == label and t["round"] == rnd and t["program"] == prog)
                for prog in ("mlfc", "l3fwd")
            }  # fmt: skip
            rounds.append({"round": rnd, "mlfc_pps": med["mlfc"], "l3fwd_pps": med["l3fwd"],
                           "ratio": med["mlfc"] / med["l3fwd"]})  # fmt: skip
        ratios = [r["ratio"] for r in rounds]
        rows.append({"design": label, "rounds": rounds, "ratio_min": min(ratios), "ratio_max": max(ratios),
                     "target": TARGET_RATIO, "ops": ops[label], "trials_per_round": args.trials,
                     "seconds": args.seconds, "size": args.size, "udp_checksum": args.udp_checksum,
                     "paced_pps": args.paced, "mlfc_pps_median": overall[label], "reference": reference,
                     "cost_vs_reference": 1.0 - overall[label] / overall[reference],
                     # BMv2's CPU time per mlfc.p4 packet (median of the trials) and the packet rate a CPU-bound
                     # switch loses to it against the reference: 1 - cpu(reference) / cpu(design)
                     "cpu_us_per_packet": cpu[label],
                     "cpu_cost_vs_reference": 1.0 - cpu[reference] / cpu[label],
                     "command": command_line()})  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--trials", type=int, default=5, help="alternating trials per program (issue 28: >= 5)")
    ap.add_argument("--size", type=int, default=200, help="frame size in bytes")
    ap.add_argument("--udp-checksum", action="store_true",
                    help="frames with a UDP checksum, as the kernel sends the transport's (else 0)")  # fmt: skip
    ap.add_argument("--paced", type=float, default=None, metavar="PPS",
                    help="with --design: offer PPS packets/s (below every design's rate) instead of as many as "
                         "possible; BMv2's CPU time per packet is then the cost to compare")  # fmt: skip
    ap.add_argument("--bmv2", action="append", metavar="PATH", help="simple_switch_grpc binary (repeatable)")
    ap.add_argument("--design", action="append", type=parse_design, metavar="LABEL=DIR",
                    help="compare program layouts compiled into DIR (repeatable; see above)")  # fmt: skip
    ap.add_argument("--rounds", type=int, default=2, help="with --design: rounds of --trials each")
    ap.add_argument("--publish", action="store_true", help="with --design: write docs/data/EXPERIMENT/")
    ap.add_argument(
        "--experiment",
        default="dataplane",
        choices=DESIGN_EXPERIMENTS,
        help="with --publish: which comparison the designs are (%(default)s: issue 28's layouts)",
    )
    args = ap.parse_args(argv)
    missing = bmv2_missing() or (None if os.geteuid() == 0 else "needs root (veth pairs, raw sockets)")
    if missing:
        print(f"dataplane benchmark skipped: {missing}")
        return 0
    binaries = args.bmv2 or [bmv2_binary()]
    for binary in binaries:
        if not shutil.which(binary):
            print(f"--bmv2 {binary}: not an executable", file=sys.stderr)
            return 2
    if args.design:
        return run_designs(binaries[0], args)
    for binary in binaries:
        print(f"BMv2: {shutil.which(binary)}", flush=True)
        mlfc, l3 = bench_build(binary, args)
        print(
            f"dataplane (BMv2 {binary}, {args.size}-byte frames, median of {args.trials}): mlfc.p4 {mlfc:.0f} pps, "
            f"l3fwd.p4 {l3:.0f} pps, ratio {mlfc / l3:.2f} (target >= 0.85)",
            flush=True,
        )
        record(Row(f"dataplane: mlfc.p4 on BMv2 {binary}, {args.size}-byte frames, median of {args.trials}",
                   f"{mlfc:,.0f} packets/s", f"l3fwd.p4 {l3:,.0f} packets/s", f"{mlfc / l3:.2f}", ">= 0.85",
                   verdict_of(mlfc / l3 >= 0.85), value=mlfc, unit="packets/s", anchor_value=l3,
                   ratio_value=mlfc / l3))  # fmt: skip
    return 0


def run_designs(binary: str, args: argparse.Namespace) -> int:
    load_before = os.getloadavg()
    ops = design_ops(args.design, args.size, args.udp_checksum)
    trials = compare_designs(binary, args.design, args)
    rows = design_rows(args.design, trials, ops, args)
    print("\n| design | mlfc.p4 pps by round | l3fwd.p4 pps by round | ratio by round | target |")
    print("|---|---|---|---|---|")
    for r in rows:

        def each(key: str, fmt: str, rounds: list[dict] = r["rounds"]) -> str:
            return ", ".join(format(x[key], fmt) for x in rounds)

        print(f"| {r['design']} | {each('mlfc_pps', '.0f')} | {each('l3fwd_pps', '.0f')} | {each('ratio', '.2f')} "
              f"| >= {TARGET_RATIO} |")  # fmt: skip
    if args.publish:
        from mlfc.lab import summaries

        with tempfile.TemporaryDirectory() as tmp:
            csv_name = "trials-udp-checksum.csv" if args.udp_checksum else "trials.csv"
            csv_path = Path(tmp) / csv_name
            with csv_path.open("w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=list(trials[0]))
                w.writeheader()
                w.writerows(trials)
            meta = {"bmv2": f"{shutil.which(binary)} {bmv2_version(binary)}", "cpus": os.cpu_count(),
                    "load_before": " ".join(f"{x:.2f}" for x in load_before),
                    "load_after": " ".join(f"{x:.2f}" for x in os.getloadavg()),
                    "command": command_line()}  # fmt: skip
            path = summaries.publish(args.experiment, rows, key=("design",), runs=[(csv_path, csv_name)], meta=meta)
        print(f"published {len(rows)} design(s) to {path}; `make figures` regenerates the docs' table")
    return 0


def bmv2_version(binary: str) -> str:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10)
    return out.stdout.strip() or out.stderr.strip()


if __name__ == "__main__":
    sys.exit(main())
