"""Maximum-Accuracy-Improvement-First (MAIF): serve first the job that will gain the most accuracy next.

Plain functions with no I/O, the single source of truth for the policy (the coordinator calls them from
coordinator/decision.py):

1. ``fit_curve(points)`` fits a job's learning curve (mlfc/policy/learning_curve.py, re-exported here): quality
   "higher is better", a saturating power or exponential curve and the band of curves the data does not rule
   out. With fewer than ``min_points`` distinct iterations the fit is ``prior`` (no prediction: the ranker
   gives the job an exploration prior); with no variation in the data it is ``flat`` (predicted gain 0).
2. ``score_job(fit, ...)`` predicts the gain over the next decision interval (``horizon_s``) and
   divides it by the network time those iterations need: accuracy gained per second of network.
   With ``objective="best"`` (a hyper-parameter search: only the best configuration's accuracy
   counts) ``search_scores`` keeps of each job's gain the part that raises the best quality of all the
   jobs, plus ``own_gain_weight`` of its own gain to order the jobs that raise nothing. With
   ``objective="potential"`` (a search whose curves separate late) the gain is what a job's optimistic
   curve (the upper edge of the fit's 95 % band, ``Fit.bounds``) at the search's next doubling
   would add to the best quality: a job whose curve is still uncertain keeps a chance to be served, and a
   starved job, whose band stops narrowing, is served again once the leader's band has narrowed below it.
   With ``objective="elimination"`` the jobs the data cannot rule out (``contenders``: their band's top at
   that point reaches the best job's band bottom) share the top class, ranked by potential below it the
   others: successive elimination instead of a single leader. With ``objective="chance"`` (mlfc/policy/chance.py)
   the top class is time-shared among the jobs in proportion to each one's probability of being the best at
   that point (its band read as a normal), so no plausible winner is starved or ruled out for good.
3. ``rank_jobs(...)`` orders jobs by score with hysteresis (an incumbent keeps its place unless the
   challenger's score is larger by a relative margin) and maps ranks onto priority classes.
4. ``straggler_window(...)`` gives a job whose workers lag by iterations a boosted class for the lagging
   iterations (an ``IterationWindow`` of the intent API).
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from mlfc import contract

# re-exported (``as``): the coordinator, the simulator, the lab and the tests read the curve's names as maif.*
from mlfc.policy.learning_curve import ACCURACY as ACCURACY
from mlfc.policy.learning_curve import LOSS as LOSS
from mlfc.policy.learning_curve import Fit, current_quality, predicted_gain
from mlfc.policy.learning_curve import fit_arrays as fit_arrays
from mlfc.policy.learning_curve import fit_curve as fit_curve
from mlfc.policy.learning_curve import to_quality as to_quality
from mlfc.policy.priority import PolicyError, check_job_priority

OBJECTIVES = ("sum", "best", "potential", "elimination", "chance")
BAND_OBJECTIVES = ("potential", "elimination", "chance")  # the search objectives that judge a job by its fit's band


@dataclass(frozen=True, slots=True)
class MaifParams:
    horizon_s: float = 5.0  # decision interval over which the gain is predicted
    min_points: int = 4  # distinct iterations needed before a curve is trusted
    top_class: int = 6  # class of the job served first
    bottom_class: int = 2  # lowest job class (1 is the default class of untagged traffic)
    hysteresis: float = 0.25  # a challenger must beat an incumbent's score by this relative margin
    plateau_gain: float = 1e-4  # predicted gain over the horizon below which a job has plateaued
    exploration_quantile: float = 0.75  # jobs without history score like this quantile of the others
    exploration_floor: float = 1e-3  # ... and at least this much (quality per network second)
    straggler_lag: int = 2  # a worker this many iterations behind the leader is a straggler
    straggler_boost: int = 1  # classes added to the lagging iteration window
    upper: float | None = 1.0  # quality cannot exceed this (accuracy); None for no cap
    min_network_s: float = 1e-3  # floor of network time per horizon, avoids division by ~0
    objective: str = "sum"  # sum: every job's own gain counts | best, potential, elimination, chance: a search
    own_gain_weight: float = 0.05  # objective best: weight of a job's own gain beside what it adds to the best
    lookahead: float = 2.0  # objective potential: predict at this multiple of the most advanced job's iterations
    chance_threshold: float = 0.02  # objective chance: a job this likely to be the best shares the top class
    chance_sigma_floor: float = 0.005  # objective chance: least standard deviation of a job's quality there
    chance_quantum: int = 2  # objective chance: iterations the holder keeps the top class before the next turn

    def __post_init__(self) -> None:
        check_job_priority(self.top_class, "top_class")
        check_job_priority(self.bottom_class, "bottom_class")
        if self.bottom_class > self.top_class:
            raise PolicyError(f"bottom_class={self.bottom_class} above top_class={self.top_class}")
        for name in ("horizon_s", "min_network_s"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) > 0):
                raise PolicyError(f"{name}={getattr(self, name)} must be a positive number")
        if not (math.isfinite(self.hysteresis) and self.hysteresis >= 0):
            raise PolicyError(f"hysteresis={self.hysteresis} must be >= 0")
        if self.min_points < 3:
            raise PolicyError(f"min_points={self.min_points} must be >= 3 (a saturating curve has 3 parameters)")
        if self.straggler_lag < 1 or self.straggler_boost < 0:
            raise PolicyError("straggler_lag must be >= 1 and straggler_boost >= 0")
        if not 0.0 <= self.exploration_quantile <= 1.0:
            raise PolicyError(f"exploration_quantile={self.exploration_quantile} out of range 0..1")
        if self.objective not in OBJECTIVES:
            raise PolicyError(f"objective={self.objective!r}: expected one of {', '.join(OBJECTIVES)}")
        if not (math.isfinite(self.own_gain_weight) and 0.0 <= self.own_gain_weight <= 1.0):
            raise PolicyError(f"own_gain_weight={self.own_gain_weight} out of range 0..1")
        if not (math.isfinite(self.lookahead) and self.lookahead >= 1.0):
            raise PolicyError(f"lookahead={self.lookahead} must be >= 1 (a multiple of the iterations done)")
        if not (math.isfinite(self.chance_threshold) and 0.0 < self.chance_threshold <= 0.5):
            raise PolicyError(f"chance_threshold={self.chance_threshold} out of range (0, 0.5]")
        if not (math.isfinite(self.chance_sigma_floor) and self.chance_sigma_floor > 0):
            raise PolicyError(f"chance_sigma_floor={self.chance_sigma_floor} must be a positive number")
        if self.chance_quantum < 1:
            raise PolicyError(f"chance_quantum={self.chance_quantum} must be >= 1 iteration")


@dataclass(frozen=True, slots=True)
class Score:
    gain: float  # predicted quality gain over the horizon
    next_iters: float  # iterations expected in the horizon
    network_s: float  # network time those iterations need
    score: float  # gain per network second (the MAIF key); exploration prior for "prior" fits
    exploring: bool  # no usable curve yet


def score_job(fit: Fit, iter_s: float, net_s_per_iter: float, params: MaifParams = MaifParams()) -> Score:
    """Predicted gain over ``params.horizon_s`` divided by the network time it costs.

    ``iter_s`` is the job's iteration time (compute + communication), ``net_s_per_iter`` the part of it
    on the network. A job with no usable curve gets ``score = nan`` here; ``rank_jobs`` replaces it by
    the exploration prior.
    """
    iter_s = iter_s if math.isfinite(iter_s) and iter_s > 0 else params.horizon_s
    net = net_s_per_iter if math.isfinite(net_s_per_iter) and net_s_per_iter > 0 else iter_s
    n = params.horizon_s / iter_s
    network_s = max(n * net, params.min_network_s)
    if not fit.predictive:
        return Score(0.0, n, network_s, math.nan, True)
    gain = predicted_gain(fit, n, params.upper)
    return Score(gain, n, network_s, gain / network_s, False)


def search_scores(
    fits: Mapping[int, Fit], scores: Mapping[int, Score], params: MaifParams = MaifParams()
) -> dict[int, Score]:
    """Scores for a hyper-parameter search, where only the best job's quality counts.

    ``objective="best"``: a job's gain becomes what its predicted quality at the horizon adds above the best
    current quality of all the jobs (the leader's own gain, a challenger's only once it would overtake).
    ``objective="potential"``: what its optimistic quality (``potential``) at the search's next doubling adds
    above that best. Either way plus ``own_gain_weight`` of its own gain so that the jobs that add nothing keep
    MAIF's order among themselves, per network second of the horizon as in ``score_job``. Jobs without a usable
    curve stay exploring: the ranker gives them the prior.
    """
    best = max((current_quality(f, params.upper) for f in fits.values()), default=-math.inf)
    banded = params.objective in BAND_OBJECTIVES
    at = search_lookahead(fits.values(), params) if banded else math.nan
    out: dict[int, Score] = {}
    for j, s in scores.items():
        fit = fits[j]
        if s.exploring:
            out[j] = s
            continue
        now = current_quality(fit, params.upper)
        if banded:
            later = potential(fit, at, params.upper)
            own = max(0.0, later - now)
        else:
            later, own = now + s.gain, s.gain
        raised = max(0.0, later - best) if math.isfinite(best) else own
        gain = raised + params.own_gain_weight * own
        out[j] = Score(gain, s.next_iters, s.network_s, gain / s.network_s, False)
    return out


def search_lookahead(fits: Iterable[Fit], params: MaifParams = MaifParams()) -> float:
    """The iteration every job's potential is judged at: ``lookahead`` times the iterations of the most advanced
    job. One point for all, so that a job starved at an early iteration is judged by where its curve could be
    when the leader has trained as long again, not at its own next few iterations."""
    done = max((f.last_iteration for f in fits if f.predictive), default=0)
    return params.lookahead * (done + 1) - 1


def potential(fit: Fit, at: float, upper: float | None = 1.0) -> float:
    """The job's optimistic quality at iteration ``at`` (the band's upper edge, capped at ``upper``), never below
    its quality now."""
    now = current_quality(fit, upper)
    if fit.model not in ("power", "exp") or at <= fit.last_iteration:
        return now
    q = fit.bounds(at)[1]
    if upper is not None:
        q = min(q, upper)
    return max(q, now) if math.isfinite(q) else now


def contenders(fits: Mapping[int, Fit], params: MaifParams = MaifParams()) -> set[int]:
    """The jobs the data cannot rule out as the search's best at ``search_lookahead``: every job without a
    curve yet, and every job whose potential (its band's top) reaches the bar, the highest of the jobs' band
    bottoms (each at most the job's quality now: a curve may stop rising at any time)."""
    at = search_lookahead(fits.values(), params)
    fitted = {j: f for j, f in fits.items() if f.model in ("power", "exp", "flat")}
    floor = {j: min(f.bounds(at)[0] if f.model != "flat" else f.last_quality, current_quality(f, params.upper))
             for j, f in fitted.items()}  # fmt: skip
    bar = max(floor.values(), default=-math.inf)
    return {j for j, f in fits.items() if j not in fitted or potential(f, at, params.upper) >= bar}


def share_top(ranked: Mapping[int, Assignment], shared: set[int], params: MaifParams = MaifParams()) -> None:
    """Give the ``shared`` jobs the top class together and map the others' order onto the classes below
    (``rank_class`` with one class less; plateaued jobs stay in ``bottom_class``). In place."""
    below = replace(params, top_class=max(params.top_class - 1, params.bottom_class))
    rest = sorted((j for j in ranked if j not in shared and not ranked[j].plateau), key=lambda j: ranked[j].rank)
    for j in shared:
        ranked[j].priority = params.top_class
        ranked[j].reasons.append("contender: the data cannot rule it out as the best, shares the top class")
    for i, j in enumerate(rest):
        ranked[j].priority = rank_class(i, len(rest), below)
        ranked[j].reasons.append("ruled out as the best for now: below the contenders")


@dataclass(frozen=True, slots=True)
class Previous:
    """What the last decision gave a job: the ranker's memory for hysteresis."""

    rank: int
    priority: int
    plateau: bool = False
    credit: float = 0.0  # objective chance: the job's credit in the top class's rotation (mlfc/policy/chance.py)
    held_from: int = -1  # objective chance: the iteration at which it took the top class (-1: not holding it)


@dataclass(slots=True)
class Assignment:
    rank: int  # 1 = served first
    priority: int
    score: float  # effective score (exploration prior substituted)
    plateau: bool
    reasons: list[str] = field(default_factory=list)
    credit: float = 0.0  # objective chance: credit in the top class's rotation after this decision
    held_from: int = -1  # objective chance: the iteration at which it took the top class (-1: not holding it)


def exploration_prior(scores: Mapping[int, Score], params: MaifParams = MaifParams()) -> float:
    known = [s.score for s in scores.values() if not s.exploring]
    q = float(np.quantile(known, params.exploration_quantile)) if known else 0.0
    return max(q, params.exploration_floor)


def rank_jobs(
    scores: Mapping[int, Score],
    previous: Mapping[int, Previous] | None = None,
    params: MaifParams = MaifParams(),
) -> dict[int, Assignment]:
    """Order jobs by score with hysteresis and map the order onto classes top_class..bottom_class.

    * Jobs keep last decision's order unless a lower job's score exceeds the one above it by more than
      ``hysteresis`` (relative): adjacent swaps only, which converges to score order outside the margin.
    * A job whose predicted gain is below ``plateau_gain`` has plateaued and goes to ``bottom_class``
      (it leaves the plateau only at twice that gain, so it does not flap on the threshold).
    * Jobs without a usable curve score as the ``exploration_quantile`` of the others: in a
      hyper-parameter search a new configuration needs early results before it can be judged.
    * With at most as many ranked jobs as classes each gets its own class; with more, the first keeps the
      top class alone and the others are split into equal tiers below it (``rank_class``).
    """
    previous = previous or {}
    prior = exploration_prior(scores, params)
    eff: dict[int, float] = {}
    plateau: dict[int, bool] = {}
    reasons: dict[int, list[str]] = {j: [] for j in scores}
    for j, s in scores.items():
        if s.exploring:
            eff[j] = prior
            plateau[j] = False
            reasons[j].append(f"no usable curve yet: exploration prior {prior:.4g}/s")
            continue
        eff[j] = s.score
        was = previous[j].plateau if j in previous else False
        limit = params.plateau_gain * (2.0 if was else 1.0)
        plateau[j] = s.gain < limit
        if plateau[j]:
            reasons[j].append(f"plateaued: predicted gain {s.gain:.3g} < {limit:.3g} over {params.horizon_s:g}s")

    known = sorted((j for j in scores if j in previous), key=lambda j: (previous[j].rank, j))
    new = sorted((j for j in scores if j not in previous), key=lambda j: (-eff[j], j))
    order = _place_new(known, new, eff)
    for j in new:
        reasons[j].append("new job: placed by score")

    # Plateaued jobs sink below every improving job regardless of hysteresis.
    m = 1.0 + params.hysteresis
    order = _settle([j for j in order if not plateau[j]], eff, m) + _settle([j for j in order if plateau[j]], eff, m)
    for i in range(len(order) - 1):
        up, lo = order[i], order[i + 1]
        if plateau[up] == plateau[lo] and eff[lo] > eff[up]:
            reasons[lo].append(
                f"held below job {up}: score {eff[lo]:.4g} within {params.hysteresis:.0%} of {eff[up]:.4g}"
            )

    active = sum(1 for j in order if not plateau[j])
    out: dict[int, Assignment] = {}
    for i, j in enumerate(order):
        cls = params.bottom_class if plateau[j] else rank_class(i, active, params)
        out[j] = Assignment(i + 1, cls, eff[j], plateau[j], reasons[j])
    return out


def rank_class(i: int, active: int, params: MaifParams = MaifParams()) -> int:
    """The class of the improving job at 0-based rank ``i`` of ``active``: one class per job while they
    fit; beyond, the first job keeps ``top_class`` alone and the others share the classes below in equal
    tiers. Strict priority makes a job fast only while nothing else is in its class: with shared top
    tiers, 6 jobs put two (12 jobs three) in the top class and its job ran 2.5-3.3x slower than alone
    (issue 26)."""
    k = params.top_class - params.bottom_class + 1
    if active <= k:
        return params.top_class - i
    if i == 0:
        return params.top_class
    return params.top_class - 1 - ((i - 1) * (k - 1)) // (active - 1)


def _place_new(known: list[int], new: list[int], eff: Mapping[int, float]) -> list[int]:
    """Known jobs in order, each new job (taken in ``new``'s order) inserted before the first job it outscores.

    ``new`` is sorted by falling score, so a new job never outscores one inserted before it and lands
    just before the first known job with a lower score: the first index where the known scores' running
    minimum drops below its score, found by bisection (O(n log n) in all). NaN scores defeat the sort's
    order; then the jobs are inserted one by one as the definition says.
    """
    if any(math.isnan(eff[j]) for j in new) or any(math.isnan(eff[j]) for j in known):
        order = list(known)
        for j in new:
            pos = next((i for i, k in enumerate(order) if eff[j] > eff[k]), len(order))
            order.insert(pos, j)
        return order
    # neg_min[i] = -min(eff of known[:i+1]) rises with i: bisect for the first index whose minimum < score
    neg_min: list[float] = []
    low = math.inf
    for k in known:
        low = min(low, eff[k])
        neg_min.append(-low)
    before: list[list[int]] = [[] for _ in range(len(known) + 1)]
    for j in new:
        before[bisect.bisect_right(neg_min, -eff[j])].append(j)
    order: list[int] = []
    for i, k in enumerate(known):
        order.extend(before[i])
        order.append(k)
    order.extend(before[len(known)])
    return order


def _settle(order: list[int], eff: Mapping[int, float], m: float) -> list[int]:
    """The order that adjacent swaps reach when a lower job moves up past one it outscores by the margin.

    A job ``lo`` passes ``up`` when ``eff[lo] > eff[up] * m and eff[lo] > eff[up]`` ("beats"). Beating is a
    strict partial order (transitive: ``eff[up] * m`` is never below ``eff[up]``), so every sequence of such
    swaps ends in the same order (terminating and locally confluent). This computes that order by merge
    sort in O(n log n): merging two settled halves A and B keeps each half's order, and a job of B ends
    just after the last job of A it does not beat at or after where the previous job of B ended, which a
    pointer over A's suffix maxima of ``eff * m`` finds in one pass.
    """
    n = len(order)
    if n < 2:
        return list(order)
    # Already in falling score order (every job new, or nothing moved): no job beats one above it.
    if all(eff[a] >= eff[b] for a, b in itertools.pairwise(order)):
        return list(order)
    # bar[j]: a job with score s beats j iff s > bar[j] (NaN: never beaten); score s < a NaN's: beats nobody
    bar = {j: math.inf if math.isnan(e := eff[j]) else max(e * m, e) for j in order}
    val = {j: -math.inf if math.isnan(e := eff[j]) else e for j in order}
    runs = [[j] for j in order]
    while len(runs) > 1:
        merged = [_merge(runs[i], runs[i + 1], bar, val) for i in range(0, len(runs) - 1, 2)]
        if len(runs) % 2:
            merged.append(runs[-1])
        runs = merged
    return runs[0]


def _merge(a: list[int], b: list[int], bar: Mapping[int, float], val: Mapping[int, float]) -> list[int]:
    suffix_max = [0.0] * len(a)
    top = -math.inf
    for i in range(len(a) - 1, -1, -1):
        top = max(top, bar[a[i]])
        suffix_max[i] = top
    out: list[int] = []
    p = 0  # a[:p] is placed; the next job of b goes after the last a[i] (i >= p - 1) it does not beat
    for j in b:
        v = val[j]
        q = p
        while q < len(a) and suffix_max[q] >= v:
            q += 1
        out.extend(a[p:q])
        out.append(j)
        p = q
    out.extend(a[p:])
    return out


@dataclass(frozen=True, slots=True)
class Window:
    """Iterations ``first..last`` of a job sent in class ``priority``: a straggler's boost here, an intent's
    iteration window in the controller (one type for both)."""

    first: int
    last: int
    priority: int


def straggler_window(
    worker_iterations: Mapping[int, int],
    job_priority: int,
    previous: Window | None = None,
    params: MaifParams = MaifParams(),
) -> Window | None:
    """Boosted class for the iterations a lagging worker still has to complete to catch up.

    ``worker_iterations`` maps worker rank to its last completed iteration. If the slowest worker is
    ``straggler_lag`` or more behind the fastest, packets of iterations ``slowest+1 .. fastest`` get
    ``job_priority + straggler_boost`` (capped at ``top_class``). A previous window is kept while the
    straggler is still inside it, so the intent does not change every iteration.
    """
    if len(worker_iterations) < 2:
        return None
    lo, hi = min(worker_iterations.values()), max(worker_iterations.values())
    boosted = min(job_priority + params.straggler_boost, params.top_class, contract.MAX_JOB_PRIORITY)
    if boosted <= job_priority:
        return None
    if previous is not None and previous.first <= lo + 1 <= previous.last and hi > lo:
        return Window(previous.first, previous.last, boosted)
    if hi - lo < params.straggler_lag:
        return None
    return Window(lo + 1, hi, boosted)
