"""What every experiment shares: the run context, a run saved under (and reused from) ``out/``, the
100 Gb/s fabric's switch settings and solo runs, typed table rows and their CSV and Markdown rendering,
the summary file and the bar plot."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mlfc.policy.drop import DropPolicy
from mlfc.policy.ecn import EcnProfile
from mlfc.sim import metrics
from mlfc.sim.jobs import SimJob
from mlfc.sim.lab import IterationRecord, read_csv, share_of_ideal_gain, summarise, write_csv
from mlfc.sim.network import TcpSettings
from mlfc.sim.simulation import RunStats, SimConfig, SimResult, run
from mlfc.sim.topology import SimTopology


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
    scales: tuple[float, ...] | None = None  # scales: the factors swept (None: the experiment's)
    publish: bool = False  # experiments that publish: also write docs/data/<experiment>/
    hosts: str = "jumbo"  # scale, scales, bench: how the hosts' TCP sends (HOST_MODELS)
    regimes: tuple[str, ...] | None = None  # mltcp-regime: queue regimes (None: shallow, deep)
    rtt_us: float | None = None  # mltcp-regime: the fabric's base round trip (None: mlfc.sim.regime's)
    log: Callable[[str], None] = field(default=lambda s: print(s, file=sys.stderr, flush=True))

    def dir(self, name: str) -> Path:
        d = self.out / name
        d.mkdir(parents=True, exist_ok=True)
        return d


# ---- runs ---------------------------------------------------------------------------------------

# Experiments whose tables need a run's switch counters or wall time: never resumed from records.
_NOT_RESUMABLE = ("incast", "bench")


def run_saved(ctx: Context, exp: str, cfg: SimConfig) -> SimResult:
    """One run, its records (and MAIF decisions) saved under ``out/<exp>/runs/``; with ``ctx.resume``, the
    saved records instead of a run."""
    path = ctx.dir(exp) / "runs" / f"{cfg.name.replace('/', '_')}_s{cfg.seed}.csv"
    if ctx.resume and exp not in _NOT_RESUMABLE and path.is_file():
        ctx.log(f"-- {exp}: {cfg.name} (seed {cfg.seed}): records reused from {path}")
        records = read_csv(path)
        dpath = _decisions_path(path)
        decisions = _read_decisions(dpath) if dpath.is_file() else []
        spath = _stats_path(path)
        stats = RunStats(**json.loads(spath.read_text())) if spath.is_file() else RunStats(0.0, 0.0, 0, 0.0, 0)
        return SimResult(cfg, records, {}, {}, decisions, [], 0, stats)
    ctx.log(f"-- {exp}: {cfg.name} (seed {cfg.seed})")
    r = run(cfg)
    write_csv(path, r.records)
    _stats_path(path).write_text(json.dumps(dataclasses.asdict(r.stats)) + "\n")
    if cfg.priorities == "maif":
        _write_decisions(_decisions_path(path), r.decisions)
    s = r.stats
    ctx.log(
        f"   {s.sim_s:.3f} simulated s in {s.wall_s:.1f} wall s ({s.sim_per_wall:.4f} sim s/wall s, "
        f"{s.events_per_s:,.0f} events/s)"
    )
    return r


def _stats_path(records_path: Path) -> Path:
    """Where a run's cost (wall time, events) is kept beside its records, so a resumed run still has it."""
    return records_path.with_name(records_path.stem + "_stats.json")


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


def solo_stats(records: Sequence[IterationRecord]) -> tuple[float, float, float]:
    """A solo run's average iteration, communication and push seconds."""
    per, _ = summarise(records)
    p = per[0]
    return p.avg, p.comm_avg, p.push_avg


def against_baseline(base: SimResult, mltcp: SimResult, ideal_avg: float) -> dict[str, float]:
    """MLTCP's run against the unmodified one and the ideal average iteration: the figures every comparison
    table carries (base/mltcp avg ms, avg and p99 speed-up, ideal speed-up, share of the ideal gain)."""
    b, m = summarise(base.records)[1], summarise(mltcp.records)[1]
    return {
        "base_avg_ms": 1e3 * b.avg,
        "mltcp_avg_ms": 1e3 * m.avg,
        "avg_speedup": b.avg / m.avg,
        "p99_speedup": b.p99 / m.p99,
        "ideal_speedup": b.avg / ideal_avg,
        "share": share_of_ideal_gain(b.avg, m.avg, ideal_avg),
    }


# ---- the 100 Gb/s fabric ------------------------------------------------------------------------

# The experiments on MLTCP and MAIF switch selective dropping off: their jobs' chunks are not classed
# (importance 0), and the default levels (16/32/48 packets, sized for BMv2's 64-packet queues) would
# drop them early, costing TCP a retransmission timeout each. `incast` studies selective drop.
NO_SELECTIVE_DROP = DropPolicy(min_importance=(0, 0, 0, 0))
# DCQCN's 100 Gb/s marking profile (HPCC simulator: Kmin 400 KB, Kmax 1600 KB, Pmax 0.2) and 9 MB class
# queues, in bytes; the switches count packets, so fabric() converts them for the frames in use.
ECN_KMIN_BYTES, ECN_KMAX_BYTES, ECN_PMAX = 400_000, 1_600_000, 0.2
QUEUE_BYTES = 9_000_000
JUMBO = TcpSettings(mtu=9000, mss=8948)  # the fabric experiments' frames
# Faster models of the hosts, for runs at full model bytes (issue 28 item 4; --hosts), each checked against
# jumbo at the scales both ran (docs/results.md, "Faster host models") before any figure relies on it:
# "tso": the hosts hand the fabric 64 KB segments, TCP segmentation offload's unit, as if the NIC never
#   cut them: ~6.5x fewer events per byte, at coarser window, queue and marking steps; the initial window
#   keeps its bytes (10 jumbo segments: ~1.4 of these);
# "stretch-acks": jumbo frames, one ACK per 8 segments (as GRO's 64 KB aggregates make Linux ACK).
TSO = TcpSettings(mtu=65000, mss=64948, initial_cwnd=2)
STRETCH_ACKS = TcpSettings(mtu=9000, mss=8948, delayed_ack=8)
HOST_MODELS = {"jumbo": JUMBO, "tso": TSO, "stretch-acks": STRETCH_ACKS}


def fabric(tcp: TcpSettings) -> dict:
    """Switch settings of the 100 Gb/s fabric experiments for ``tcp``'s frames: the byte sizes above in
    its packets (jumbo frames: 1,000-packet class queues, marking from 44 to 178 packets)."""
    size = tcp.mtu
    ecn = EcnProfile(kmin=round(ECN_KMIN_BYTES / size), kmax=round(ECN_KMAX_BYTES / size), pmax=ECN_PMAX)
    return {"queue_limit": round(QUEUE_BYTES / size), "ecn": ecn, "drop": NO_SELECTIVE_DROP}


SCALE_ECN = fabric(JUMBO)["ecn"]
FABRIC = fabric(JUMBO)  # the experiments that always run jumbo frames (circular, incast, maif)


def fabric_solo(ctx: Context, exp: str, topo: SimTopology, jobs: Sequence[SimJob], its: int, cc: str, seed: int,
                tcp: TcpSettings) -> dict[int, float]:  # fmt: skip
    """Solo iteration time of every job (identical jobs by position are run once)."""
    cache: dict[tuple, float] = {}
    out = {}
    for j in jobs:
        key = (j.push_bytes, j.pull_bytes, j.compute_s, j.pattern, tuple(len(topo.paths(s, d)[0]) for s, d, _ in
               metrics.flows(j)))  # fmt: skip
        if key not in cache:
            r = run_saved(ctx, exp, SimConfig(f"solo-{cc}-{j.name}", topo, (replace(j, jitter=0.0),), its, cc=cc,
                                              tcp=tcp, seed=seed, **fabric(tcp)))  # fmt: skip
            cache[key] = summarise(r.records)[1].avg
        out[j.job_id] = cache[key]
    return out


# ---- typed tables -------------------------------------------------------------------------------


def col(header: str, *, each: Sequence[str] = ()) -> Any:
    """A table column of a row dataclass: ``header``; with ``each``, a tuple field that is one column per
    label (``header.format(label)``), in the tuple's order."""
    return field(metadata={"header": header, "each": tuple(each)})


def headers(row_type: type) -> list[str]:
    out = []
    for f in dataclasses.fields(row_type):
        each = f.metadata["each"]
        out += [f.metadata["header"].format(x) for x in each] if each else [f.metadata["header"]]
    return out


def cells(row: object) -> list[object]:
    out: list[object] = []
    for f in dataclasses.fields(row):  # type: ignore[arg-type]
        v = getattr(row, f.name)
        if f.metadata["each"]:
            if len(v) != len(f.metadata["each"]):
                raise ValueError(f"{type(row).__name__}.{f.name}: {len(v)} values for {len(f.metadata['each'])}")
            out += v
        else:
            out.append(v)
    return out


def write_table(path: Path, row_type: type, rows: Sequence[object]) -> None:
    """The table as CSV: floats as Python prints them, NaN as an empty cell."""
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(headers(row_type))
        for row in rows:
            w.writerow(["" if isinstance(v, float) and math.isnan(v) else v for v in cells(row)])


def md_table(row_type: type, rows: Sequence[object]) -> str:
    """The table in Markdown: floats to 3 decimals, NaN as a dash."""

    def cell(v: object) -> str:
        if isinstance(v, float):
            return "—" if math.isnan(v) else f"{v:.3f}"
        return str(v)

    hs = headers(row_type)
    lines = ["| " + " | ".join(hs) + " |", "|" + "---|" * len(hs)]
    lines += ["| " + " | ".join(cell(v) for v in cells(row)) + " |" for row in rows]
    return "\n".join(lines)


def summary(ctx: Context, exp: str, title: str, body: list[str]) -> str:
    """``out/<exp>/summary.md``: the title, the command, the body; returned for printing."""
    text = "\n".join([f"# {title}", "", f"Command: `{ctx.command}`", "", *body, ""])
    (ctx.dir(exp) / "summary.md").write_text(text)
    return text


def fmt_range(lo: float, hi: float, pct: bool = False) -> str:
    f = (lambda v: f"{100 * v:.0f} %") if pct else (lambda v: f"{v:.3f}")
    return f(lo) if lo == hi else f"{f(lo)}..{f(hi)}"


def its(values: Sequence[int | None]) -> str:
    """Interleaving iterations per seed, '-' where the jobs never interleaved."""
    return "/".join("-" if v is None else str(v) for v in values)


def seeds_text(ctx: Context) -> str:
    return ", ".join(map(str, ctx.seeds))


# ---- plots --------------------------------------------------------------------------------------


def bars(path: Path, groups: dict[str, dict[str, list[float]]], ylabel: str, title: str) -> None:
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
