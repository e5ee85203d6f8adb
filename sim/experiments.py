"""The simulator's experiments: validation against the emulation, MLTCP at scale, circular
dependencies, MAIF time-to-accuracy, selective drop under incast, and the speed benchmark.

Each experiment writes under ``out/<experiment>/``: one CSV of iteration records per run, a CSV of
its table, ``summary.md`` (the table, the command, the seeds) and PNG plots. Seeds are printed with
every run; progress goes to stderr.
"""

from __future__ import annotations

import csv
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from mlfc.policy.drop import DropPolicy
from mlfc.policy.ecn import EcnProfile
from mlfc.policy.maif import MaifParams
from mlfc.policy.mltcp import MltcpParams
from mlfc.sim import metrics
from mlfc.sim.jobs import MODELS, PS, RING, SimJob, from_lab_job, model_job
from mlfc.sim.lab import (
    BOTTLENECK_PPS,
    MIXES,
    IterationRecord,
    dumbbell,
    ideal_iteration_times,
    interleaving_iteration,
    plot_timeline,
    read_csv,
    share_of_ideal_gain,
    summarise,
    synthetic_accuracy,
    write_csv,
)
from mlfc.sim.network import TcpSettings
from mlfc.sim.simulation import RunStats, SimConfig, SimResult, run
from mlfc.sim.topology import GBPS, SimTopology, from_lab, leaf_spine

# The emulation's figures (docs/results.md, 2026-11-30, BMv2 without logging macros at 1,500 packets/s,
# 16 iterations, MLTCP 2:0.5 vs Reno): the numbers the validation is held against.
EMULATION = {
    "two-compatible": {
        "source": "`make sweep`, 2:0.5, five rounds in two runs",
        "base_avg": (1.215, 1.231),
        "mltcp_avg": (1.032, 1.042),
        "speedup": (1.166, 1.192),
        "ideal": (1.198, 1.228),
        "share": (0.77, 0.89),
        "interleaved": (2, 9),
    },
    "partial": {
        "source": "`make e2e`, one run",
        "speedup": (1.34, 1.34),
        "ideal": (1.45, 1.45),
        "share": (0.76, 0.76),
        "interleaved": (3, 3),
    },
}
# The emulated network: BMv2 queues of 64 packets, Mininet links far faster than the bottleneck,
# mlfc's transport (1,400-byte chunks, 50 ms minimum RTO, an ACK at least every 8 chunks).
EMU_TCP = TcpSettings(mss=1400, min_rto_s=0.05, delayed_ack=2, delayed_ack_timeout_s=0.001)
EMU_EDGE_BPS = 1e9
EMU_DELAY_S = 100e-6


@dataclass
class Context:
    out: Path
    seeds: tuple[int, ...] = (1, 2, 3)
    iterations: int | None = None  # None: each experiment's default
    scale: float | None = None  # None: each experiment's default
    command: str = ""
    jobs: tuple[int, ...] | None = None  # scale: job counts (None: 4, 8, 16, 32)
    ccs: tuple[str, ...] | None = None  # scale: congestion controls (None: reno, cubic)
    resume: bool = False  # reuse the iteration records of runs already saved under out/
    log: Callable[[str], None] = field(default=lambda s: print(s, file=sys.stderr, flush=True))

    def dir(self, name: str) -> Path:
        d = self.out / name
        d.mkdir(parents=True, exist_ok=True)
        return d


# Experiments whose tables need a run's switch counters or wall time: never resumed from records.
_NOT_RESUMABLE = ("incast", "bench")


def _run(ctx: Context, exp: str, cfg: SimConfig) -> SimResult:
    path = ctx.dir(exp) / "runs" / f"{cfg.name.replace('/', '_')}_s{cfg.seed}.csv"
    if ctx.resume and exp not in _NOT_RESUMABLE and path.is_file():
        ctx.log(f"-- {exp}: {cfg.name} (seed {cfg.seed}): records reused from {path}")
        records = read_csv(path)
        dpath = _decisions_path(path)
        decisions = _read_decisions(dpath) if dpath.is_file() else []
        return SimResult(cfg, records, {}, {}, decisions, [], 0, RunStats(0.0, 0.0, 0, 0.0, 0))
    ctx.log(f"-- {exp}: {cfg.name} (seed {cfg.seed})")
    r = run(cfg)
    write_csv(path, r.records)
    if cfg.priorities == "maif":
        _write_decisions(_decisions_path(path), r.decisions)
    s = r.stats
    ctx.log(
        f"   {s.sim_s:.3f} simulated s in {s.wall_s:.1f} wall s ({s.sim_per_wall:.4f} sim s/wall s, "
        f"{s.events_per_s:,.0f} events/s)"
    )
    return r


def _decisions_path(records_path: Path) -> Path:
    return records_path.with_name(records_path.stem + "_decisions.csv")


def _write_decisions(path: Path, decisions: Sequence[tuple[float, dict[int, int]]]) -> None:
    """The coordinator's decisions of a run, one row per decision and job: when it was installed, the class."""
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["decision", "sim_s", "job", "class"])
        for k, (t, classes) in enumerate(decisions):
            for job, cls in sorted(classes.items()):
                w.writerow([k, repr(t), job, cls])


def _read_decisions(path: Path) -> list[tuple[float, dict[int, int]]]:
    out: dict[int, tuple[float, dict[int, int]]] = {}
    with path.open() as f:
        for row in csv.DictReader(f):
            k = int(row["decision"])
            out.setdefault(k, (float(row["sim_s"]), {}))[1][int(row["job"])] = int(row["class"])
    return [out[k] for k in sorted(out)]


def _solo_stats(records: Sequence[IterationRecord]) -> tuple[float, float, float]:
    per, _ = summarise(records)
    p = per[0]
    return p.avg, p.comm_avg, p.push_avg


def _write_table(path: Path, headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(headers)
        for row in rows:
            w.writerow(["" if isinstance(v, float) and math.isnan(v) else v for v in row])


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    def cell(v: object) -> str:
        if isinstance(v, float):
            return "—" if math.isnan(v) else f"{v:.3f}"
        return str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _summary(ctx: Context, exp: str, title: str, body: list[str]) -> str:
    text = "\n".join([f"# {title}", "", f"Command: `{ctx.command}`", "", *body, ""])
    (ctx.dir(exp) / "summary.md").write_text(text)
    return text


def _fmt_range(lo: float, hi: float, pct: bool = False) -> str:
    f = (lambda v: f"{100 * v:.0f} %") if pct else (lambda v: f"{v:.3f}")
    return f(lo) if lo == hi else f"{f(lo)}..{f(hi)}"


def _its(values: Sequence[int | None]) -> str:
    return "/".join("-" if v is None else str(v) for v in values)


# ---- 1. validation against the emulation --------------------------------------------------------


def validation(ctx: Context, mixes: Sequence[str] = ("two-compatible", "partial")) -> str:
    """The emulation's mixes on its dumbbell, at its bottleneck of 1,500 packets/s, several seeds."""
    exp = "validation"
    iterations = ctx.iterations or 16
    tcp = EMU_TCP
    bottleneck = BOTTLENECK_PPS * tcp.packet_bytes * 8
    rows, md_rows = [], []
    plots = []
    for mix_name in mixes:
        mix = MIXES[mix_name]
        topo = from_lab(dumbbell(len(mix.jobs), mix.workers_per_job), EMU_EDGE_BPS, bottleneck, EMU_DELAY_S)
        jobs = tuple(
            from_lab_job(j, tuple(f"j{j.job}w{w}" for w in range(mix.workers_per_job)), f"j{j.job}ps", jitter=0.01)
            for j in mix.jobs
        )
        jobs = tuple(
            replace(j, importance=metrics.importance_pattern(j.push_bytes, tcp.mss, seed=j.job_id)) for j in jobs
        )
        base_avgs, ml_avgs, ml_p99, base_p99, ml_its, base_its, ideals = [], [], [], [], [], [], []
        for seed in ctx.seeds:
            solo_t, solo_c, solo_p = {}, {}, {}
            for j in jobs:
                r = _run(ctx, exp, SimConfig(f"{mix_name}/solo-{j.job_id}", topo, (j,), iterations, tcp=tcp, seed=seed))
                solo_t[j.job_id], solo_c[j.job_id], solo_p[j.job_id] = _solo_stats(r.records)
            ideal = ideal_iteration_times(solo_t, solo_c, solo_p)
            ideals.append(statistics.fmean(ideal.values()))
            base = _run(ctx, exp, SimConfig(f"{mix_name}/baseline", topo, jobs, iterations, tcp=tcp, seed=seed))
            ml = _run(
                ctx, exp, SimConfig(f"{mix_name}/mltcp-reno", topo, jobs, iterations, mltcp=True, tcp=tcp, seed=seed)
            )
            b, m = summarise(base.records)[1], summarise(ml.records)[1]
            base_avgs.append(b.avg)
            base_p99.append(b.p99)
            ml_avgs.append(m.avg)
            ml_p99.append(m.p99)
            base_its.append(interleaving_iteration(base.records))
            ml_its.append(interleaving_iteration(ml.records))
            if seed == ctx.seeds[0]:
                for name, res in (("baseline", base), ("mltcp-reno", ml)):
                    png = ctx.dir(exp) / f"{mix_name}-{name}.png"
                    plot_timeline(png, res.records, f"ns-3: {mix_name}, {name} (seed {seed})")
                    plots.append(png)
        base_avg = statistics.fmean(base_avgs)
        ideal_avg = statistics.fmean(ideals)
        shares = [share_of_ideal_gain(base_avg, a, ideal_avg) for a in ml_avgs]
        speedups = [base_avg / a for a in ml_avgs]
        emu = EMULATION.get(mix_name, {})
        row = [
            mix_name,
            len(ctx.seeds),
            base_avg,
            statistics.fmean(ml_avgs),
            statistics.fmean(speedups),
            statistics.fmean(base_p99) / statistics.fmean(ml_p99),
            base_avg / ideal_avg,
            statistics.fmean(shares),
            min(shares),
            max(shares),
            _its(ml_its),
            _its(base_its),
        ]
        rows.append(row)
        sim_share = f"{100 * row[7]:.0f} % ({100 * row[8]:.0f}..{100 * row[9]:.0f})"
        md_rows.append(
            [
                mix_name,
                f"{row[4]:.3f} ({min(speedups):.3f}..{max(speedups):.3f})",
                _fmt_range(*emu["speedup"]) if emu else "—",
                f"{row[6]:.3f}",
                _fmt_range(*emu["ideal"]) if emu else "—",
                sim_share,
                _fmt_range(*emu["share"], pct=True) if emu else "—",
                _its(ml_its),
                "..".join(str(i) for i in sorted(set(emu["interleaved"]))) if emu else "—",
                _its(base_its),
            ]
        )
    headers = [
        "mix", "seeds", "base avg s", "mltcp avg s", "avg speed-up", "p99 speed-up", "ideal speed-up",
        "share of ideal", "share min", "share max", "mltcp interleaved from", "baseline interleaved from",
    ]  # fmt: skip
    _write_table(ctx.dir(exp) / "validation.csv", headers, rows)
    md_headers = [
        "mix", "speed-up ns-3 (range)", "speed-up emulation", "ideal ns-3", "ideal emulation",
        "share of ideal ns-3", "share emulation", "MLTCP interleaved from, ns-3 (per seed)",
        "emulation", "baseline interleaved from, ns-3",
    ]  # fmt: skip
    body = [
        f"ns-3, {iterations} iterations, seeds {', '.join(map(str, ctx.seeds))}, MLTCP-Reno "
        f"{MltcpParams().slope:g}:{MltcpParams().intercept:g} vs Reno; dumbbell, bottleneck {BOTTLENECK_PPS} "
        f"packets/s of {tcp.packet_bytes} bytes each way, queues of 64 packets; compute jitter 1 %.",
        "",
        _md_table(md_headers, md_rows),
        "",
        "Emulation: " + "; ".join(f"{k}: {v['source']}" for k, v in EMULATION.items() if k in mixes) + ".",
        "",
        *[f"![{p.stem}]({p.name})" for p in plots],
    ]
    return _summary(ctx, exp, "Validation: ns-3 against the emulation", body)


# ---- 2. MLTCP at scale -------------------------------------------------------------------------

SCALE_FABRIC = {"leaves": 4, "spines": 2, "hosts_per_leaf": 8, "oversubscription": 2.0}
SCALE_MODELS = ("resnet50", "bert-base", "vgg16")


def scale_fabric() -> SimTopology:
    return leaf_spine(**SCALE_FABRIC, host_rate_bps=100 * GBPS)  # type: ignore[arg-type]


SCALE_GROUP = 4  # jobs per parameter-server host


def scale_jobs(topo: SimTopology, n: int, scale: float, models: Sequence[str] = SCALE_MODELS) -> tuple[SimJob, ...]:
    """``n`` PS jobs of two workers, in groups of SCALE_GROUP jobs of one model (models cycled group by
    group) whose parameter servers share a host: a group competes on that host's link as the lab's
    dumbbell jobs do on theirs. Group g's PS host is on leaf g, its workers on the other leaves (every
    push and pull crosses the spines, where ECMP spreads the flows), hosts used round-robin per leaf."""
    leaves = SCALE_FABRIC["leaves"]
    hpl = SCALE_FABRIC["hosts_per_leaf"]
    used = [0] * leaves

    def host(leaf: int) -> str:
        leaf %= leaves
        h = used[leaf] % hpl
        used[leaf] += 1
        return f"l{leaf + 1}h{h + 1}"

    jobs = []
    ps = ""
    for k in range(n):
        group, member = divmod(k, SCALE_GROUP)
        if member == 0:
            ps = host(group)
        others = [leaf for leaf in range(leaves) if leaf != group % leaves]
        workers = (host(others[member % len(others)]), host(others[(member + 1) % len(others)]))
        model = models[group % len(models)]
        jobs.append(model_job(k + 1, model, workers, ps, PS, scale=scale, jitter=0.01, tau=8 + 2 * (k % 7)))
    return tuple(jobs)


def _fabric_solo(ctx: Context, exp: str, topo: SimTopology, jobs: Sequence[SimJob], its: int, cc: str, seed: int,
                 tcp: TcpSettings) -> dict[int, float]:  # fmt: skip
    """Solo iteration time of every job (identical jobs by position are run once)."""
    cache: dict[tuple, float] = {}
    out = {}
    for j in jobs:
        key = (j.push_bytes, j.pull_bytes, j.compute_s, j.pattern, tuple(len(topo.paths(s, d)[0]) for s, d, _ in
               metrics.flows(j)))  # fmt: skip
        if key not in cache:
            r = _run(ctx, exp, SimConfig(f"solo-{cc}-{j.name}", topo, (replace(j, jitter=0.0),), its, cc=cc, tcp=tcp,
                                         seed=seed, **FABRIC))  # fmt: skip
            cache[key] = summarise(r.records)[1].avg
        out[j.job_id] = cache[key]
    return out


def at_scale(ctx: Context, counts: Sequence[int] = (4, 8, 16, 32), ccs: Sequence[str] = ("reno", "cubic")) -> str:
    exp = "scale"
    counts = ctx.jobs or counts
    ccs = ctx.ccs or ccs
    iterations = ctx.iterations or 30
    scale = ctx.scale or 0.02
    tcp = TcpSettings(mtu=9000, mss=8948)
    topo = scale_fabric()
    headers = [
        "cc", "jobs", "seed", "scale", "base avg ms", "mltcp avg ms", "avg speed-up", "p99 speed-up",
        "ideal speed-up", "share of ideal", "links shared", "interleaved (mltcp)", "interleaved (base)",
        "mltcp from iter", "base from iter",
    ]  # fmt: skip
    rows = []
    for cc in ccs:
        for n in counts:
            jobs = scale_jobs(topo, n, scale)
            groups = metrics.shared_groups(topo, jobs)
            for seed in ctx.seeds:
                solo = _fabric_solo(ctx, exp, topo, jobs, min(iterations, 5), cc, seed, tcp)
                ideal = metrics.fabric_ideal(topo, jobs, solo)
                ideal_avg = statistics.fmean(ideal.values())
                base = _run(ctx, exp, SimConfig(f"{cc}-{n}jobs/base", topo, jobs, iterations, cc=cc, tcp=tcp,
                                                seed=seed, **FABRIC))  # fmt: skip
                ml = _run(ctx, exp, SimConfig(f"{cc}-{n}jobs/mltcp", topo, jobs, iterations, cc=cc, mltcp=True,
                                              tcp=tcp, seed=seed, **FABRIC))  # fmt: skip
                b, m = summarise(base.records)[1], summarise(ml.records)[1]
                ib = metrics.fabric_interleaving(base.records, groups)
                im = metrics.fabric_interleaving(ml.records, groups)
                rows.append(
                    [
                        cc, n, seed, scale, 1e3 * b.avg, 1e3 * m.avg, b.avg / m.avg, b.p99 / m.p99, b.avg / ideal_avg,
                        share_of_ideal_gain(b.avg, m.avg, ideal_avg), im.groups, im.interleaved, ib.interleaved,
                        "-" if math.isnan(im.median) else f"{im.median:g}",
                        "-" if math.isnan(ib.median) else f"{ib.median:g}",
                    ]
                )  # fmt: skip
                if n == counts[-1] and seed == ctx.seeds[0] and cc == ccs[0]:
                    for name, res in (("base", base), ("mltcp", ml)):
                        few = [r for r in res.records if r.job <= 6]
                        plot_timeline(ctx.dir(exp) / f"scale-{cc}-{n}jobs-{name}.png", few,
                                      f"ns-3 leaf-spine, {n} jobs, {cc} {name}: jobs 1-6 (seed {seed})")  # fmt: skip
    _write_table(ctx.dir(exp) / "scale.csv", headers, rows)
    _plot_scale(ctx.dir(exp) / "scale.png", rows)
    a = {m: metrics.comm_fraction(topo, model_job(1, m, ("l1h1", "l2h1"), "l3h1", scale=scale)) for m in MODELS}
    body = [
        f"{topo.description}; jumbo frames (MTU {tcp.mtu}); {iterations} iterations; models cycled "
        f"{', '.join(SCALE_MODELS)} group by group, bytes and compute times x {scale:g} (printed factor; a alone: "
        + ", ".join(f"{k} {v:.2f}" for k, v in a.items())
        + f"); 2 workers + 1 PS per job, groups of {SCALE_GROUP} jobs of one model share their PS host; "
        + "compute jitter 1 %; "
        + f"seeds {', '.join(map(str, ctx.seeds))}. "
        "Ideal: solo time scaled by the busiest link's load (docs/sim.md). Interleaving: groups of jobs "
        "sharing a host link, counted when they stayed interleaved to the end; 'from iter' is their median.",
        "",
        _md_table(headers, rows),
        "",
        "![scale](scale.png)",
    ]
    return _summary(ctx, exp, "MLTCP at scale on a leaf-spine", body)


# The experiments on MLTCP and MAIF switch selective dropping off: their jobs' chunks are not classed
# (importance 0), and the default levels (16/32/48 packets, sized for BMv2's 64-packet queues) would
# drop them early, costing TCP a retransmission timeout each. `incast` studies selective drop.
NO_SELECTIVE_DROP = DropPolicy(min_importance=(0, 0, 0, 0))
# DCQCN's 100 Gb/s marking profile (HPCC simulator: Kmin 400 KB, Kmax 1600 KB, Pmax 0.2) in 9000-byte packets.
SCALE_ECN = EcnProfile(kmin=44, kmax=178, pmax=0.2)
# Switch settings of the 100 Gb/s fabric experiments: 1,000-packet class queues (9 MB).
FABRIC = {"queue_limit": 1000, "ecn": SCALE_ECN, "drop": NO_SELECTIVE_DROP}


def _plot_scale(path: Path, rows: list[list]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for cc in sorted({r[0] for r in rows}):
        counts = sorted({r[1] for r in rows if r[0] == cc})
        for ax, col, label in ((axes[0], 6, "avg"), (axes[0], 7, "p99"), (axes[1], 9, "share")):
            ys = [statistics.fmean(r[col] for r in rows if r[0] == cc and r[1] == n) for n in counts]
            ax.plot(counts, [100 * y for y in ys] if col == 9 else ys, marker="o", label=f"MLTCP-{cc} {label}")
        ideal = [statistics.fmean(r[8] for r in rows if r[0] == cc and r[1] == n) for n in counts]
        axes[0].plot(counts, ideal, ls="--", label=f"ideal ({cc})")
    axes[0].set_ylabel("speed-up over unmodified")
    axes[1].set_ylabel("share of ideal gain (%)")
    for ax in axes:
        ax.set_xlabel("jobs")
        ax.set_xscale("log", base=2)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---- 3. circular dependencies -------------------------------------------------------------------


def circular(ctx: Context) -> str:
    """Three two-worker ring all-reduce jobs on hosts h1, h2, h3 (one per leaf): A on (h1, h2), B on
    (h2, h3), C on (h3, h1). Every host link carries two jobs (A and B share h2's, B and C h3's, C and
    A h1's) and every pair of jobs must take turns, so the three must take turns around the cycle:
    with a <= 1/3 they can all interleave (offsets of a third of a period), above 1/3 they cannot,
    although no link carries more than two jobs (2a <= 1 on every link)."""
    exp = "circular"
    iterations = ctx.iterations or 30
    topo = leaf_spine(leaves=3, spines=2, hosts_per_leaf=1, oversubscription=0.5)  # fat uplinks: hosts bottleneck
    tcp = TcpSettings(mtu=9000, mss=8948)
    hosts = ("l1h1", "l2h1", "l3h1")
    size = 4_000_000
    comm = 8 * size / (100 * GBPS)  # two ring steps of size/2 per direction of a host link, alone
    headers = ["a", "seed", "base avg ms", "mltcp avg ms", "avg speed-up", "p99 speed-up", "ideal speed-up",
               "share of ideal", "mltcp interleaved from", "base interleaved from"]  # fmt: skip
    rows = []
    for a in (0.25, 0.45):
        compute = comm * (1 - a) / a
        jobs = tuple(
            SimJob(i + 1, f"ring{i + 1}", size, size, compute, (hosts[i], hosts[(i + 1) % 3]), None, RING, jitter=0.01)
            for i in range(3)
        )
        groups = metrics.shared_groups(topo, jobs)
        for seed in ctx.seeds:
            solo = _fabric_solo(ctx, exp, topo, jobs, 5, "reno", seed, tcp)
            # Pairwise turns around a cycle of three: each job gets at most a third of the period.
            ideal = {j: t * max(1.0, 3 * a) for j, t in solo.items()}
            ideal_avg = statistics.fmean(ideal.values())
            cfg = SimConfig(f"a{a:g}/base", topo, jobs, iterations, tcp=tcp, seed=seed, **FABRIC)
            base = _run(ctx, exp, cfg)
            ml = _run(ctx, exp, replace(cfg, name=f"a{a:g}/mltcp", mltcp=True))
            b, m = summarise(base.records)[1], summarise(ml.records)[1]
            ib = metrics.fabric_interleaving(base.records, groups)
            im = metrics.fabric_interleaving(ml.records, groups)
            share = share_of_ideal_gain(b.avg, m.avg, ideal_avg)
            its = (f"{im.interleaved}/{im.groups} pairs, " + _its([im.iteration]),
                   f"{ib.interleaved}/{ib.groups} pairs, " + _its([ib.iteration]))  # fmt: skip
            rows.append([a, seed, 1e3 * b.avg, 1e3 * m.avg, b.avg / m.avg, b.p99 / m.p99, b.avg / ideal_avg, share,
                         *its])  # fmt: skip
            if seed == ctx.seeds[0]:
                for name, res in (("base", base), ("mltcp", ml)):
                    plot_timeline(ctx.dir(exp) / f"circular-a{a:g}-{name}.png", res.records,
                                  f"ns-3 cycle of 3 ring jobs, a={a:g}, {name} (seed {seed})")  # fmt: skip
    _write_table(ctx.dir(exp) / "circular.csv", headers, rows)
    body = [
        f"{topo.description}; three 2-worker ring all-reduce jobs of {size / 1e6:g} MB on a cycle of host "
        f"links (module doc); MTU 9000; compute set for the a shown; {iterations} iterations; seeds "
        f"{', '.join(map(str, ctx.seeds))}. Ideal: solo time x max(1, 3a) (three turns per period). "
        "Interleaved: the lab's interleaving iteration for each pair sharing a host link (pairs that stayed "
        "interleaved / pairs, and the iteration from which all did).",
        "",
        _md_table(headers, rows),
        "",
        *(f"![a={a:g} {n}](circular-a{a:g}-{n}.png)" for a in (0.25, 0.45) for n in ("base", "mltcp")),
    ]
    return _summary(ctx, exp, "Circular dependencies on a leaf-spine", body)


# ---- 4. MAIF time-to-accuracy -------------------------------------------------------------------

# The search's fabric: 16 hosts, 4:1 oversubscribed uplinks (every push and pull crosses them).
MAIF_FABRIC = {"leaves": 4, "spines": 2, "hosts_per_leaf": 4, "oversubscription": 4.0}
# Learning curves of the configurations: acc(i) = acc_max (1 - exp(-(i+1)/tau)) (the lab's curve model,
# mlfc.lab.emulator.synthetic_accuracy), acc_max and tau drawn uniformly per configuration and seed.
MAIF_ACC_MAX = (0.55, 0.92)
MAIF_TAU = (4.0, 30.0)
TTA_TARGETS = (0.90, 0.95)  # fractions of A*, the best final accuracy of the search
MAIF_TARGET = 0.38  # the claim: 38 % less time to 90 % and 95 % of the converged accuracy than FIFO
MAIF_TREATMENTS = (("fifo", "none", False), ("maif", "maif", False), ("mltcp+maif", "maif", True))


def maif_params(scale: float) -> MaifParams:
    """The coordinator's MAIF parameters for jobs whose times are x ``scale``: the prediction horizon (and the
    network-time floor) shrink with the iteration times, so the horizon spans as many iterations as at full size
    (5 s: ~20 iterations of a full-size ResNet-50 step here)."""
    d = MaifParams()
    return replace(d, horizon_s=d.horizon_s * scale, min_network_s=d.min_network_s * scale)


def search_jobs(topo: SimTopology, configs: int, seed: int, scale: float) -> tuple[SimJob, ...]:
    """``configs`` configurations of ResNet-50 (2 workers + PS), placed round-robin so that every host carries
    two workers and one PS of different configurations and every transfer crosses the uplinks."""
    import random

    leaves, hpl = MAIF_FABRIC["leaves"], MAIF_FABRIC["hosts_per_leaf"]
    rng = random.Random(seed)
    jobs = []
    for k in range(configs):
        leaf, h = k % leaves, k // leaves % hpl
        workers = (f"l{leaf + 1}h{h + 1}", f"l{(leaf + 1) % leaves + 1}h{h + 1}")
        ps = f"l{(leaf + 2) % leaves + 1}h{(h + 1) % hpl + 1}"
        acc = rng.uniform(*MAIF_ACC_MAX)
        tau = rng.uniform(*MAIF_TAU)
        jobs.append(model_job(k + 1, "resnet50", workers, ps, PS, scale=scale, jitter=0.01, acc_max=acc, tau=tau))
    return tuple(jobs)


@dataclass(frozen=True)
class SearchTimes:
    """Time to accuracy of one run of the search (simulated seconds from the start of the simulation)."""

    search: tuple[float, ...]  # per TTA_TARGETS: the best configuration so far reaches the fraction of A*
    jobs: tuple[float, ...]  # per TTA_TARGETS: mean over configurations of reaching that fraction of its own final
    lead: int  # the configuration that needs the fewest iterations to reach TTA_TARGETS[0] of A*
    lead_iterations: int  # ... its iteration count to get there


def _completions(records: Sequence[IterationRecord]) -> dict[tuple[int, int], float]:
    done: dict[tuple[int, int], float] = {}
    for r in records:  # a job's iteration is done when its slowest worker finished it
        done[(r.job, r.iteration)] = max(done.get((r.job, r.iteration), 0.0), r.end)
    return done


def search_times(records: Sequence[IterationRecord], jobs: Sequence[SimJob], iterations: int) -> SearchTimes:
    by = {j.job_id: j for j in jobs}
    acc = {j.job_id: [synthetic_accuracy(i, j.acc_max, j.tau) for i in range(iterations)] for j in jobs}
    a_star = max(a[-1] for a in acc.values())
    done = _completions(records)
    missing = [(j, i) for j in by for i in range(iterations) if (j, i) not in done]
    if missing:
        j, i = missing[0]
        raise ValueError(f"records miss {len(missing)} iteration(s), e.g. job {j} iteration {i}")
    events = sorted((t, job, acc[job][it]) for (job, it), t in done.items())
    search = []
    for q in TTA_TARGETS:
        search.append(next(t for t, _job, a in events if a >= q * a_star))
    own = []
    for q in TTA_TARGETS:
        own.append(statistics.fmean(done[(j, next(i for i, a in enumerate(acc[j]) if a >= q * acc[j][-1]))]
                                    for j in by))  # fmt: skip
    first = {j: next((i for i, a in enumerate(acc[j]) if a >= TTA_TARGETS[0] * a_star), iterations) for j in by}
    lead = min(by, key=lambda j: (first[j], j))
    return SearchTimes(tuple(search), tuple(own), lead, first[lead] + 1)


def class_over_time(decisions: Sequence[tuple[float, dict[int, int]]], job: int, until: float,
                    top: int) -> tuple[float, float]:  # fmt: skip
    """Time-weighted mean class of ``job`` and the share of the time in class ``top``, from the first decision
    to ``until`` (NaN, NaN without a decision before ``until``). A job missing from a decision (finished or
    not yet ranked) holds no class then and counts as class 0."""
    spans = []
    for k, (t, classes) in enumerate(decisions):
        if t >= until:
            break
        end = min(until, decisions[k + 1][0]) if k + 1 < len(decisions) else until
        spans.append((end - t, classes.get(job, 0)))
    total = sum(d for d, _ in spans)
    if not total > 0:
        return math.nan, math.nan
    return sum(d * c for d, c in spans) / total, sum(d for d, c in spans if c == top) / total


def line_rate_time(topo: SimTopology, jobs: Sequence[SimJob], iterations: int, q: float) -> float:
    """The bound on the search's time to ``q`` A*: every configuration's iterations at their no-contention
    minimum (compute plus its pushes into and pulls out of the PS host's link at line rate; ECMP luck aside,
    no run alone can beat it), for the configuration that gets there first that way."""
    a_star = max(synthetic_accuracy(iterations - 1, j.acc_max, j.tau) for j in jobs)
    best = math.inf
    for j in jobs:
        it = next((i for i in range(iterations) if synthetic_accuracy(i, j.acc_max, j.tau) >= q * a_star), None)
        if it is not None:
            wire_s = 8 * len(j.workers) * (j.push_bytes + j.pull_bytes) / topo.rates[topo.host_link(j.ps)]
            best = min(best, (it + 1) * (j.compute_s + wire_s))
    return best


def maif_search(ctx: Context, configs: int = 16) -> str:
    """A hyper-parameter search: ``configs`` configurations of one model (learning curves of the lab's
    model, acc_max and tau drawn per configuration) share an oversubscribed fabric. The switch is FIFO
    (baseline) or holds the coordinator's MAIF classes (engine run on the simulated clock)."""
    exp = "maif"
    iterations = ctx.iterations or 40
    scale = ctx.scale or 0.01  # the measured runs (docs/results.md); 0.02 doubles the packets
    params = maif_params(scale)
    topo = leaf_spine(**MAIF_FABRIC)  # type: ignore[arg-type]
    tcp = TcpSettings(mtu=9000, mss=8948)
    pct = [f"{round(100 * q)} %" for q in TTA_TARGETS]
    headers = ["treatment", "seed", "avg iter ms", *(f"search {p} A* ms" for p in pct), *(f"jobs {p} ms" for p in pct),
               "decisions", "lead config (acc_max, tau)", f"lead to {pct[0]} A* iterations",
               f"lead avg iter ms to {pct[0]} A*", "lead class (time-weighted)", "lead share in top class"]  # fmt: skip
    rows: list[list] = []
    bounds: list[list] = []
    curves: dict[str, list[tuple[float, float]]] = {}
    for seed in ctx.seeds:
        jobs = search_jobs(topo, configs, seed, scale)
        ctx.log(f"   seed {seed}: configurations (job: acc_max, tau) " + ", ".join(
            f"{j.job_id}: {j.acc_max:.3f}, {j.tau:.1f}" for j in jobs))  # fmt: skip
        for treatment, priorities, mltcp in MAIF_TREATMENTS:
            cfg = SimConfig(treatment, topo, jobs, iterations, priorities=priorities, mltcp=mltcp, tcp=tcp,
                            seed=seed, maif=params, **FABRIC)  # fmt: skip
            r = _run(ctx, exp, cfg)
            st = search_times(r.records, jobs, iterations)
            lj = next(j for j in jobs if j.job_id == st.lead)
            done = _completions(r.records)
            until = done[(st.lead, st.lead_iterations - 1)]
            lead_iter = (until - min(x.start for x in r.records if x.job == st.lead)) / st.lead_iterations
            cls, top = class_over_time(r.decisions, st.lead, until, params.top_class)
            if priorities != "maif":
                cls, top = math.nan, math.nan
            lead = f"{st.lead} ({lj.acc_max:.3f}, {lj.tau:.1f})"
            ms = [1e3 * v for v in (summarise(r.records)[1].avg, *st.search, *st.jobs)]  # tables in ms
            rows.append([treatment, seed, *ms, len(r.decisions), lead, st.lead_iterations, 1e3 * lead_iter, cls,
                         top])  # fmt: skip
            if seed == ctx.seeds[0]:
                curves[treatment] = _best_so_far(r.records, jobs)
        start = min(x.start for x in r.records)
        bounds.append([seed, *(1e3 * (start + line_rate_time(topo, jobs, iterations, q)) for q in TTA_TARGETS)])
    _write_table(ctx.dir(exp) / "maif.csv", headers, rows)
    n_t = len(TTA_TARGETS)
    fifo = {r[1]: r for r in rows if r[0] == "fifo"}
    mean_rows = []
    for treatment, _, _ in MAIF_TREATMENTS:
        rs = [r for r in rows if r[0] == treatment]
        times = [statistics.fmean(r[k] for r in rs) for k in range(2, 3 + 2 * n_t)]
        reds = []
        for k in range(3, 3 + 2 * n_t):
            per_seed = [1 - r[k] / fifo[r[1]][k] for r in rs]
            reds.append(_pct_range(per_seed))
        mean_rows.append([treatment, len(rs), *times, *reds])
    bound_red = [_pct_range([1 - b[1 + i] / fifo[b[0]][3 + i] for b in bounds]) for i in range(n_t)]
    mean_rows.append(["first configuration at line rate (bound)", len(bounds), math.nan,
                      *(statistics.fmean(b[1 + i] for b in bounds) for i in range(n_t)), *([math.nan] * n_t),
                      *bound_red, *(["—"] * n_t)])  # fmt: skip
    mh = ["treatment", "seeds", "avg iter ms", *(f"search {p} A* ms" for p in pct), *(f"jobs {p} ms" for p in pct),
          *(f"search {p} A* faster" for p in pct), *(f"jobs {p} faster" for p in pct)]  # fmt: skip
    _write_table(ctx.dir(exp) / "maif_mean.csv", mh, mean_rows)
    plot_maif(ctx.dir(exp) / "maif.png", rows, bounds, curves, ctx.seeds[0])
    verdict = []
    for treatment in ("maif", "mltcp+maif"):
        rs = [r for r in rows if r[0] == treatment]
        for i, p in enumerate(pct):
            red = statistics.fmean(1 - r[3 + i] / fifo[r[1]][3 + i] for r in rs)
            saved = f"{100 * red:.0f} % less" if red >= 0 else f"{-100 * red:.0f} % more"
            verdict.append(f"- {treatment}, {p} A*: {saved} time than FIFO (target: {100 * MAIF_TARGET:.0f} % less): "
                           f"{'met' if red >= MAIF_TARGET else 'missed'}")  # fmt: skip
    body = [
        f"{topo.description}; {configs} configurations of ResNet-50 (bytes and compute x {scale:g}), 2 workers + "
        f"1 PS each, every host two workers and one PS; learning curves acc(i) = acc_max (1 - exp(-(i+1)/tau)), "
        f"acc_max ~ U{MAIF_ACC_MAX}, tau ~ U{MAIF_TAU} per configuration and seed; {iterations} iterations; "
        f"seeds {', '.join(map(str, ctx.seeds))}; MAIF horizon {params.horizon_s:g} s (5 s x {scale:g}), classes "
        f"{params.top_class}..{params.bottom_class}. A*: the best accuracy after the last iteration. "
        f"'search X % A*': simulated time until the best configuration so far reached X % of A*; 'jobs X %': mean "
        "over configurations of the time each reached X % of its own final accuracy; 'faster': time saved against "
        "FIFO, mean over seeds (range); 'lead config': the configuration that needs the fewest iterations to reach "
        f"{pct[0]} of A*, its class under MAIF from the first decision until it got there; the bound: every "
        "configuration's iterations at compute + PS-link line rate (nothing to share), the first to get there.",
        "",
        _md_table(mh, mean_rows),
        "",
        *verdict,
        "",
        "![maif](maif.png)",
        "",
        "Per seed:",
        "",
        _md_table(headers, rows),
    ]
    return _summary(ctx, exp, "MAIF time-to-accuracy in a hyper-parameter search", body)


def _pct_range(values: Sequence[float]) -> str:
    m = statistics.fmean(values)
    if len(values) == 1:
        return f"{100 * m:+.0f} %"
    return f"{100 * m:+.0f} % ({100 * min(values):+.0f}..{100 * max(values):+.0f})"


def _best_so_far(records: Sequence[IterationRecord], jobs: Sequence[SimJob]) -> list[tuple[float, float]]:
    by = {j.job_id: j for j in jobs}
    best, out = 0.0, [(0.0, 0.0)]
    for (job, it), t in sorted(_completions(records).items(), key=lambda kv: kv[1]):
        a = synthetic_accuracy(it, by[job].acc_max, by[job].tau)
        if a > best:
            best = a
            out.append((t, a))
    return out


# ---- 5. selective drop under incast -------------------------------------------------------------


def incast(ctx: Context, senders: int = 16) -> str:
    """``senders`` workers of one job push to one PS at once (incast into the PS's host link), next to
    a second job whose gradients are all protected (importance >= 8). Selective drop by congestion
    level (the default DropPolicy) against no selective drop (every level forwards every class)."""
    exp = "incast"
    iterations = ctx.iterations or 20
    scale = ctx.scale or 0.02
    topo = leaf_spine(leaves=4, spines=2, hosts_per_leaf=8, oversubscription=1.0)
    tcp = TcpSettings(mtu=9000, mss=8948)
    workers = tuple(f"l{i % 3 + 1}h{i // 3 + 1}" for i in range(senders))
    bulk = model_job(1, "resnet50", workers, "l4h1", PS, scale=scale, jitter=0.01)
    bulk = replace(bulk, importance=metrics.importance_pattern(bulk.push_bytes, tcp.mss, seed=1))
    vip = model_job(2, "resnet50", ("l4h2",), "l4h1", PS, scale=scale, jitter=0.01)
    vip = replace(vip, importance=(8,))
    jobs = (bulk, vip)
    policies = {
        "no selective drop": DropPolicy(min_importance=(0, 0, 0, 0)),
        "selective drop (default)": DropPolicy(),
    }
    headers = ["policy", "queue limit", "seed", "incast job avg s", "incast job p99 s", "protected job avg s",
               "protected job p99 s", "selective drops", "tail drops", "ECN marks"]  # fmt: skip
    rows = []
    for limit in (64, 256):
        for name, pol in policies.items():
            for seed in ctx.seeds:
                cfg = SimConfig(f"limit{limit}-{'sd' if pol.min_importance[1] else 'nosd'}", topo, jobs, iterations,
                                drop=pol, tcp=tcp, queue_limit=limit, seed=seed, ecn=SCALE_ECN)  # fmt: skip
                r = _run(ctx, exp, cfg)
                per = {p.job: p for p in summarise(r.records)[0]}
                c = r.jobs
                rows.append([name, limit, seed, per[1].avg, per[1].p99, per[2].avg, per[2].p99,
                             sum(v["selective_drops"] for v in c.values()), sum(v["tail_drops"] for v in c.values()),
                             sum(v["ecn_marks"] for v in c.values())])  # fmt: skip
    _write_table(ctx.dir(exp) / "incast.csv", headers, rows)
    plot_incast(ctx.dir(exp) / "incast.png", rows)
    body = [
        f"{topo.description}; job 1: {senders} workers on three leaves push ResNet-50 gradients (x {scale:g}) "
        "to one PS at once, chunks classed by the transport's magnitude rule (mlfc.hosts.importance); job 2: one "
        "worker on the PS's leaf, every chunk protected; MTU 9000; TCP retransmits every dropped segment "
        "(the simulator has no bounded-loss receiver); "
        f"{iterations} iterations; seeds {', '.join(map(str, ctx.seeds))}.",
        "",
        _md_table(headers, rows),
        "",
        "![incast](incast.png)",
    ]
    return _summary(ctx, exp, "Selective drop under incast", body)


def _bars(path: Path, groups: dict[str, dict[str, list[float]]], ylabel: str, title: str) -> None:
    """Grouped bars: groups[x label][series] = values over seeds (mean drawn, min..max as error bar)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = list(groups)
    series = list(dict.fromkeys(k for g in groups.values() for k in g))
    width = 0.8 / max(1, len(series))
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(xs)), 3.8))
    for i, name in enumerate(series):
        vals = [groups[x].get(name, [math.nan]) for x in xs]
        mean = [statistics.fmean(v) for v in vals]
        err = [
            [m - min(v) for m, v in zip(mean, vals, strict=True)],
            [max(v) - m for m, v in zip(mean, vals, strict=True)],
        ]
        ax.bar([k + i * width for k in range(len(xs))], mean, width, yerr=err, capsize=3, label=name)
    ax.set_xticks([k + width * (len(series) - 1) / 2 for k in range(len(xs))], xs, fontsize="small")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_incast(path: Path, rows: Sequence[Sequence]) -> None:
    groups: dict[str, dict[str, list[float]]] = {}
    for r in rows:
        policy, limit = str(r[0]), int(r[1])
        for col, what in ((3, "incast job avg"), (4, "incast job p99"), (5, "protected job avg"),
                          (6, "protected job p99")):  # fmt: skip
            groups.setdefault(f"{what}\n{limit}-packet queues", {}).setdefault(policy, []).append(1e3 * float(r[col]))
    _bars(path, groups, "iteration time (ms)", "ns-3 incast: selective drop against none")


def plot_maif(path: Path, rows: Sequence[Sequence], bounds: Sequence[Sequence],
              curves: dict[str, list[tuple[float, float]]], seed: int) -> None:  # fmt: skip
    """Left: time to accuracy per treatment (mean over seeds, range as error bars) beside the bound; right:
    the best accuracy so far over simulated time in the first seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pct = [f"{round(100 * q)} %" for q in TTA_TARGETS]
    groups = {f"search {p} A*": {} for p in pct} | {f"jobs {p}": {} for p in pct}
    for r in rows:
        for i, p in enumerate(pct):
            groups[f"search {p} A*"].setdefault(str(r[0]), []).append(float(r[3 + i]))  # rows are in ms
            groups[f"jobs {p}"].setdefault(str(r[0]), []).append(float(r[3 + len(pct) + i]))
    for b in bounds:
        for i, p in enumerate(pct):
            groups[f"search {p} A*"].setdefault("line rate (bound)", []).append(float(b[1 + i]))
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4), gridspec_kw={"width_ratios": [3, 2]})
    xs = list(groups)
    series = list(dict.fromkeys(k for g in groups.values() for k in g))
    width = 0.8 / max(1, len(series))
    for i, name in enumerate(series):
        pos = [k + i * width for k, x in enumerate(xs) if name in groups[x]]
        vals = [groups[x][name] for x in xs if name in groups[x]]
        mean = [statistics.fmean(v) for v in vals]
        err = [[m - min(v) for m, v in zip(mean, vals, strict=True)],
               [max(v) - m for m, v in zip(mean, vals, strict=True)]]  # fmt: skip
        ax.bar(pos, mean, width, yerr=err, capsize=3, label=name)
    ax.set_xticks([k + width * (len(series) - 1) / 2 for k in range(len(xs))], xs, fontsize="small")
    ax.set_ylabel("time to accuracy (ms, simulated)")
    ax.set_title("ns-3 hyper-parameter search: FIFO vs MAIF")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize="small")
    for name, pts in curves.items():
        bx.step([1e3 * t for t, _ in pts], [a for _, a in pts], where="post", label=name)
    bx.set_xlabel("simulated time (ms)")
    bx.set_ylabel("best accuracy so far")
    bx.set_title(f"seed {seed}")
    bx.grid(alpha=0.3)
    bx.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---- 6. speed benchmark -------------------------------------------------------------------------


def benchmark(ctx: Context, jobs_n: int = 16, iterations: int = 50) -> str:
    exp = "bench"
    scale = ctx.scale or 0.02
    topo = scale_fabric()
    tcp = TcpSettings(mtu=9000, mss=8948)
    jobs = scale_jobs(topo, jobs_n, scale)
    t0 = time.monotonic()
    r = _run(ctx, exp, SimConfig(f"bench-{jobs_n}x{iterations}", topo, jobs, iterations, mltcp=True, tcp=tcp,
                                 seed=ctx.seeds[0], **FABRIC))  # fmt: skip
    total = time.monotonic() - t0
    s = r.stats
    gbytes = sum(j.push_bytes * len(j.workers) + j.pull_bytes * len(j.workers) for j in jobs) * iterations / 1e9
    headers = ["jobs", "iterations", "scale", "data GB", "simulated s", "wall s (run)", "wall s (with set-up)",
               "sim s / wall s", "events", "events/s", "switch packets", "target"]  # fmt: skip
    row = [jobs_n, iterations, scale, gbytes, s.sim_s, s.wall_s, total, s.sim_per_wall, s.events, s.events_per_s,
           s.packets, "met" if total < 900 else "missed"]  # fmt: skip
    _write_table(ctx.dir(exp) / "bench.csv", headers, [row])
    body = [
        f"{topo.description}; {jobs_n} PS jobs (2 workers + PS, models {', '.join(SCALE_MODELS)} cycled) x "
        f"{iterations} iterations at 100 Gb/s, MTU 9000, MLTCP-Reno; model bytes and compute x {scale:g}. "
        "Target: under 15 minutes (900 s) on 2 cores.",
        "",
        _md_table(headers, [row]),
    ]
    return _summary(ctx, exp, "Simulator speed", body)


EXPERIMENTS: dict[str, Callable[[Context], str]] = {
    "validation": validation,
    "scale": at_scale,
    "circular": circular,
    "maif": maif_search,
    "incast": incast,
    "bench": benchmark,
}


def small(ctx: Context) -> str:
    """`make sim`: a short run on a fresh machine — two compatible jobs, Reno vs MLTCP-Reno, one seed."""
    return validation(replace(ctx, seeds=ctx.seeds[:1], iterations=ctx.iterations or 10), mixes=("two-compatible",))


__all__ = ["EXPERIMENTS", "Context", "small"]
