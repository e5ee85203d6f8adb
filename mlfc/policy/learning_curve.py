"""Learning curves: a job's reported metric as "higher is better" quality, a saturating curve fitted to it with
the band of curves the data does not rule out, and what the curve predicts (MAIF's input, mlfc/policy/maif.py,
which re-exports these names).

Quality ``q``: accuracy as reported, loss turned into the fraction of the first loss removed (``to_quality``).
Two saturating models are fitted by linearised least squares over a grid of the shape parameter ``c`` (numpy
only):

* ``power``: ``q(t) = a - b * (t + 1) ** -c``
* ``exp``:   ``q(t) = a - b * exp(-c * (t - t0))``

For a fixed ``c`` both are linear in ``(a, b)``, so every grid point is a closed-form regression; the pair
with the smallest squared error wins. With fewer than ``min_points`` distinct iterations the fit is ``prior``
(no prediction); with no variation in the data it is ``flat`` (predicted gain 0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mlfc.policy.priority import PolicyError

ACCURACY = "accuracy"
LOSS = "loss"

# Shape-parameter grids. Power exponents cover very slow (0.02) to fast (4) saturation; exponential
# rates are relative to the observed span so the grid fits any iteration scale.
_POWER_GRID = np.geomspace(0.02, 4.0, 48)
_EXP_GRID_REL = np.geomspace(0.05, 40.0, 48)
_MAX_FIT_POINTS = 256  # older history is thinned: recent points shape the prediction most
# The confidence band: the shapes (grid rows) whose squared error is within the profile-likelihood bound of the
# best, SSE <= SSE_min (1 + chi2 / (n - 3)) with chi2 of one degree of freedom at 95 %, each with the 95 %
# interval of its linear fit's prediction (z standard errors).
_BAND_CHI2 = 3.84
_BAND_Z = 1.96


@dataclass(frozen=True, slots=True)
class Curve:
    """One saturating curve of a fit's band with what its prediction interval needs: the mean and the spread
    (sum of squared deviations) of its basis over the fitted iterations."""

    model: str  # power, exp
    a: float
    b: float
    c: float
    t0: float
    x_mean: float
    x_spread: float

    def basis(self, t: float) -> float:
        return (t + 1.0) ** -self.c if self.model == "power" else math.exp(-self.c * (t - self.t0))

    def interval(self, t: float, sigma: float, n: int, z: float = _BAND_Z) -> tuple[float, float]:
        x = self.basis(t)
        q = self.a - self.b * x
        half = z * sigma * math.sqrt(1.0 / n + (x - self.x_mean) ** 2 / self.x_spread)
        return q - half, q + half


@dataclass(frozen=True, slots=True)
class Fit:
    model: str  # power, exp, prior, flat
    a: float = 0.0
    b: float = 0.0
    c: float = 0.0
    t0: float = 0.0
    r2: float = 0.0
    points: int = 0
    last_iteration: int = 0
    last_quality: float = 0.0
    # The curves the data does not rule out (the fit's own among them) and the residuals' standard deviation
    band: tuple[Curve, ...] = ()
    sigma: float = 0.0

    @property
    def predictive(self) -> bool:
        return self.model in ("power", "exp", "flat")

    def predict(self, t: float) -> float:
        if self.model == "power":
            return self.a - self.b * (t + 1.0) ** -self.c
        if self.model == "exp":
            return self.a - self.b * math.exp(-self.c * (t - self.t0))
        return self.last_quality

    def bounds(self, t: float) -> tuple[float, float]:
        """The 95 % band of the quality at iteration ``t``: over the shapes the data allows, the lowest and the
        highest end of their predictions' intervals (the prediction itself without a band)."""
        if not self.band:
            q = self.predict(t)
            return q, q
        lo, hi = math.inf, -math.inf
        n = max(self.points, 1)
        for curve in self.band:
            a, b = curve.interval(t, self.sigma, n)
            if math.isfinite(a) and math.isfinite(b):
                lo, hi = min(lo, a), max(hi, b)
        if lo > hi:
            q = self.predict(t)
            return q, q
        return lo, hi

    def describe(self) -> str:
        if self.model == "power":
            return f"power q(t) = {self.a:.4g} - {self.b:.4g}*(t+1)^-{self.c:.3g}, R2={self.r2:.3f}, n={self.points}"
        if self.model == "exp":
            return (
                f"exp q(t) = {self.a:.4g} - {self.b:.4g}*exp(-{self.c:.3g}*(t-{self.t0:g})), "
                f"R2={self.r2:.3f}, n={self.points}"
            )
        if self.model == "flat":
            return f"flat at q={self.last_quality:.4g} over n={self.points} points"
        return f"prior: {self.points} point(s), too few to fit"


def to_quality(kind: str, values: Sequence[float], reference: float | None = None) -> np.ndarray:
    """Map reported metrics to "higher is better" quality comparable across jobs.

    Accuracy is used as is. Loss becomes ``1 - loss / reference`` (the fraction of the reference loss
    removed; the reference is the job's first reported loss) so loss jobs rank on a 0..1 scale like
    accuracy jobs; a non-positive reference falls back to ``-loss``.
    """
    v = np.asarray(values, dtype=float)
    if kind == ACCURACY:
        return v
    if kind != LOSS:
        raise PolicyError(f"metric kind {kind!r} is not {ACCURACY!r} or {LOSS!r}")
    ref = float(v[0]) if reference is None and len(v) else reference
    if ref is None or not ref > 0:
        return -v
    return 1.0 - v / ref


def _thin(t: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if len(t) <= _MAX_FIT_POINTS:
        return t, y
    half = _MAX_FIT_POINTS // 2
    idx = np.linspace(0, len(t) - half - 1, half).astype(int)
    keep = np.concatenate([idx, np.arange(len(t) - half, len(t))])
    return t[keep], y[keep]


def _linear_rows(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, ...]:
    """Least squares ``y = p + s * x[g]`` for every grid row g: arrays of p, s, the squared error (inf where
    the row cannot be fitted), the basis' mean and its spread (sum of squared deviations)."""
    n = y.shape[0]
    xm = x.mean(axis=1)
    dx = x - xm[:, None]
    var = np.einsum("gn,gn->g", dx, dx)
    ym = y.mean()
    cov = dx @ (y - ym)
    ok = var > 1e-24 * n  # a basis with no spread (e.g. exp underflow) cannot be fitted
    slope = np.where(ok, cov / np.where(ok, var, 1.0), 0.0)
    inter = ym - slope * xm
    resid = y[None, :] - (inter[:, None] + slope[:, None] * x)
    sse = np.where(ok, np.einsum("gn,gn->g", resid, resid), np.inf)
    return inter, slope, sse, xm, var


def fit_curve(points: Sequence[tuple[float, float]], min_points: int = 4, ceiling: float | None = 1.0) -> Fit:
    """Fit a saturating learning curve to ``(iteration, quality)`` points (any order, repeats allowed)."""
    if not len(points):
        return Fit("prior")
    arr = np.asarray(points, dtype=float).reshape(-1, 2)
    return fit_arrays(arr[:, 0], arr[:, 1], min_points, ceiling)


def fit_arrays(t: np.ndarray, y: np.ndarray, min_points: int = 4, ceiling: float | None = 1.0) -> Fit:
    """``fit_curve`` on arrays of iterations and qualities; non-finite points are ignored. The band keeps only
    curves whose asymptote is at most ``ceiling`` (quality cannot exceed it: accuracy 1, a loss removed whole)."""
    t, y = np.asarray(t, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(t) & np.isfinite(y)
    t, y = t[keep], y[keep]
    if not len(t):
        return Fit("prior")
    if np.any(np.diff(t) < 0):
        order = np.argsort(t, kind="stable")
        t, y = t[order], y[order]
    n = len(t)
    last_t, last_q = int(t[-1]), float(y[t == t[-1]].mean())
    distinct = int(np.count_nonzero(np.diff(t))) + 1
    if distinct < min_points:
        return Fit("prior", points=n, last_iteration=last_t, last_quality=last_q)
    sst = float(((y - y.mean()) ** 2).sum())
    if sst <= 1e-18 * n:
        return Fit("flat", a=last_q, r2=1.0, points=n, last_iteration=last_t, last_quality=last_q)
    tf, yf = _thin(t, y)
    sst_f = float(((yf - yf.mean()) ** 2).sum()) or sst

    # power: q = a - b (t+1)^-c ; regression on x = (t+1)^-c gives intercept a and slope -b
    xp = (np.maximum(tf, 0.0)[None, :] + 1.0) ** -_POWER_GRID[:, None]
    p = _linear_rows(xp, yf)
    # exp: q = a - b exp(-k (t - t0)), k relative to the span; t0 keeps the basis well conditioned
    t0 = float(tf[0])
    span = max(float(tf[-1] - t0), 1.0)
    ks = _EXP_GRID_REL / span
    xe = np.exp(-ks[:, None] * (tf - t0)[None, :])
    e = _linear_rows(xe, yf)
    # one row per grid point, power rows first: intercept (a), slope (-b), squared error, basis mean, spread
    inter, slope, sse, xm, var = (np.concatenate(pair) for pair in zip(p, e, strict=True))
    shape = np.concatenate([_POWER_GRID, ks])
    if not np.isfinite(sse).any():
        return Fit("flat", a=last_q, points=n, last_iteration=last_t, last_quality=last_q)

    def curve(g: int) -> Curve:
        model = "power" if g < len(_POWER_GRID) else "exp"
        return Curve(model, float(inter[g]), -float(slope[g]), float(shape[g]), t0 if model == "exp" else 0.0,
                     float(xm[g]), float(var[g]))  # fmt: skip

    g_best = int(np.argmin(sse))  # the first of equals: power before exp
    best, best_sse = curve(g_best), float(sse[g_best])
    nf = len(tf)
    dof = nf - 3
    bound = best_sse * (1.0 + _BAND_CHI2 / dof) if dof > 0 else math.inf
    inside = np.isfinite(sse) & (sse <= bound) & (inter <= ceiling if ceiling is not None else True)
    band = tuple(curve(int(g)) for g in np.flatnonzero(inside)) or (best,)
    sigma = math.sqrt(best_sse / dof) if dof > 0 else math.sqrt(sst_f / max(nf - 1, 1))
    r2 = max(0.0, 1.0 - best_sse / sst_f)
    return Fit(best.model, best.a, best.b, best.c, best.t0, r2, n, last_t, last_q, band, sigma)


def predicted_gain(fit: Fit, next_iters: float, upper: float | None = 1.0) -> float:
    """Quality gained from ``fit.last_iteration`` to ``fit.last_iteration + next_iters`` (>= 0).

    Both ends come from the curve (not the noisy last sample); ``upper`` caps extrapolation so an
    asymptote fitted above 100 % accuracy cannot promise gains that do not exist.
    """
    if not fit.predictive or fit.model == "flat" or next_iters <= 0:
        return 0.0
    now = fit.predict(fit.last_iteration)
    later = fit.predict(fit.last_iteration + next_iters)
    if upper is not None:
        now, later = min(now, upper), min(later, upper)
    gain = later - now
    return gain if math.isfinite(gain) and gain > 0 else 0.0


def current_quality(fit: Fit, upper: float | None = 1.0) -> float:
    """A job's quality now: the curve at its last iteration (less noisy than the sample), else the sample."""
    q = fit.predict(fit.last_iteration) if fit.model in ("power", "exp") else fit.last_quality
    return min(q, upper) if upper is not None and math.isfinite(q) else q
