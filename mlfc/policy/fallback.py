"""MLTCP's fallback: notice from the agents' timings that MLTCP alone has not interleaved the jobs, and switch
the coordinator from "no priorities" to MAIF's strict priorities (or to in-network interleaving); switch back,
with hysteresis, once the jobs have run uncontended for a while. Pure functions and frozen state; the
coordinator (coordinator/engine.py) calls ``step`` at every evaluation and persists the state it returns.

The signal. Every agent reports, per iteration, how long the job's communication phase took
(``IterationReport.comm_seconds``; the slowest worker's counts for the iteration). A job's *contention* is the
mean of its last ``window`` communication times divided by its best one (the shortest of the iterations kept,
leaving out the job's first, which carries connection set-up): 1.0 means it communicates as fast as it ever
did, i.e. as if alone on its bottleneck; 2.0 means the phase is shared with another job's for its whole length.
Communication, not iteration time: a straggler's longer compute, which no schedule of the network can undo,
must not look like contention.

A second signal covers what the first cannot see: jobs whose phases collide from their first iteration on
never communicate alone, so their best time is itself contended and the ratio stays near 1 (measured on the
partially compatible mix: 1.0-1.25 while every push ran beside the other job's). Each report also carries
the agent's clock at the iteration's end (``timestamp``), so the coordinator knows when each job
communicated: a job's *overlap* is the share of its communication phase during which another job was
communicating too, averaged over the same window. Interleaved jobs overlap little (a push beside another
job's pull at most: about half a phase); jobs that send together the whole time overlap fully. The
coordinator does not know the topology, so overlap in time counts whether or not the jobs share a link (see
Limitations in docs/coordinator.md).

The rule.

* **Engage** (MLTCP alone -> priorities) when at least two jobs are active and some job, counting only
  iterations after its first ``warmup`` ones (and after the latest switch back, when MLTCP has to converge
  again), has contention above ``enter`` or overlap above ``overlap_enter``. MLTCP interleaves compatible
  jobs within a few iterations when it can (2-9 measured, docs/results.md); a job still paying ``enter`` - 1
  extra on every phase after that, or still sending beside another job, is in one of the cases it cannot
  fix: a straggler whose period drifted, partially compatible jobs, a cycle of shifts. Strict priority
  between the jobs forces one to finish its phase first whatever the offsets, and one global order of jobs
  is acyclic, so it also breaks a circular dependency that per-link shifts cannot.
* **Release** (priorities -> MLTCP alone) when every job has had ``calm`` iterations since the switch and its
  contention over its last ``calm`` iterations is below ``exit`` (< ``enter``) and its overlap below
  ``overlap_exit``. The calm period doubles after every release (up to ``max_calm``), so a mix that falls
  apart again without priorities stops flapping: each return to MLTCP alone waits twice as long.

A job without timings (comm_seconds 0) or with too few iterations has no contention and never engages.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from mlfc.policy.priority import PolicyError

ACTIONS = ("maif", "interleave")  # what the coordinator applies while engaged


class Applied(StrEnum):
    """What a decision's intent carries: the ranking's classes, in-network interleaving, or no classes
    (MLTCP alone). A StrEnum: the persisted and printed form stays the word."""

    MAIF = "maif"
    INTERLEAVE = "interleave"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class FallbackParams:
    action: str = "maif"  # maif: the MAIF ranking's strict classes; interleave: Intent.interleaving, no classes
    warmup: int = 4  # iterations of a job (and after a release) MLTCP is given to interleave
    window: int = 3  # iterations whose mean communication time is compared with the best
    enter: float = 1.35  # contention above this engages
    exit: float = 1.15  # every job's contention below this for `calm` iterations releases
    calm: int = 8  # iterations of calm before the first release (doubled after every release)
    max_calm: int = 64  # cap of the doubled calm period
    history: int = 64  # iterations of communication time kept per job (the best is the best of these)
    overlap_enter: float = 0.8  # mean overlap of a job's phases with other jobs' above this engages
    overlap_exit: float = 0.6  # ... and below this (with contention below exit) releases

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise PolicyError(f"fallback action {self.action!r}: choose one of {', '.join(ACTIONS)}")
        if self.warmup < 0 or self.window < 1 or self.calm < 1:
            raise PolicyError("fallback warmup must be >= 0, window and calm >= 1")
        if not (math.isfinite(self.enter) and math.isfinite(self.exit) and 1.0 <= self.exit < self.enter):
            raise PolicyError(f"fallback thresholds need 1 <= exit < enter (exit={self.exit}, enter={self.enter})")
        if self.max_calm < self.calm:
            raise PolicyError(f"fallback max_calm={self.max_calm} below calm={self.calm}")
        if not 0.0 <= self.overlap_exit < self.overlap_enter <= 1.0:
            raise PolicyError(
                f"fallback overlaps need 0 <= overlap_exit < overlap_enter <= 1 "
                f"(exit={self.overlap_exit}, enter={self.overlap_enter})"
            )
        if self.history < max(self.window, self.calm) + 1:
            raise PolicyError(f"fallback history={self.history} must exceed window and calm")


@dataclass(frozen=True, slots=True)
class Contention:
    """One job's contention over the iterations ``first..last``."""

    job_id: int
    ratio: float  # mean communication time of the window / best
    mean_s: float
    best_s: float
    first: int
    last: int
    overlap: float = math.nan  # mean share of the window's phases during which another job communicated

    def describe(self) -> str:
        shared = "" if math.isnan(self.overlap) else f", {100 * self.overlap:.0f} % of it beside other jobs'"
        return (
            f"job {self.job_id}'s communication averaged {self.ratio:.2f}x its best ({self.mean_s:.3g} s against "
            f"{self.best_s:.3g} s){shared} over iterations {self.first}..{self.last}"
        )


@dataclass(frozen=True, slots=True)
class FallbackState:
    """What the fallback remembers between evaluations (persisted with every decision)."""

    engaged: bool = False
    changed_at: Mapping[int, int] = field(default_factory=dict)  # job -> its latest iteration at the latest switch
    releases: int = 0  # switches back to MLTCP alone so far (each doubles the calm period)
    reason: str = "MLTCP alone: no job contended yet"


@dataclass(frozen=True, slots=True)
class Verdict:
    state: FallbackState
    contention: tuple[Contention, ...]  # of the jobs that had enough iterations, by job id
    switched: bool  # this evaluation changed the mode

    def applies(self, action: str) -> Applied:
        """What the intent carries: the fallback's action while engaged, else MLTCP alone."""
        return Applied(action) if self.state.engaged else Applied.NONE


def calm_period(params: FallbackParams, releases: int) -> int:
    return min(params.max_calm, params.calm * 2**releases)


def contention(series: Mapping[int, float], window: int, after: int | None = None) -> Contention | None:
    """A job's contention from ``{iteration: communication seconds}``: the mean of the last ``window``
    iterations above ``after`` (all if None) against the best of every iteration but the first one. None when
    fewer than ``window`` such iterations exist or no positive time is known."""
    its = sorted(i for i, s in series.items() if s > 0)
    if len(its) < 2:
        return None
    best = min(series[i] for i in its[1:])
    recent = [i for i in its[1:] if after is None or i > after][-window:]
    if len(recent) < window or best <= 0:
        return None
    mean = sum(series[i] for i in recent) / len(recent)
    return Contention(-1, mean / best, mean, best, recent[0], recent[-1])


Phases = Mapping[int, Mapping[int, tuple[float, float]]]  # job -> iteration -> (start, end) of its communication


def overlap(phases: Phases, job: int, first: int, last: int) -> float:
    """Mean over ``job``'s iterations ``first..last`` of the share of its communication phase during which any
    other job's phase was under way; nan when the job's phases (or every other job's) are unknown."""
    mine = [phases[job][i] for i in sorted(phases.get(job, {})) if first <= i <= last]
    others = sorted(iv for j, p in phases.items() if j != job for iv in p.values())
    if not mine or not others:
        return math.nan
    shares = []
    for a, b in mine:
        covered, reach = 0.0, a  # others sorted by start: sweep their union across [a, b]
        for c, d in others:
            if c >= b:
                break
            lo, hi = max(c, reach), min(d, b)
            if hi > lo:
                covered += hi - lo
                reach = hi
        shares.append(covered / (b - a) if b > a else 0.0)
    return sum(shares) / len(shares)


def _with_overlap(c: Contention, job: int, phases: Phases | None) -> Contention:
    return replace(c, job_id=job, overlap=overlap(phases, job, c.first, c.last) if phases else math.nan)


def _over(c: Contention, ratio: float, share: float) -> bool:
    return c.ratio > ratio or (not math.isnan(c.overlap) and c.overlap > share)


def step(
    state: FallbackState,
    jobs: Mapping[int, Mapping[int, float]],
    params: FallbackParams,
    phases: Phases | None = None,
) -> Verdict:
    """One evaluation: ``jobs`` maps each active job to its communication times by iteration, ``phases`` (if
    the agents' clocks are known) to when each iteration's communication ran."""
    measured: list[Contention] = []
    latest = {j: max(s) for j, s in jobs.items() if s}
    if not state.engaged:
        for j in sorted(jobs):
            comm = jobs[j]
            iterations = sorted(comm)
            if len(iterations) <= params.warmup:
                continue
            after = iterations[params.warmup - 1] if params.warmup else None  # the job's own warm-up
            if j in state.changed_at:  # MLTCP converges again after a release
                after = max(after if after is not None else -1, state.changed_at[j] + params.warmup)
            found = contention(comm, params.window, after)
            if found is not None:
                measured.append(_with_overlap(found, j, phases))
        over = [c for c in measured if _over(c, params.enter, params.overlap_enter)]
        if len(jobs) >= 2 and over:
            worst = max(over, key=lambda c: c.ratio)
            reason = (
                f"MLTCP alone has not interleaved the jobs: {worst.describe()}, above {params.enter:g}x or "
                f"{100 * params.overlap_enter:.0f} % after {params.warmup} warm-up iteration(s) -> {params.action} "
                "priorities"
            )
            return Verdict(FallbackState(True, latest, state.releases, reason), tuple(measured), True)
        if not measured:
            return Verdict(state, (), False)
        worst = max(measured, key=lambda c: c.ratio)
        shares = [c.overlap for c in measured if not math.isnan(c.overlap)]
        shared = f", overlap at most {100 * max(shares):.0f} %" if shares else ""
        reason = (
            f"MLTCP alone: contention at most {worst.ratio:.2f}x{shared} (engages above {params.enter:g}x or "
            f"{100 * params.overlap_enter:.0f} %)"
        )
        return Verdict(replace(state, reason=reason), tuple(measured), False)
    calm = calm_period(params, state.releases)
    ready = True
    for j in sorted(jobs):
        found = contention(jobs[j], calm, state.changed_at.get(j))
        if found is None:
            ready = False  # not `calm` iterations under priorities yet
            continue
        measured.append(_with_overlap(found, j, phases))
    worst = max(measured, key=lambda c: c.ratio, default=None)
    if ready and worst is not None and not any(_over(c, params.exit, params.overlap_exit) for c in measured):
        reason = (
            f"MLTCP alone again: every job's communication within {params.exit:g}x of its best and "
            f"{100 * params.overlap_exit:.0f} % overlap for {calm} iterations under priorities "
            f"(worst: {worst.describe()}); next calm period {calm_period(params, state.releases + 1)}"
        )
        return Verdict(FallbackState(False, latest, state.releases + 1, reason), tuple(measured), True)
    return Verdict(state, tuple(measured), False)
