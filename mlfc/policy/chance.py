"""MAIF's fourth search objective, ``chance``: the top class time-shared in proportion to each job's chance of
being the search's best configuration (issue 47 item 2, "a ranking that survives late crossings").

Plain functions with no I/O and no randomness (mlfc/policy/maif.py is the policy's entry; coordinator/decision.py
calls ``chance_rank`` when ``MaifParams.objective == "chance"``):

1. ``best_chances(fits, params)``: every job with a usable curve is judged at the search's next doubling
   (``maif.search_lookahead``) as a normal ``N(mu_j, sigma_j)``: ``mu_j`` the middle of the fit's 95 % band there
   (``Fit.bounds``, capped at ``upper``; never below its quality now), ``sigma_j = max(half-width / 1.96,
   chance_sigma_floor)`` (the floor keeps a flat-lined job some uncertainty). ``P(j best) = ∫ φ_j(x)
   Π_{k≠j} Φ_k(x) dx``, by the trapezoid rule on a fixed grid (deterministic), normalised to sum to 1.
2. ``rotate(chances, credits, params)``: the jobs with ``P >= chance_threshold`` (the contenders) time-share the
   top class by smooth weighted round robin: each adds its share ``P_j / Σ P`` of the contenders to its credit,
   the one with the most credit holds the top class this interval and pays 1. Over ``n`` intervals a job with
   share ``s`` holds it ``s·n ± 1`` times, so a contender waits at most about ``1/s`` intervals, and a job below
   the threshold never holds it (its credit is reset to 0).
3. ``chance_rank(...)``: the holder alone in the top class (strict priority is fast only alone, issue 26), the
   other contenders below it by chance, then the jobs without a curve (the exploration prior: unknown, so
   above the jobs judged unlikely), then the others by chance and their own gain (the sum objective's score),
   plateaued non-contenders in ``bottom_class``. A turn lasts ``chance_quantum`` of the holder's iterations (the
   coordinator decides on every report). The credit and the turn's start travel in ``maif.Previous``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from mlfc.policy.learning_curve import Fit, current_quality
from mlfc.policy.maif import Assignment, MaifParams, Previous, Score, rank_class, rank_jobs, search_lookahead

_Z95 = 1.959963984540054
_GRID_MAX = 20001  # grid points of the integral at most
_DEFAULT = MaifParams()


def lookahead_normal(fit: Fit, at: float, params: MaifParams = _DEFAULT) -> tuple[float, float]:
    """``(mu, sigma)`` of the job's quality at iteration ``at``: the middle of its 95 % band there (capped at
    ``upper``, never below its quality now) and the band's half-width over 1.96, at least ``chance_sigma_floor``."""
    now = current_quality(fit, params.upper)
    lo, hi = fit.bounds(at) if fit.model in ("power", "exp") and at > fit.last_iteration else (now, now)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        lo, hi = now, now
    if params.upper is not None:
        lo, hi = min(lo, params.upper), min(hi, params.upper)
    # The band's middle, not the fit's own prediction: the band is asymmetric around it (the fit can even lie
    # outside it, the band's curves being capped at quality 1), and a normal whose 95 % interval is the band is
    # centred on its middle.
    mu = max((lo + hi) / 2.0, now)
    return mu, max((hi - lo) / 2.0 / _Z95, params.chance_sigma_floor)


def best_chances(fits: Mapping[int, Fit], params: MaifParams = _DEFAULT) -> dict[int, float]:
    """Each job's probability of being the best at the search's next doubling (jobs with a usable curve only;
    they sum to 1). A pure, deterministic function of the fits."""
    fitted = sorted(j for j, f in fits.items() if f.predictive)
    if not fitted:
        return {}
    if len(fitted) == 1:
        return {fitted[0]: 1.0}
    at = search_lookahead((fits[j] for j in fitted), params)
    mu, sd = np.array([lookahead_normal(fits[j], at, params) for j in fitted]).T
    lo, hi = float(np.min(mu - 8.0 * sd)), float(np.max(mu + 8.0 * sd))
    n = int(min(_GRID_MAX, max(201, math.ceil((hi - lo) / (float(np.min(sd)) / 20.0)) + 1)))
    x = np.linspace(lo, hi, n)
    z = (x[None, :] - mu[:, None]) / sd[:, None]
    pdf = np.exp(-0.5 * z * z) / (sd[:, None] * math.sqrt(2.0 * math.pi))
    cdf = 0.5 * np.vectorize(math.erfc)(-z / math.sqrt(2.0))
    log_cdf = np.log(np.maximum(cdf, 1e-300))
    others = np.exp(log_cdf.sum(axis=0)[None, :] - log_cdf)  # Π_{k≠j} Φ_k(x)
    p = np.trapezoid(pdf * others, x, axis=1)
    p = np.maximum(p, 0.0)
    total = float(p.sum())
    if not (math.isfinite(total) and total > 0):
        best = max(range(len(fitted)), key=lambda i: (mu[i], -fitted[i]))
        return {j: float(i == best) for i, j in enumerate(fitted)}
    return {j: float(p[i] / total) for i, j in enumerate(fitted)}


def rotate(
    chances: Mapping[int, float], credits: Mapping[int, float], params: MaifParams = _DEFAULT
) -> tuple[int | None, dict[int, float]]:
    """This interval's holder of the top class and every job's credit after it (smooth weighted round robin over
    the contenders, ``P >= chance_threshold``; the others' credit is 0). Deterministic: ties go to the larger
    chance, then the lower job id."""
    shared = {j: p for j, p in chances.items() if p >= params.chance_threshold}
    out = {j: 0.0 for j in chances}
    if not shared:
        return None, out
    total = sum(shared.values())
    mean = sum(credits.get(j, 0.0) for j in shared) / len(shared)  # re-centred: the set of contenders may change
    for j, p in shared.items():
        c = credits.get(j, 0.0)
        out[j] = (c - mean if math.isfinite(c) else 0.0) + p / total
    holder = max(shared, key=lambda j: (out[j], shared[j], -j))
    out[holder] -= 1.0
    return holder, out


def chance_rank(
    fits: Mapping[int, Fit],
    scores: Mapping[int, Score],
    previous: Mapping[int, Previous] | None = None,
    params: MaifParams = _DEFAULT,
    progress: Mapping[int, int] | None = None,
) -> dict[int, Assignment]:
    """The ranking of the ``chance`` objective (module doc). ``scores`` are the jobs' own (``score_job``:
    the sum objective's), ``previous`` the last decision's memory with the credits, ``progress`` each job's
    latest iteration: the holder keeps the top class until it has run ``chance_quantum`` iterations in it (the
    coordinator decides on every report; a turn is counted in the holder's iterations). Without a job's
    progress every decision is a turn."""
    previous = previous or {}
    progress = progress or {}
    base = rank_jobs(scores, previous, params)  # plateau flags, the exploration prior, the own-gain order
    chances = best_chances({j: fits[j] for j in scores}, params)
    shared = {j for j, p in chances.items() if p >= params.chance_threshold}
    held = [j for j in shared if j in previous and previous[j].held_from >= 0]
    if held and held[0] in progress and progress[held[0]] - previous[held[0]].held_from < params.chance_quantum:
        holder, held_from = held[0], previous[held[0]].held_from  # its turn is not over: nothing accrues
        credits = {j: (previous[j].credit if j in shared and j in previous else 0.0) for j in chances}
    else:
        holder, credits = rotate(chances, {j: m.credit for j, m in previous.items()}, params)
        held_from = progress.get(holder, 0) if holder is not None else -1

    def key(j: int) -> tuple[int, float, float, int]:
        if j == holder:
            return (0, 0.0, 0.0, j)
        if j in shared:
            return (1, -chances[j], 0.0, j)
        if j not in chances:  # no curve yet: the exploration prior
            return (2, 0.0, float(base[j].rank), j)
        if base[j].plateau:
            return (4, -chances[j], -base[j].score, j)
        return (3, -chances[j], -base[j].score, j)

    order = sorted(scores, key=key)
    active = sum(1 for j in order if key(j)[0] < 4)
    out: dict[int, Assignment] = {}
    for i, j in enumerate(order):
        a = base[j]
        tier = key(j)[0]
        cls = params.bottom_class if tier == 4 else rank_class(i, active, params)
        reasons = [r for r in a.reasons if not r.startswith("held below")]
        if j in chances:
            reasons.append(f"chance of being the best at the search's next doubling: {chances[j]:.1%}")
        if tier == 0:
            reasons.append(f"holds the shared top class this interval (credit {credits[j]:+.2f})")
        elif tier == 1:
            reasons.append(f"contender: shares the top class in proportion to its chance (credit {credits[j]:+.2f})")
        elif tier in (3, 4):
            reasons.append(f"below the threshold {params.chance_threshold:.0%}: ranked by chance, then own gain")
        out[j] = Assignment(
            i + 1, cls, a.score, tier == 4, reasons, credits.get(j, 0.0), held_from if tier == 0 else -1
        )
    return out
