"""3. Circular dependencies: three ring all-reduce jobs on a cycle of host links, which can all
interleave only while each job's communication fraction is at most a third."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

from mlfc.sim import metrics
from mlfc.sim.experiments.common import (
    FABRIC,
    JUMBO,
    Context,
    against_baseline,
    col,
    fabric_solo,
    its,
    md_table,
    run_saved,
    seeds_text,
    summary,
    write_table,
)
from mlfc.sim.jobs import RING, SimJob
from mlfc.sim.lab import plot_timeline
from mlfc.sim.simulation import SimConfig
from mlfc.sim.topology import GBPS, leaf_spine

FRACTIONS = (0.25, 0.45)  # the communication fractions a: below and above a third


@dataclass(frozen=True)
class CircularRow:
    """circular.csv: one communication fraction and seed."""

    a: float = col("a")
    seed: int = col("seed")
    base_avg_ms: float = col("base avg ms")
    mltcp_avg_ms: float = col("mltcp avg ms")
    avg_speedup: float = col("avg speed-up")
    p99_speedup: float = col("p99 speed-up")
    ideal_speedup: float = col("ideal speed-up")
    share: float = col("share of ideal")
    mltcp_interleaved: str = col("mltcp interleaved from")
    base_interleaved: str = col("base interleaved from")


def _pairs(im: metrics.Interleaving) -> str:
    return f"{im.interleaved}/{im.groups} pairs, " + its([im.iteration])


def circular(ctx: Context) -> str:
    """Three two-worker ring all-reduce jobs on hosts h1, h2, h3 (one per leaf): A on (h1, h2), B on
    (h2, h3), C on (h3, h1). Every host link carries two jobs (A and B share h2's, B and C h3's, C and
    A h1's) and every pair of jobs must take turns, so the three must take turns around the cycle:
    with a <= 1/3 they can all interleave (offsets of a third of a period), above 1/3 they cannot,
    although no link carries more than two jobs (2a <= 1 on every link)."""
    exp = "circular"
    iterations = ctx.iterations or 30
    topo = leaf_spine(leaves=3, spines=2, hosts_per_leaf=1, oversubscription=0.5)  # fat uplinks: hosts bottleneck
    tcp = JUMBO
    hosts = ("l1h1", "l2h1", "l3h1")
    size = 4_000_000
    comm = 8 * size / (100 * GBPS)  # two ring steps of size/2 per direction of a host link, alone
    rows: list[CircularRow] = []
    for a in FRACTIONS:
        compute = comm * (1 - a) / a
        jobs = tuple(
            SimJob(i + 1, f"ring{i + 1}", size, size, compute, (hosts[i], hosts[(i + 1) % 3]), None, RING, jitter=0.01)
            for i in range(3)
        )
        groups = metrics.shared_groups(topo, jobs)
        for seed in ctx.seeds:
            solo = fabric_solo(ctx, exp, topo, jobs, 5, "reno", seed, tcp)
            # Pairwise turns around a cycle of three: each job gets at most a third of the period.
            ideal = {j: t * max(1.0, 3 * a) for j, t in solo.items()}
            ideal_avg = statistics.fmean(ideal.values())
            cfg = SimConfig(f"a{a:g}/base", topo, jobs, iterations, tcp=tcp, seed=seed, **FABRIC)
            base = run_saved(ctx, exp, cfg)
            ml = run_saved(ctx, exp, replace(cfg, name=f"a{a:g}/mltcp", mltcp=True))
            rows.append(
                CircularRow(
                    a=a,
                    seed=seed,
                    **against_baseline(base, ml, ideal_avg),
                    mltcp_interleaved=_pairs(metrics.fabric_interleaving(ml.records, groups)),
                    base_interleaved=_pairs(metrics.fabric_interleaving(base.records, groups)),
                )
            )
            if seed == ctx.seeds[0]:
                for name, res in (("base", base), ("mltcp", ml)):
                    plot_timeline(ctx.dir(exp) / f"circular-a{a:g}-{name}.png", res.records,
                                  f"ns-3 cycle of 3 ring jobs, a={a:g}, {name} (seed {seed})")  # fmt: skip
    write_table(ctx.dir(exp) / "circular.csv", CircularRow, rows)
    body = [
        f"{topo.description}; three 2-worker ring all-reduce jobs of {size / 1e6:g} MB on a cycle of host "
        f"links (module doc); MTU 9000; compute set for the a shown; {iterations} iterations; seeds "
        f"{seeds_text(ctx)}. Ideal: solo time x max(1, 3a) (three turns per period). "
        "Interleaved: the lab's interleaving iteration for each pair sharing a host link (pairs that stayed "
        "interleaved / pairs, and the iteration from which all did).",
        "",
        md_table(CircularRow, rows),
        "",
        *(f"![a={a:g} {n}](circular-a{a:g}-{n}.png)" for a in FRACTIONS for n in ("base", "mltcp")),
    ]
    return summary(ctx, exp, "Circular dependencies on a leaf-spine", body)
