"""5. Selective drop under incast: many workers of one job push into one PS's host link beside a job
whose every chunk is protected, with and without selective drop."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from mlfc.policy.drop import DropPolicy
from mlfc.sim import metrics
from mlfc.sim.experiments.common import (
    JUMBO,
    SCALE_ECN,
    Context,
    bars,
    col,
    md_table,
    run_saved,
    seeds_text,
    summary,
    write_table,
)
from mlfc.sim.jobs import PS, model_job
from mlfc.sim.lab import summarise
from mlfc.sim.simulation import SimConfig
from mlfc.sim.topology import leaf_spine


@dataclass(frozen=True)
class IncastRow:
    """incast.csv: one drop policy, queue limit and seed; drops and marks summed over the switches."""

    policy: str = col("policy")
    queue_limit: int = col("queue limit")
    seed: int = col("seed")
    incast_avg_s: float = col("incast job avg s")
    incast_p99_s: float = col("incast job p99 s")
    protected_avg_s: float = col("protected job avg s")
    protected_p99_s: float = col("protected job p99 s")
    selective_drops: int = col("selective drops")
    tail_drops: int = col("tail drops")
    ecn_marks: int = col("ECN marks")


def incast(ctx: Context, senders: int = 16) -> str:
    """``senders`` workers of one job push to one PS at once (incast into the PS's host link), next to
    a second job whose gradients are all protected (importance >= 8). Selective drop by congestion
    level (the default DropPolicy) against no selective drop (every level forwards every class)."""
    exp = "incast"
    iterations = ctx.iterations or 20
    scale = ctx.scale or 0.02
    topo = leaf_spine(leaves=4, spines=2, hosts_per_leaf=8, oversubscription=1.0)
    tcp = JUMBO
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
    rows: list[IncastRow] = []
    for limit in (64, 256):
        for name, pol in policies.items():
            for seed in ctx.seeds:
                cfg = SimConfig(f"limit{limit}-{'sd' if pol.min_importance[1] else 'nosd'}", topo, jobs, iterations,
                                drop=pol, tcp=tcp, queue_limit=limit, seed=seed, ecn=SCALE_ECN)  # fmt: skip
                r = run_saved(ctx, exp, cfg)
                per = {p.job: p for p in summarise(r.records)[0]}
                c = r.jobs.values()
                rows.append(
                    IncastRow(
                        policy=name,
                        queue_limit=limit,
                        seed=seed,
                        incast_avg_s=per[1].avg,
                        incast_p99_s=per[1].p99,
                        protected_avg_s=per[2].avg,
                        protected_p99_s=per[2].p99,
                        selective_drops=sum(v["selective_drops"] for v in c),
                        tail_drops=sum(v["tail_drops"] for v in c),
                        ecn_marks=sum(v["ecn_marks"] for v in c),
                    )
                )
    write_table(ctx.dir(exp) / "incast.csv", IncastRow, rows)
    plot_incast(ctx.dir(exp) / "incast.png", rows)
    body = [
        f"{topo.description}; job 1: {senders} workers on three leaves push ResNet-50 gradients (x {scale:g}) "
        "to one PS at once, chunks classed by the transport's magnitude rule (mlfc.hosts.importance); job 2: one "
        "worker on the PS's leaf, every chunk protected; MTU 9000; TCP retransmits every dropped segment "
        "(the simulator has no bounded-loss receiver); "
        f"{iterations} iterations; seeds {seeds_text(ctx)}.",
        "",
        md_table(IncastRow, rows),
        "",
        "![incast](incast.png)",
    ]
    return summary(ctx, exp, "Selective drop under incast", body)


def plot_incast(path: Path, rows: Sequence[IncastRow]) -> None:
    groups: dict[str, dict[str, list[float]]] = {}
    for r in rows:
        per_job = {"incast job avg": r.incast_avg_s, "incast job p99": r.incast_p99_s,
                   "protected job avg": r.protected_avg_s, "protected job p99": r.protected_p99_s}  # fmt: skip
        for what, v in per_job.items():
            groups.setdefault(f"{what}\n{r.queue_limit}-packet queues", {}).setdefault(r.policy, []).append(1e3 * v)
    bars(path, groups, "iteration time (ms)", "ns-3 incast: selective drop against none")
