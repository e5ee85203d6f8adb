"""The MAIF decision as a pure function: a snapshot of the active jobs and the previous decision's memory
in, the ranking (class, straggler window and reasons per job) out. No threads, SQLite or gRPC: the engine
builds the snapshot under its lock and persists and sends what comes out (convert.intent_of makes the
intent). The policy itself (fits, scores, ranking, straggler windows) is mlfc/policy/maif.py; with the
fallback configured (mlfc/policy/fallback.py) the ranking is applied only while MLTCP alone is seen failing to
interleave the jobs, and the intent carries no classes otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from mlfc.policy import chance, maif
from mlfc.policy import fallback as fb
from mlfc.proto import intent_pb2


def fit_job(kind: str, t: Sequence[float], m: Sequence[float], ref: float | None, min_points: int) -> maif.Fit:
    """A job's learning-curve fit: metrics turned into quality (higher is better), then fitted."""
    ta, ma = np.asarray(t, dtype=float), np.asarray(m, dtype=float)
    q = maif.to_quality(kind, ma, ref) if len(ma) else ma
    return maif.fit_arrays(ta, q, min_points)


class FitCache:
    """Fits per job, redone only when the job's curve changed (its version)."""

    def __init__(self) -> None:
        self._fits: dict[int, tuple[int, maif.Fit]] = {}

    def get(self, job_id: int, version: int) -> maif.Fit | None:
        cached = self._fits.get(job_id)
        return cached[1] if cached is not None and cached[0] == version else None

    def put(self, job_id: int, version: int, fit: maif.Fit) -> None:
        self._fits[job_id] = (version, fit)

    def drop(self, job_id: int) -> None:
        self._fits.pop(job_id, None)


@dataclass(frozen=True, slots=True)
class JobView:
    """What a decision needs of one active job."""

    job_id: int
    name: str
    fit: maif.Fit
    iter_s: float  # iteration time, nan if unknown
    net_s: float  # network time per iteration, nan if unknown
    workers: Mapping[int, int]  # rank -> latest iteration
    flows: tuple[intent_pb2.Flow, ...] = ()
    comm: Mapping[int, float] = field(default_factory=dict)  # iteration -> communication seconds (the fallback's)
    phases: Mapping[int, tuple[float, float]] = field(default_factory=dict)  # iteration -> (start, end), agent clock


@dataclass(frozen=True, slots=True)
class Memory:
    """What a decision remembers of a job for the next one: hysteresis and the sticky straggler window."""

    previous: maif.Previous
    window: maif.Window | None = None


@dataclass(frozen=True, slots=True)
class JobDecision:
    view: JobView
    score: maif.Score
    assignment: maif.Assignment
    window: maif.Window | None  # boosted iterations of a straggler
    reasons: tuple[str, ...]

    @property
    def priority(self) -> int:
        return self.assignment.priority

    @property
    def memory(self) -> Memory:
        a = self.assignment
        return Memory(maif.Previous(a.rank, a.priority, a.plateau, a.credit, a.held_from), self.window)


@dataclass(frozen=True, slots=True)
class Decision:
    jobs: Mapping[int, JobDecision]  # by job id, ascending
    interleaving: bool = False  # Intent.interleaving, for traffic of jobs without their own class
    fallback: fb.Verdict | None = None  # None: no fallback, the ranking always applies
    fallback_action: str = "maif"

    def memory(self) -> dict[int, Memory]:
        return {j: d.memory for j, d in self.jobs.items()}

    @property
    def applies(self) -> fb.Applied:
        """What the intent carries: "maif" (the ranking's classes), "interleave" (no classes, interleaving on)
        or "none" (no classes: MLTCP alone)."""
        return fb.Applied.MAIF if self.fallback is None else self.fallback.applies(self.fallback_action)


def decide(
    views: Sequence[JobView],
    memory: Mapping[int, Memory],
    params: maif.MaifParams | None = None,
    interleaving: bool = False,
    fallback: fb.FallbackParams | None = None,
    fallback_state: fb.FallbackState | None = None,
) -> Decision:
    """Rank the jobs by MAIF (with the previous order as hysteresis) and give stragglers their window. With
    ``fallback`` the ranking applies only while the fallback is engaged (``fallback_state``: the previous
    decision's, ``Decision.fallback.state`` the new one)."""
    params = params or maif.MaifParams()
    verdict = None
    if fallback is not None:
        phases = {view.job_id: view.phases for view in views if view.phases}
        comm = {view.job_id: view.comm for view in views}
        verdict = fb.step(fallback_state or fb.FallbackState(), comm, fallback, phases or None)
        by_job = {c.job_id: c for c in verdict.contention}
    scores = {view.job_id: maif.score_job(view.fit, view.iter_s, view.net_s, params) for view in views}
    own = scores
    # a hyper-parameter search: only the best job's accuracy counts (chance: its own order below the top class)
    search = params.objective not in ("sum", "chance")
    if search:
        scores = maif.search_scores({view.job_id: view.fit for view in views}, scores, params)
    previous = {j: m.previous for j, m in memory.items() if j in scores}
    if params.objective == "chance":
        fits = {view.job_id: view.fit for view in views}
        progress = {view.job_id: max(view.workers.values()) for view in views if view.workers}
        ranks = chance.chance_rank(fits, scores, previous, params, progress)
    else:
        ranks = maif.rank_jobs(scores, previous, params)
    if params.objective == "elimination":
        maif.share_top(ranks, maif.contenders({view.job_id: view.fit for view in views}, params), params)
    out: dict[int, JobDecision] = {}
    for view in sorted(views, key=lambda view: view.job_id):
        assignment = ranks[view.job_id]
        prev = memory.get(view.job_id)
        window = maif.straggler_window(view.workers, assignment.priority, prev.window if prev else None, params)
        reasons = list(assignment.reasons)
        if search and not scores[view.job_id].exploring:
            reasons.append(
                f"search objective: counted gain {scores[view.job_id].gain:.3g} (its own {own[view.job_id].gain:.3g}) "
                "of the best accuracy among the jobs"
            )
        if window is not None:
            slow = min(view.workers, key=lambda w: view.workers[w])
            lag = max(view.workers.values()) - view.workers[slow]
            reasons.append(
                f"straggler: worker {slow} lags {lag} iteration(s); iterations "
                f"{window.first}..{window.last} boosted to class {window.priority}"
            )
        if verdict is not None:
            reasons.append(_fallback_reason(verdict, fallback.action, by_job.get(view.job_id)))
        out[view.job_id] = JobDecision(view, scores[view.job_id], assignment, window, tuple(reasons))
    return Decision(out, interleaving, verdict, fallback.action if fallback else "maif")


def _fallback_reason(verdict: fb.Verdict, action: str, mine: fb.Contention | None) -> str:
    applies = verdict.applies(action)
    what = {"none": "no class applied (MLTCP alone)", "maif": "MAIF class applied", "interleave": "no class "
            "applied, in-network interleaving"}[applies]  # fmt: skip
    own = f"; this job: {mine.ratio:.2f}x its best over iterations {mine.first}..{mine.last}" if mine else ""
    return f"fallback {'engaged' if verdict.state.engaged else 'idle'}: {what}: {verdict.state.reason}{own}"
