"""Lab experiment (``make kernel-mltcp``): MLTCP in kernel TCP against plain Reno/CUBIC.

Lab code: it drives the product (``mlfc.hosts.kernel``: loader, namespace defaults) and uses the
lab's metric definitions (``mlfc.lab.results``, ``mlfc.lab.scenarios``). Root only.

Network: one namespace per worker (``w1`` .. ``w8``), a router namespace and a server namespace;
every worker's traffic to the server crosses the router's egress veth toward the server, shaped by
``htb`` (rate ``--rate``) over a ``bfifo`` of ``--buffer`` bytes: the shared bottleneck. Offloads
are off so the queue holds MTU-sized packets; ``tcp_no_metrics_save=1`` in every worker namespace
so a connection does not inherit the previous run's ssthresh.

Jobs: a small compute/communication emulator on plain TCP sockets, one connection per job. Each
iteration the worker sleeps its compute time, then sends its gradient bytes and waits for the
server's 8-byte reply (sent once all bytes arrived). All jobs start their first iteration at the same
instant (the worst case: every first communication phase collides). The workers' congestion control
is chosen as a user would: ``net.ipv4.tcp_congestion_control`` in their namespaces
(:func:`mlfc.hosts.kernel.namespaces.set_default_cc`), checked on every socket with
``TCP_CONGESTION``.

Per mix and round: each job profile alone (under reno and under cubic: the ideal), then the
treatments reno, mltcp_reno, cubic, mltcp_cubic. Metrics are the lab's (mlfc.lab.results
and .scenarios): average and p99 iteration time (first iteration left out), share of the ideal gain
against the plain algorithm of the same family, the iteration from which the jobs stay interleaved.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import shutil
import signal
import socket
import statistics
import struct
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mlfc.hosts.kernel import KernelMltcpError, loader, namespaces
from mlfc.lab import figures
from mlfc.lab.results import IterationRecord, format_table, markdown_table, plot_timeline, summarise, write_csv
from mlfc.lab.scenarios import ideal_iteration_times, interleaving_iteration, share_of_ideal_gain
from mlfc.policy.mltcp import IterationDetection, MltcpParams
from mlfc.testing.netns import NetnsLab, in_netns, run

MAX_WORKERS = 8
SERVER_ADDR = "10.80.250.1"
PORT_BASE = 5100
REPLY = 8  # bytes the server answers with once an iteration's data is in
TCP_INFO_TOTAL_RETRANS = 100  # byte offset of tcpi_total_retrans in struct tcp_info


@dataclass(frozen=True)
class Profile:
    """One job's iteration: ``comm_s`` is the time its bytes take alone at the bottleneck rate."""

    name: str
    comm_s: float
    compute_s: float

    def nbytes(self, rate_bps: float) -> int:
        return int(self.comm_s * rate_bps / 8)


@dataclass(frozen=True)
class Mix:
    name: str
    description: str
    profiles: tuple[Profile, ...]


# Sum of comm/(comm+compute) over the jobs: <= 1 compatible (they can interleave fully), > 1 partially.
MIXES: dict[str, Mix] = {
    m.name: m
    for m in (
        Mix("compat-2", "2 identical jobs, a = 0.40 each (sum 0.80)", (Profile("m", 0.20, 0.30),) * 2),
        Mix("compat-4", "4 identical jobs, a = 0.20 each (sum 0.80)", (Profile("s", 0.08, 0.32),) * 4),
        Mix("compat-8", "8 identical jobs, a = 0.12 each (sum 0.94)", (Profile("xs", 0.04, 0.30),) * 8),
        Mix("partial-2", "2 identical jobs, a = 0.55 each (sum 1.10)", (Profile("l", 0.36, 0.30),) * 2),
        Mix(
            "partial-4",
            "2 jobs a = 0.40 and 2 jobs a = 0.20 (sum 1.20)",
            (Profile("m", 0.20, 0.30),) * 2 + (Profile("s", 0.08, 0.32),) * 2,
        ),
        Mix("partial-8", "8 identical jobs, a = 0.15 each (sum 1.20)", (Profile("xs+", 0.053, 0.30),) * 8),
    )
}
FAMILIES = {"reno": "mltcp_reno", "cubic": "mltcp_cubic"}  # plain -> MLTCP


def say(msg: str) -> None:
    print(msg, flush=True)


# ---- network ------------------------------------------------------------------------------------


@dataclass
class Bottleneck:
    lab: NetnsLab
    workers: list[str]
    router: str
    server: str


def _offloads_off(ns: str, dev: str) -> None:
    if shutil.which("ethtool"):
        run("ip", "netns", "exec", ns, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off", check=False)


def build_network(
    lab: NetnsLab,
    rate_bps: float,
    buffer_bytes: int,
    workers: int = MAX_WORKERS,
    slow_start_after_idle: int = 1,
    rto_min_ms: float | None = None,
) -> Bottleneck:
    router, server = lab.namespace("r"), lab.namespace("s")
    names = []
    for i in range(1, workers + 1):
        w = lab.namespace(f"w{i}")
        wdev, rdev = lab.link(w, f"10.80.{i}.1", router, f"10.80.{i}.2")
        rto = ["rto_min", f"{rto_min_ms:g}ms"] if rto_min_ms else []
        run("ip", "-n", w, "route", "add", "default", "via", f"10.80.{i}.2", *rto)
        run("ip", "netns", "exec", w, "sysctl", "-qw", "net.ipv4.tcp_no_metrics_save=1")
        run("ip", "netns", "exec", w, "sysctl", "-qw", f"net.ipv4.tcp_slow_start_after_idle={slow_start_after_idle}")
        _offloads_off(w, wdev)
        _offloads_off(router, rdev)
        names.append(w)
    rdev, sdev = lab.link(router, "10.80.250.2", server, SERVER_ADDR)
    run("ip", "-n", server, "route", "add", "10.80.0.0/16", "via", "10.80.250.2")
    run("ip", "netns", "exec", router, "sysctl", "-qw", "net.ipv4.ip_forward=1")
    _offloads_off(router, rdev)
    _offloads_off(server, sdev)
    rate = f"{int(rate_bps)}bit"
    lab.tc(router, "qdisc", "add", "dev", rdev, "root", "handle", "1:", "htb", "default", "1")
    lab.tc(router, "class", "add", "dev", rdev, "parent", "1:", "classid", "1:1", "htb", "rate", rate, "ceil", rate)
    lab.tc(router, "qdisc", "add", "dev", rdev, "parent", "1:1", "handle", "10:", "bfifo", "limit", str(buffer_bytes))
    return Bottleneck(lab, names, router, server)


# ---- jobs ---------------------------------------------------------------------------------------


def _recv_exact(sock: socket.socket, n: int, buf: bytearray) -> bool:
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[: min(len(buf), n - got)])
        if k == 0:
            return False
        got += k
    return True


def _retrans(sock: socket.socket) -> int:
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    return struct.unpack_from("<I", info, TCP_INFO_TOTAL_RETRANS)[0]


@dataclass
class RunResult:
    scenario: str
    cc: str
    records: list[IterationRecord]
    params: MltcpParams | None = None

    @property
    def overall(self):
        return summarise(self.records)[1]

    @property
    def avg(self) -> float:
        return self.overall.avg

    @property
    def p99(self) -> float:
        return self.overall.p99

    @property
    def interleaved_at(self) -> int | None:
        return interleaving_iteration(self.records)


def run_jobs(
    net: Bottleneck, scenario: str, profiles: Sequence[Profile], cc: str, iterations: int, rate_bps: float,
    flows: int = 1, timeout: float = 60.0,
) -> RunResult:  # fmt: skip
    """One run: every profile a job on its own worker namespace, ``cc`` their default; a job sends its
    bytes over ``flows`` parallel connections (as NCCL's socket transport does) and its iteration ends
    when every one of them has been answered."""
    workers = net.workers[: len(profiles)]
    for w in workers:
        namespaces.set_default_cc(namespaces.resolve(w), cc)
    listeners = [
        in_netns(net.server, lambda j=j: socket.create_server((SERVER_ADDR, PORT_BASE + j), backlog=flows))
        for j in range(len(profiles))
    ]
    errors: list[BaseException] = []
    records: list[IterationRecord] = []
    lock = threading.Lock()

    def serve(j: int, nbytes: int) -> None:
        try:
            conn, _ = listeners[j].accept()
            conn.settimeout(timeout)
            buf = bytearray(1 << 20)
            with conn:
                for _ in range(iterations):
                    if not _recv_exact(conn, nbytes, buf):
                        raise ConnectionError(f"job {j + 1}: worker closed early")
                    conn.sendall(b"\0" * REPLY)
        except BaseException as exc:
            errors.append(exc)

    def connect(j: int) -> socket.socket:
        s = socket.create_connection((SERVER_ADDR, PORT_BASE + j), timeout=timeout)
        got = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode()
        if got != cc:
            s.close()
            raise KernelMltcpError(f"job {j + 1}'s socket uses {got}, not {cc}: the namespace default did not apply")
        return s

    for lst in listeners:
        lst.settimeout(timeout)
    servers = [
        threading.Thread(target=serve, args=(j, p.nbytes(rate_bps) // flows), daemon=True)
        for j, p in enumerate(profiles)
        for _ in range(flows)
    ]
    for t in servers:
        t.start()
    socks = [[in_netns(w, lambda j=j: connect(j)) for _ in range(flows)] for j, w in enumerate(workers)]
    t0 = time.time() + 0.3  # every job's first compute phase starts here

    def send(s: socket.socket, payload: bytes, reply: bytearray) -> None:
        try:
            s.sendall(payload)
            if not _recv_exact(s, REPLY, reply):
                raise ConnectionError("server closed early")
        except BaseException as exc:
            errors.append(exc)

    def work(j: int, p: Profile, conns: list[socket.socket]) -> None:
        payload = b"\x5a" * (p.nbytes(rate_bps) // flows)
        replies = [bytearray(REPLY) for _ in conns]
        mine = []
        try:
            time.sleep(max(0.0, t0 - time.time()))
            last_retrans = sum(_retrans(s) for s in conns)
            for it in range(iterations):
                start = time.time()
                time.sleep(p.compute_s)
                comm_start = time.time()
                if len(conns) == 1:
                    send(conns[0], payload, replies[0])
                else:
                    helpers = [
                        threading.Thread(target=send, args=(s, payload, r)) for s, r in zip(conns, replies, strict=True)
                    ]
                    for h in helpers:
                        h.start()
                    for h in helpers:
                        h.join()
                if errors:
                    return
                end = time.time()
                retrans = sum(_retrans(s) for s in conns)
                mine.append(IterationRecord(scenario, j + 1, f"w{j + 1}", it, start - t0, comm_start - t0, end - t0,
                                            end - t0, len(payload) * len(conns), retrans - last_retrans))  # fmt: skip
                last_retrans = retrans
        except BaseException as exc:
            errors.append(exc)
        finally:
            for s in conns:
                s.close()
            with lock:
                records.extend(mine)

    threads = [
        threading.Thread(target=work, args=(j, p, c), daemon=True)
        for j, (p, c) in enumerate(zip(profiles, socks, strict=True))
    ]
    for t in threads:
        t.start()
    deadline = time.time() + timeout + iterations * 5
    for t in threads + servers:
        t.join(max(0.1, deadline - time.time()))
    for lst in listeners:
        lst.close()
    if any(t.is_alive() for t in threads + servers):
        raise KernelMltcpError(f"{scenario}: jobs did not finish in time")
    if errors:
        raise KernelMltcpError(f"{scenario}: {errors[0]!r}")
    records.sort(key=lambda r: (r.job, r.iteration))
    return RunResult(scenario, cc, records)


# ---- the experiment -----------------------------------------------------------------------------


@dataclass
class Cell:
    """One mix, one treatment: a result per round, with the round's ideal and baseline."""

    mix: str
    treatment: str  # "reno", "mltcp_reno 2:0.5", ...
    family: str
    runs: list[RunResult] = field(default_factory=list)
    ideal_avgs: list[float] = field(default_factory=list)
    ideal_p99s: list[float] = field(default_factory=list)  # the slowest job's ideal time, per round
    base_avgs: list[float] = field(default_factory=list)
    csvs: list[Path] = field(default_factory=list)  # each round's per-iteration records

    def shares(self) -> list[float]:
        return [
            share_of_ideal_gain(b, r.avg, i) for b, r, i in zip(self.base_avgs, self.runs, self.ideal_avgs, strict=True)
        ]

    def pooled_share(self) -> float:
        """The share of the ideal gain of the round-averaged times: robust when one round's baseline
        happened to interleave by itself (that round's own share divides by almost nothing)."""
        mean = statistics.fmean
        return share_of_ideal_gain(mean(self.base_avgs), mean(r.avg for r in self.runs), mean(self.ideal_avgs))

    def ideal_speedups(self) -> list[float]:
        return [b / i for b, i in zip(self.base_avgs, self.ideal_avgs, strict=True)]


def _mean_range(values: Sequence[float], fmt: str = "{:.3f}", pct: bool = False) -> str:
    vals = [v for v in values if not math.isnan(v)]
    if not vals:
        return "-"
    k = 100 if pct else 1
    mean, lo, hi = statistics.fmean(vals) * k, min(vals) * k, max(vals) * k
    if pct:
        return f"{mean:.0f} % ({lo:.0f}..{hi:.0f})"
    return f"{fmt.format(mean)} ({fmt.format(lo)}..{fmt.format(hi)})"


def label(params: MltcpParams | None) -> str:
    return "" if params is None else f" {params.slope:g}:{params.intercept:g}"


def summary_rows(cells: list[Cell]) -> list[list[object]]:
    rows = []
    for c in cells:
        base = c.treatment in FAMILIES
        rows.append([
            c.mix, c.treatment, len(c.runs),
            _mean_range([r.avg for r in c.runs]), _mean_range([r.p99 for r in c.runs]),
            _mean_range([b / r.avg for b, r in zip(c.base_avgs, c.runs, strict=True)]),
            _mean_range(c.ideal_speedups()),
            "-" if base else _mean_range(c.shares(), pct=True),
            "-" if base or math.isnan(c.pooled_share()) else f"{c.pooled_share():.0%}",
            "/".join("-" if r.interleaved_at is None else str(r.interleaved_at) for r in c.runs),
        ])  # fmt: skip
    return rows


HEADERS = [
    "mix",
    "treatment",
    "rounds",
    "avg s",
    "p99 s",
    "speed-up",
    "ideal",
    "of ideal gain",
    "pooled",
    "interleaved from iter",
]


def write_round_csv(path: Path, cells: list[Cell]) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["mix", "treatment", "round", "avg_s", "p99_s", "baseline_avg_s", "ideal_avg_s", "speedup",
                    "ideal_speedup", "share_of_ideal_gain", "interleaved_from", "retransmits"])  # fmt: skip
        for c in cells:
            for k, (r, b, i) in enumerate(zip(c.runs, c.base_avgs, c.ideal_avgs, strict=True)):
                share = share_of_ideal_gain(b, r.avg, i)
                w.writerow([c.mix, c.treatment, k + 1, f"{r.avg:.4f}", f"{r.p99:.4f}", f"{b:.4f}", f"{i:.4f}",
                            f"{b / r.avg:.4f}", f"{b / i:.4f}", "" if math.isnan(share) else f"{share:.4f}",
                            "" if r.interleaved_at is None else r.interleaved_at,
                            sum(x.retransmits for x in r.records)])  # fmt: skip


def published_rows(cells: list[Cell], command: str) -> list[tuple[dict, list[tuple[Path, str]]]]:
    """docs/data/mltcp rows (issue 24's schema, dataplane "kernel") of the MLTCP treatments, each with its
    own and its baseline's per-round CSVs (same rounds)."""
    by_key = {(c.mix, c.treatment): c for c in cells}
    out = []
    for c in cells:
        if c.treatment in FAMILIES:
            continue
        base = by_key[(c.mix, c.family)]
        mean = statistics.fmean
        b_avg, b_p99 = mean(r.avg for r in base.runs), mean(r.p99 for r in base.runs)
        ideal_avg, ideal_p99 = mean(c.ideal_avgs), mean(c.ideal_p99s)
        f = c.treatment.split(" ", 1)[1]
        row = {
            "mix": c.mix,
            "cc": c.family,
            "dataplane": "kernel",
            "treatment": FAMILIES[c.family],
            "jobs": len(MIXES[c.mix].profiles),
            "rounds": len(c.runs),
            "share_of_ideal": [None if math.isnan(v) else round(v, 4) for v in c.shares()],
            "avg_speedup": round(b_avg / mean(r.avg for r in c.runs), 4),
            "p99_speedup": round(b_p99 / mean(r.p99 for r in c.runs), 4),
            "ideal_avg": round(b_avg / ideal_avg, 4),
            "ideal_p99": round(b_p99 / ideal_p99, 4),
            "interleaved_from": [r.interleaved_at for r in c.runs],
            "f": f,
            "command": command,
            "baseline_avg_s": round(b_avg, 4),
            "avg_s": round(mean(r.avg for r in c.runs), 4),
            "pooled_share": None if math.isnan(c.pooled_share()) else round(c.pooled_share(), 4),
            "retransmits": [sum(x.retransmits for x in r.records) for r in c.runs],
            "baseline_retransmits": [sum(x.retransmits for x in r.records) for r in base.runs],
            "measured": time.strftime("%Y-%m-%d"),
            "ack_delay": None,
        }
        tag = f"{c.mix}/kernel"
        runs = [(p, f"{tag}/{FAMILIES[c.family]}@{f.replace(':', '_')}-r{i + 1}.csv") for i, p in enumerate(c.csvs)]
        runs += [(p, f"{tag}/{c.family}-r{i + 1}.csv") for i, p in enumerate(base.csvs)]
        out.append((row, runs))
    return out


def targets(cells: list[Cell]) -> list[str]:
    """Issue 24's kernel targets (lab/figures.py's table, the one the docs are generated with)."""
    out = []
    for row, _ in published_rows(cells, ""):
        goal = figures.mltcp_target(row)
        if goal == "-":
            continue
        vals = [v for v in row["share_of_ideal"] if v is not None]
        m = statistics.fmean(vals) if vals else math.nan
        out.append(
            f"{row['mix']} {row['treatment']} {row['f']}: {m:.0%} of the ideal gain, mean of {len(vals)} rounds "
            f"({min(vals, default=math.nan):.0%}..{max(vals, default=math.nan):.0%}; pooled "
            f"{'-' if row['pooled_share'] is None else format(row['pooled_share'], '.0%')}) "
            f"(target {goal.replace('>=', ' >= ')}): {'met' if figures.mltcp_meets(row) else 'MISSED'}"
        )
    best = max((s for c in cells for s in c.ideal_speedups()), default=math.nan)
    out.append(
        f"largest ideal average gain of a run: {best:.2f}x (target >= 1.8x): {'met' if best >= 1.8 else 'MISSED'}"
    )
    return out


def experiment(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rate = args.rate * 1e6
    if args.time_scale != 1:
        for name, m in list(MIXES.items()):
            scaled = (Profile(p.name, p.comm_s * args.time_scale, p.compute_s * args.time_scale) for p in m.profiles)
            MIXES[name] = Mix(m.name, m.description, tuple(scaled))
    grid = [MltcpParams(float(a), float(b)) for a, b in (p.split(":") for p in args.grid.split(","))]
    detection = IterationDetection()
    loaded_here = [a for a in loader.ALGORITHMS.values() if not loader.registered(a)]
    if loaded_here:
        loader.load(loaded_here, grid[0], detection, log=lambda m: say(f"  {m}"))
    # The plain algorithms must be allowed as namespace defaults too (cubic is not when the host's default
    # is something else); restored at the end.
    allowed_before = namespaces.allowed()
    missing = [f for f in args.cc.split(",") if f and f not in allowed_before]
    if missing:
        namespaces.set_allowed(allowed_before + missing)
        say(f"  allowed {', '.join(missing)} as namespace defaults (net.ipv4.tcp_allowed_congestion_control)")
    load0 = os.getloadavg()
    cells: dict[tuple[str, str], Cell] = {}
    families = [f for f in args.cc.split(",") if f]
    t_start = time.time()
    try:
        with NetnsLab("kmltcp") as lab:
            net = build_network(
                lab, rate, args.buffer, slow_start_after_idle=args.slow_start_after_idle, rto_min_ms=args.rto_min
            )
            say(f"bottleneck: htb {args.rate:g} Mbit/s, bfifo {args.buffer} B; {len(net.workers)} worker namespaces")
            for rnd in range(1, args.rounds + 1):
                for mix_name in args.mixes.split(","):
                    mix = MIXES[mix_name]
                    for fam in families:
                        ideal = _ideal(net, mix, fam, args, rate, out, rnd)  # (average, slowest job)
                        base = run_jobs(net, f"{mix.name}/{fam}", mix.profiles, fam, args.iterations, rate, args.flows)
                        _record(cells, mix.name, fam, fam, base, ideal, base.avg, out, rnd, t_start)
                        for params in grid:
                            loader.set_params([loader.algorithm(fam)], params, detection)
                            name = FAMILIES[fam] + label(params)
                            res = run_jobs(
                                net,
                                f"{mix.name}/{name}",
                                mix.profiles,
                                FAMILIES[fam],
                                args.iterations,
                                rate,
                                args.flows,
                            )
                            res.params = params
                            _record(cells, mix.name, name, fam, res, ideal, base.avg, out, rnd, t_start)
                say(f"== after round {rnd}\n" + format_table(HEADERS, summary_rows(list(cells.values()))))
    finally:
        if missing:
            namespaces.set_allowed([c for c in namespaces.allowed() if c not in missing])
        if loaded_here and not args.keep_loaded:
            for w in loader.unload(loaded_here, log=lambda m: say(f"  {m}")):
                say(f"  warning: {w}")
    load1 = os.getloadavg()
    rows = summary_rows(list(cells.values()))
    lines = [
        f"# Kernel MLTCP: {args.rounds} rounds, {args.iterations} iterations per run",
        "",
        f"htb {args.rate:g} Mbit/s over bfifo {args.buffer} B between network namespaces; workers' default "
        f"congestion control set per namespace; F = slope * bytes_ratio + intercept ({args.grid}); "
        f"load average {load0[0]:.1f} at the start, {load1[0]:.1f} at the end; "
        f"{(time.time() - t_start) / 60:.1f} min.",
        "",
        'Mean over the rounds with the range in brackets ("pooled": the share of the round-averaged times); '
        "speed-up and share of the ideal gain are against the "
        'plain algorithm of the same family in the same round; "ideal" is the speed-up if every job ran as fast '
        "as alone (limited by the bottleneck's load).",
        "",
        markdown_table(HEADERS, rows),
        "",
        *[f"- {t}" for t in targets(list(cells.values()))],
        "",
        "Mixes: " + "; ".join(f"{m.name}: {m.description}" for m in MIXES.values() if m.name in args.mixes.split(",")),
    ]
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    write_round_csv(out / "rounds.csv", list(cells.values()))
    say(format_table(HEADERS, rows))
    for t in targets(list(cells.values())):
        say(t)
    say(f"results in {out}/ (summary.md, rounds.csv, per-run CSVs and timelines)")
    if args.publish:
        published = published_rows(list(cells.values()), args.command)
        rows_, runs = zip(*published, strict=True) if published else ((), ())
        path = figures.publish(
            "mltcp",
            list(rows_),
            key=figures.MLTCP_KEY,
            runs=[r for rs in runs for r in rs],
            meta={"schema": figures.MLTCP_SCHEMA},
        )
        say(f"published {len(rows_)} row(s) to {path}; `make figures` regenerates the docs' tables")
    return 0


def _ideal(net: Bottleneck, mix: Mix, fam: str, args, rate: float, out: Path, rnd: int) -> tuple[float, float]:
    """Each distinct profile alone under ``fam``: the mix's ideal average iteration time and its slowest
    job's."""
    solo_t, solo_comm = {}, {}
    by_profile: dict[Profile, RunResult] = {}
    for p in dict.fromkeys(mix.profiles):
        by_profile[p] = run_jobs(
            net, f"{mix.name}/solo-{p.name}-{fam}", [p], fam, args.solo_iterations, rate, args.flows
        )
    for j, p in enumerate(mix.profiles):
        overall = summarise(by_profile[p].records)[1]
        solo_t[j + 1], solo_comm[j + 1] = overall.avg, overall.comm_avg
    ideal = ideal_iteration_times(solo_t, solo_comm)
    avg = sum(ideal.values()) / len(ideal)
    alone = ", ".join(f"{p.name} {r.avg:.3f} s" for p, r in by_profile.items())
    say(f"[round {rnd}] {mix.name} alone ({fam}): {alone}; ideal average {avg:.3f} s")
    return avg, max(ideal.values())


def _record(cells, mix: str, name: str, fam: str, res: RunResult, ideals: tuple[float, float], base_avg: float,
            out: Path, rnd: int, t_start: float) -> None:  # fmt: skip
    ideal, ideal_slowest = ideals
    cell = cells.setdefault((mix, name), Cell(mix, name, fam))
    cell.runs.append(res)
    cell.ideal_avgs.append(ideal)
    cell.ideal_p99s.append(ideal_slowest)
    cell.base_avgs.append(base_avg)
    stem = name.replace(" ", "_").replace(":", "_")
    cell.csvs.append(out / mix / f"{stem}-r{rnd}.csv")
    write_csv(cell.csvs[-1], res.records)
    plot_timeline(out / mix / f"{stem}-r{rnd}.png", res.records, f"{mix}: {name} (kernel TCP, round {rnd})")
    share = share_of_ideal_gain(base_avg, res.avg, ideal)
    gain = "" if name == fam or math.isnan(share) else f", {share:.0%} of the ideal gain"
    inter = res.interleaved_at
    elapsed = (time.time() - t_start) / 60
    say(f"[round {rnd}, {elapsed:4.1f} min] {mix} {name}: avg {res.avg:.3f} s, p99 {res.p99:.3f} s, "
        f"speed-up {base_avg / res.avg:.2f} (ideal {base_avg / ideal:.2f}){gain}, interleaved from "
        f"{'-' if inter is None else inter}, retransmits {sum(r.retransmits for r in res.records)}")  # fmt: skip


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="results/kernel-mltcp")
    ap.add_argument("--mixes", default=",".join(MIXES), help=f"comma-separated, from {', '.join(MIXES)}")
    ap.add_argument("--cc", default="reno,cubic", help="families: reno, cubic")
    ap.add_argument("--grid", default=f"{MltcpParams().slope:g}:{MltcpParams().intercept:g}",
                    help="MLTCP points SLOPE:INTERCEPT, comma-separated (default: mlfc.policy.mltcp's)")  # fmt: skip
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--solo-iterations", type=int, default=12)
    ap.add_argument("--time-scale", type=float, default=1.0, help="multiply every job's compute and communication time")
    ap.add_argument(
        "--flows", type=int, default=2, help="connections per job (its workers), all answered before it iterates"
    )
    ap.add_argument("--rate", type=float, default=200.0, help="bottleneck Mbit/s")
    ap.add_argument("--buffer", type=int, default=300_000, help="bottleneck queue, bytes (12 ms at 200 Mbit/s)")
    ap.add_argument("--slow-start-after-idle", type=int, choices=(0, 1), default=1,
                    help="the workers' net.ipv4.tcp_slow_start_after_idle (Linux's default 1)")  # fmt: skip
    ap.add_argument("--rto-min", type=float, help="ms: the workers' route rto_min (Linux's default 200)")
    ap.add_argument("--keep-loaded", action="store_true", help="leave mltcp_* registered if this run loaded them")
    ap.add_argument(
        "--publish",
        action="store_true",
        help="merge the MLTCP rows (dataplane kernel) into docs/data/mltcp/summary.json for `make figures`",
    )
    args = ap.parse_args(argv)
    args.command = " ".join(["python -m mlfc.lab.kernel_mltcp", *(sys.argv[1:] if argv is None else argv)])
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
