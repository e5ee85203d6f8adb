"""4. MAIF time-to-accuracy: a hyper-parameter search of ResNet-50 configurations on an oversubscribed
fabric, FIFO against the coordinator's MAIF classes (and MLTCP + MAIF), with the search's figures."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from mlfc.policy.maif import MaifParams
from mlfc.sim.experiments.common import (
    FABRIC,
    JUMBO,
    Context,
    col,
    md_table,
    run_saved,
    seeds_text,
    summary,
    write_table,
)
from mlfc.sim.jobs import PS, SimJob, model_job
from mlfc.sim.lab import IterationRecord, summarise, synthetic_accuracy
from mlfc.sim.simulation import SimConfig
from mlfc.sim.topology import SimTopology, leaf_spine

# The search's fabric: 16 hosts, 4:1 oversubscribed uplinks (every push and pull crosses them).
MAIF_FABRIC = {"leaves": 4, "spines": 2, "hosts_per_leaf": 4, "oversubscription": 4.0}
# Learning curves of the configurations: acc(i) = acc_max (1 - exp(-(i+1)/tau)) (the lab's curve model,
# mlfc.lab.emulator.synthetic_accuracy), acc_max and tau drawn uniformly per configuration and seed.
MAIF_ACC_MAX = (0.55, 0.92)
MAIF_TAU = (4.0, 30.0)
TTA_TARGETS = (0.90, 0.95)  # fractions of A*, the best final accuracy of the search
MAIF_TARGET = 0.38  # the claim: 38 % less time to 90 % and 95 % of the converged accuracy than FIFO
MAIF_TREATMENTS = (("fifo", "none", False), ("maif", "maif", False), ("mltcp+maif", "maif", True))
PCT = tuple(f"{round(100 * q)} %" for q in TTA_TARGETS)  # the targets as the tables name them


def maif_params(scale: float) -> MaifParams:
    """The coordinator's MAIF parameters for jobs whose times are x ``scale``: the prediction horizon (and the
    network-time floor) shrink with the iteration times, so the horizon spans as many iterations as at full size
    (5 s: ~20 iterations of a full-size ResNet-50 step here)."""
    d = MaifParams()
    return replace(d, horizon_s=d.horizon_s * scale, min_network_s=d.min_network_s * scale)


def search_jobs(topo: SimTopology, configs: int, seed: int, scale: float) -> tuple[SimJob, ...]:
    """``configs`` configurations of ResNet-50 (2 workers + PS), placed round-robin so that every host carries
    two workers and one PS of different configurations and every transfer crosses the uplinks."""
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


# ---- the search's figures -----------------------------------------------------------------------


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


def _best_so_far(records: Sequence[IterationRecord], jobs: Sequence[SimJob]) -> list[tuple[float, float]]:
    by = {j.job_id: j for j in jobs}
    best, out = 0.0, [(0.0, 0.0)]
    for (job, it), t in sorted(_completions(records).items(), key=lambda kv: kv[1]):
        a = synthetic_accuracy(it, by[job].acc_max, by[job].tau)
        if a > best:
            best = a
            out.append((t, a))
    return out


# ---- the experiment -----------------------------------------------------------------------------


@dataclass(frozen=True)
class MaifRow:
    """maif.csv: one treatment and seed (times in simulated ms from the start)."""

    treatment: str = col("treatment")
    seed: int = col("seed")
    avg_iter_ms: float = col("avg iter ms")
    search_ms: tuple[float, ...] = col("search {} A* ms", each=PCT)
    jobs_ms: tuple[float, ...] = col("jobs {} ms", each=PCT)
    decisions: int = col("decisions")
    lead: str = col("lead config (acc_max, tau)")
    lead_iterations: int = col(f"lead to {PCT[0]} A* iterations")
    lead_iter_ms: float = col(f"lead avg iter ms to {PCT[0]} A*")
    lead_class: float = col("lead class (time-weighted)")  # NaN without MAIF
    lead_top_share: float = col("lead share in top class")  # NaN without MAIF


@dataclass(frozen=True)
class MaifMeanRow:
    """maif_mean.csv: one treatment (or the bound) over the seeds; 'faster' against FIFO of the same seed."""

    treatment: str = col("treatment")
    seeds: int = col("seeds")
    avg_iter_ms: float = col("avg iter ms")
    search_ms: tuple[float, ...] = col("search {} A* ms", each=PCT)
    jobs_ms: tuple[float, ...] = col("jobs {} ms", each=PCT)
    search_faster: tuple[str, ...] = col("search {} A* faster", each=PCT)
    jobs_faster: tuple[str, ...] = col("jobs {} faster", each=PCT)


@dataclass(frozen=True)
class Bound:
    """The line-rate bound of one seed's search, ms per TTA_TARGETS."""

    seed: int
    search_ms: tuple[float, ...]


def _pct_range(values: Sequence[float]) -> str:
    m = statistics.fmean(values)
    if len(values) == 1:
        return f"{100 * m:+.0f} %"
    return f"{100 * m:+.0f} % ({100 * min(values):+.0f}..{100 * max(values):+.0f})"


def _mean_rows(rows: Sequence[MaifRow], bounds: Sequence[Bound]) -> list[MaifMeanRow]:
    n_t = len(TTA_TARGETS)
    fifo = {r.seed: r for r in rows if r.treatment == "fifo"}
    out = []
    for treatment, _, _ in MAIF_TREATMENTS:
        rs = [r for r in rows if r.treatment == treatment]
        out.append(
            MaifMeanRow(
                treatment=treatment,
                seeds=len(rs),
                avg_iter_ms=statistics.fmean(r.avg_iter_ms for r in rs),
                search_ms=tuple(statistics.fmean(r.search_ms[i] for r in rs) for i in range(n_t)),
                jobs_ms=tuple(statistics.fmean(r.jobs_ms[i] for r in rs) for i in range(n_t)),
                search_faster=tuple(
                    _pct_range([1 - r.search_ms[i] / fifo[r.seed].search_ms[i] for r in rs]) for i in range(n_t)
                ),
                jobs_faster=tuple(
                    _pct_range([1 - r.jobs_ms[i] / fifo[r.seed].jobs_ms[i] for r in rs]) for i in range(n_t)
                ),
            )
        )
    out.append(
        MaifMeanRow(
            treatment="first configuration at line rate (bound)",
            seeds=len(bounds),
            avg_iter_ms=math.nan,
            search_ms=tuple(statistics.fmean(b.search_ms[i] for b in bounds) for i in range(n_t)),
            jobs_ms=(math.nan,) * n_t,
            search_faster=tuple(
                _pct_range([1 - b.search_ms[i] / fifo[b.seed].search_ms[i] for b in bounds]) for i in range(n_t)
            ),
            jobs_faster=("—",) * n_t,
        )
    )
    return out


def _verdict(rows: Sequence[MaifRow]) -> list[str]:
    fifo = {r.seed: r for r in rows if r.treatment == "fifo"}
    out = []
    for treatment in ("maif", "mltcp+maif"):
        rs = [r for r in rows if r.treatment == treatment]
        for i, p in enumerate(PCT):
            red = statistics.fmean(1 - r.search_ms[i] / fifo[r.seed].search_ms[i] for r in rs)
            saved = f"{100 * red:.0f} % less" if red >= 0 else f"{-100 * red:.0f} % more"
            out.append(f"- {treatment}, {p} A*: {saved} time than FIFO (target: {100 * MAIF_TARGET:.0f} % less): "
                       f"{'met' if red >= MAIF_TARGET else 'missed'}")  # fmt: skip
    return out


def maif_search(ctx: Context, configs: int = 16) -> str:
    """A hyper-parameter search: ``configs`` configurations of one model (learning curves of the lab's
    model, acc_max and tau drawn per configuration) share an oversubscribed fabric. The switch is FIFO
    (baseline) or holds the coordinator's MAIF classes (engine run on the simulated clock)."""
    exp = "maif"
    iterations = ctx.iterations or 40
    scale = ctx.scale or 0.01  # the measured runs (docs/results.md); 0.02 doubles the packets
    params = maif_params(scale)
    topo = leaf_spine(**MAIF_FABRIC)  # type: ignore[arg-type]
    tcp = JUMBO
    rows: list[MaifRow] = []
    bounds: list[Bound] = []
    curves: dict[str, list[tuple[float, float]]] = {}
    for seed in ctx.seeds:
        jobs = search_jobs(topo, configs, seed, scale)
        ctx.log(f"   seed {seed}: configurations (job: acc_max, tau) " + ", ".join(
            f"{j.job_id}: {j.acc_max:.3f}, {j.tau:.1f}" for j in jobs))  # fmt: skip
        for treatment, priorities, mltcp in MAIF_TREATMENTS:
            cfg = SimConfig(treatment, topo, jobs, iterations, priorities=priorities, mltcp=mltcp, tcp=tcp,
                            seed=seed, maif=params, **FABRIC)  # fmt: skip
            r = run_saved(ctx, exp, cfg)
            st = search_times(r.records, jobs, iterations)
            lj = next(j for j in jobs if j.job_id == st.lead)
            until = _completions(r.records)[(st.lead, st.lead_iterations - 1)]
            lead_iter = (until - min(x.start for x in r.records if x.job == st.lead)) / st.lead_iterations
            cls, top = class_over_time(r.decisions, st.lead, until, params.top_class)
            if priorities != "maif":
                cls, top = math.nan, math.nan
            rows.append(
                MaifRow(
                    treatment=treatment,
                    seed=seed,
                    avg_iter_ms=1e3 * summarise(r.records)[1].avg,
                    search_ms=tuple(1e3 * v for v in st.search),
                    jobs_ms=tuple(1e3 * v for v in st.jobs),
                    decisions=len(r.decisions),
                    lead=f"{st.lead} ({lj.acc_max:.3f}, {lj.tau:.1f})",
                    lead_iterations=st.lead_iterations,
                    lead_iter_ms=1e3 * lead_iter,
                    lead_class=cls,
                    lead_top_share=top,
                )
            )
            if seed == ctx.seeds[0]:
                curves[treatment] = _best_so_far(r.records, jobs)
        start = min(x.start for x in r.records)  # the bound counts from the start of the seed's last run
        bounds.append(Bound(seed, tuple(1e3 * (start + line_rate_time(topo, jobs, iterations, q))
                                        for q in TTA_TARGETS)))  # fmt: skip
    write_table(ctx.dir(exp) / "maif.csv", MaifRow, rows)
    mean_rows = _mean_rows(rows, bounds)
    write_table(ctx.dir(exp) / "maif_mean.csv", MaifMeanRow, mean_rows)
    plot_maif(ctx.dir(exp) / "maif.png", rows, bounds, curves, ctx.seeds[0])
    body = [
        f"{topo.description}; {configs} configurations of ResNet-50 (bytes and compute x {scale:g}), 2 workers + "
        f"1 PS each, every host two workers and one PS; learning curves acc(i) = acc_max (1 - exp(-(i+1)/tau)), "
        f"acc_max ~ U{MAIF_ACC_MAX}, tau ~ U{MAIF_TAU} per configuration and seed; {iterations} iterations; "
        f"seeds {seeds_text(ctx)}; MAIF horizon {params.horizon_s:g} s (5 s x {scale:g}), classes "
        f"{params.top_class}..{params.bottom_class}. A*: the best accuracy after the last iteration. "
        f"'search X % A*': simulated time until the best configuration so far reached X % of A*; 'jobs X %': mean "
        "over configurations of the time each reached X % of its own final accuracy; 'faster': time saved against "
        "FIFO, mean over seeds (range); 'lead config': the configuration that needs the fewest iterations to reach "
        f"{PCT[0]} of A*, its class under MAIF from the first decision until it got there; the bound: every "
        "configuration's iterations at compute + PS-link line rate (nothing to share), the first to get there.",
        "",
        md_table(MaifMeanRow, mean_rows),
        "",
        *_verdict(rows),
        "",
        "![maif](maif.png)",
        "",
        "Per seed:",
        "",
        md_table(MaifRow, rows),
    ]
    return summary(ctx, exp, "MAIF time-to-accuracy in a hyper-parameter search", body)


def plot_maif(path: Path, rows: Sequence[MaifRow], bounds: Sequence[Bound],
              curves: dict[str, list[tuple[float, float]]], seed: int) -> None:  # fmt: skip
    """Left: time to accuracy per treatment (mean over seeds, range as error bars) beside the bound; right:
    the best accuracy so far over simulated time in the first seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups: dict[str, dict[str, list[float]]] = {f"search {p} A*": {} for p in PCT} | {f"jobs {p}": {} for p in PCT}
    for r in rows:
        for i, p in enumerate(PCT):
            groups[f"search {p} A*"].setdefault(r.treatment, []).append(r.search_ms[i])
            groups[f"jobs {p}"].setdefault(r.treatment, []).append(r.jobs_ms[i])
    for b in bounds:
        for i, p in enumerate(PCT):
            groups[f"search {p} A*"].setdefault("line rate (bound)", []).append(b.search_ms[i])
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
