"""Approximate flow control's runs: one variant's result, the experiment of one model on one dataplane,
the converged references (A*) and one run of a variant."""

from __future__ import annotations

import argparse
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from mlfc.lab import astar, dataplanes
from mlfc.lab.approx.variants import FINAL_EVALUATIONS, FRACTION, MODELS, Model, Variant, stack
from mlfc.lab.realjobs import RealRun, run_real, say
from mlfc.lab.results import percentile, write_csv
from mlfc.lab.tta import (
    SMOOTH_WINDOW,
    AccuracyPoint,
    final_mean,
    job_time_to_accuracy,
    plot_accuracy,
)


@dataclass
class Result:
    model: str
    variant: Variant
    jobs: int
    seed: int
    round: int
    run: RealRun
    a_star: float
    model_bytes: int  # one worker's full push (and pull) per iteration
    compression: str = "none"
    csv: Path | None = None

    @property
    def congested(self) -> bool:
        return self.jobs > 1

    def points(self) -> dict[int, list[AccuracyPoint]]:
        return self.run.points()

    def durations(self) -> list[float]:
        return [r.duration for r in self.run.records if r.iteration >= 1]

    @property
    def avg(self) -> float:
        d = self.durations()
        return statistics.fmean(d) if d else math.nan

    @property
    def p99(self) -> float:
        return percentile(self.durations(), 99)

    def tta(self) -> list[float]:
        target = FRACTION * self.a_star
        return [job_time_to_accuracy(p, target, self.run.start, SMOOTH_WINDOW) for p in self.points().values()]

    @property
    def mean_tta(self) -> float:
        """Mean over the jobs of each job's time to 0.95 A*; NaN unless every job got there."""
        t = self.tta()
        return statistics.fmean(t) if t and not any(math.isnan(x) for x in t) else math.nan

    @property
    def final(self) -> float:
        f = [final_mean(p, FINAL_EVALUATIONS) for p in self.points().values()]
        return statistics.fmean(f) if f else math.nan

    def _share(self, sent) -> float:
        """The mean of ``sent(record)`` over the run's records, over one full tensor set's bytes."""
        recs = self.run.records
        if not recs or self.model_bytes <= 0:
            return math.nan
        return statistics.fmean(sent(r) for r in recs) / self.model_bytes

    @property
    def push_share(self) -> float:
        """Bytes the pushes handed to the network over full delivery's (withheld chunks and compression off)."""
        return self._share(lambda r: r.sent_bytes if r.sent_bytes is not None else r.bytes)

    @property
    def pull_share(self) -> float:
        """Bytes the pulls brought over full delivery's (the chunks the PS left out off)."""
        return self._share(lambda r: r.pull_sent_bytes if r.pull_sent_bytes is not None else self.model_bytes)

    @property
    def bytes_share(self) -> float:
        """Pushes and pulls as sent over full delivery's pushes and pulls."""
        return (self.push_share + self.pull_share) / 2.0

    @property
    def precision(self) -> str:
        """Shares of the pushes' chunks sent fp32, fp16, int8 and withheld (mlfc.policy.precision), e.g.
        'fp32 60 %, fp16 40 %'; shares under 0.5 % left out, '-' when the records do not say."""
        recs = self.run.records
        total = sum(r.chunks for r in recs)
        if total <= 0:
            return "-"
        low = {k: sum(getattr(r, f"{k}_chunks") for r in recs) for k in ("fp16", "int8", "withheld")}
        shares = {"fp32": total - sum(low.values()), **low}
        return ", ".join(f"{k} {100 * v / total:.0f} %" for k, v in shares.items() if v / total >= 0.005) or "-"

    @property
    def lost_chunks(self) -> int:
        return sum(r.lost_chunks for r in self.run.records)

    @property
    def drops(self) -> int:
        return sum(c.get("drops", 0) for c in self.run.run.counters.values())

    @property
    def retransmits(self) -> int:
        return sum(r.retransmits for r in self.run.records)

    @property
    def signals_per_phase(self) -> float:
        """Congestion signals the switches gave the run's jobs (CE marks + drops, their per-job counters) per
        worker and iteration: how often a flow heard of congestion in one communication phase (issue 45's
        regime measure)."""
        counters = self.run.run.counters.values()
        signals = sum(c.get("ecn_marks", 0) + c.get("drops", 0) for c in counters)
        phases = len(self.run.records)  # one record per worker and iteration
        return signals / phases if phases else math.nan


@dataclass
class Experiment:
    args: argparse.Namespace
    model_name: str
    plane: dataplanes.Dataplane
    out: Path
    references: dict[int, astar.Reference] = field(default_factory=dict)  # seed -> converged run
    probe: str = ""
    padding: float = math.nan
    results: list[Result] = field(default_factory=list)

    @property
    def model(self) -> Model:
        return MODELS[self.model_name]

    def rows(self, name: str, jobs: int) -> list[Result]:
        mine = (r for r in self.results if r.variant.name == name and r.jobs == jobs)
        return sorted(mine, key=lambda r: (r.round, r.seed))

    def groups(self) -> list[tuple[int, str]]:
        """(jobs, treatment) in the order they first ran, congested first."""
        seen: dict[tuple[int, str], None] = {}
        for r in sorted(self.results, key=lambda r: -r.jobs):
            seen.setdefault((r.jobs, r.variant.name), None)
        return list(seen)


def run_references(e: Experiment) -> None:
    a, m = e.args, e.model
    plateau = astar.Plateau(window=SMOOTH_WINDOW, eval_every=a.eval_every)
    for seed in a.seeds:
        ref = astar.reference(a.cache, m.task, m.width, m.lr, seed, a.workers, None, plateau)
        e.references[seed] = ref
        reach = ref.iteration_reaching(FRACTION * ref.a_star)
        how = "cached" if ref.cached else f"trained in {ref.seconds:.0f} s"
        say(f"-- A* ({e.model_name}, seed {seed}): {ref.a_star:.3f} after {ref.iterations[-1]} iterations "
            f"({how}); 0.95 A* at iteration {reach} in process")  # fmt: skip
        if reach is None or reach > stack(a, m, Variant("x"), 1, seed).iterations:
            say("   warning: the runs are shorter than where full delivery reaches 0.95 A* in process")


def run_variant(e: Experiment, ctl, topo, v: Variant, jobs: int, seed: int, rnd: int) -> Result:
    topk = None
    if v.compress == "topk" and v.topk is None:
        mine = [
            r for r in e.results if r.variant.name == "mlfc" and r.round == rnd and r.seed == seed and r.jobs == jobs
        ]
        if not mine:
            raise RuntimeError("topk-ef --topk match needs the round's mlfc run first (treatments include mlfc)")
        topk = max(1e-3, min(1.0, mine[-1].push_share / 2))
    cfg = stack(e.args, e.model, v, jobs, seed, topk)
    run = run_real(ctl, topo, cfg, watch=False)
    res = Result(e.model_name, v, jobs, seed, rnd, run, e.references[seed].a_star, cfg.jobs[0].profile.push_bytes,
                 v.compression(topk))  # fmt: skip
    stem = e.out / f"{v.name}-j{jobs}-s{seed}-r{rnd + 1}"
    res.csv = stem.parent / f"{stem.name}.csv"
    write_csv(res.csv, run.records)
    plot_accuracy(stem.parent / f"{stem.name}-accuracy.png", res.points(),
                  f"{e.model_name} {v.name} ({res.compression if v.compress != 'none' else v.describe()}), {jobs} "
                  f"job(s), seed {seed}, round {rnd + 1}, {e.plane.label}",
                  run.start, {"0.95 A*": FRACTION * res.a_star})  # fmt: skip
    n_hit = sum(not math.isnan(t) for t in res.tta())
    say(
        f"   {v.name}, {jobs} job(s), seed {seed}, round {rnd + 1}: {res.avg:.3f} s/iteration (p99 {res.p99:.3f}), "
        f"0.95 A* after {res.mean_tta:.1f} s ({n_hit}/{len(res.tta())} jobs), final accuracy {res.final:.4f}, "
        f"bytes {100 * res.bytes_share:.0f} % of full (pushes {100 * res.push_share:.0f} %, pulls "
        f"{100 * res.pull_share:.0f} %), {res.lost_chunks} "
        f"chunks zero-filled, {res.drops} switch drops, {res.retransmits} retransmits"
    )
    if run.errors:
        say(f"   errors: {'; '.join(run.errors)}")
    return res
