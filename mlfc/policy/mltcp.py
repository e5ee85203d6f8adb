"""MLTCP's augmentation: scale a congestion controller's additive increase by
F(bytes_ratio) = slope * bytes_ratio + intercept, bytes_ratio = bytes sent this iteration /
bytes per iteration, clamped to [0, 1] (arXiv 2402.09589). A flow further into its iteration
grows faster, so competing jobs drift apart into interleaved communication phases.

F's *shape* generalises the paper's line: F = intercept + slope * g(bytes_ratio), g rising from
g(0) = 0 to g(1) = 1, so every shape spans the same range [intercept, intercept + slope]:

* ``linear``  g(r) = r (the paper's F; the default);
* ``power``   g(r) = r ** exponent (exponent < 1: F rises early, so a flow that is slightly ahead
  at the start of a phase, where jobs that collide begin together, is already much stronger);
* ``step``    g(r) = 1 from r >= knee, else 0 (two levels: strict-priority-like past the knee);
* ``sigmoid`` a logistic step centred on knee (width ~0.2 of the iteration), rescaled to g(0) = 0,
  g(1) = 1.

F's *rule* says where F acts (``mltcp_scales``):

* ``increase`` (the paper's): the additive increase is multiplied by F; the decrease is unchanged. n flows
  late in their iterations add n * F(1) segments per RTT between them, so the step's 16.5 that separates
  two jobs over-drives four.
* ``bounded``: the increase is multiplied by F / F(1) and the multiplicative decrease by F(0) / F. No flow
  grows faster than the plain algorithm (n flows add at most n segments per RTT, as n unmodified flows
  do), and the ranking comes from the decrease: with losses seen together, a window settles where its
  growth between cuts equals its cut, so the shares of two flows are in the ratio (F_a / F_b) ** 2: 64x
  between the ends of 7:1, and F keeps ranking flows over the whole iteration.
* ``bounded-start``: ``bounded``, and slow start's growth is multiplied by F / F(1) too. Jobs whose
  phases collide restart from an idle window together, in slow start, where the other rules leave F out:
  here a flow that is behind ramps up F(1) / F times slower than one ahead, so the ranking acts from the
  phase's first round trip instead of after its first loss.

Text form (CLIs, sweep grids, CSV columns): ``SLOPE:INTERCEPT`` for the line, else
``SLOPE:INTERCEPT:SHAPE=ARG``, e.g. ``2:0.5:power=0.5``, ``4:0.25:step=0.2``; ``:bounded`` at the end
for that rule, e.g. ``7:1:bounded`` (``format_params`` / ``parse_params``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from mlfc.policy.priority import PolicyError

SHAPES = ("linear", "power", "step", "sigmoid")
RULES = ("increase", "bounded", "bounded-start")
# The argument each shape takes in the text form, and its default.
SHAPE_ARG = {"power": "exponent", "step": "knee", "sigmoid": "knee"}
SIGMOID_STEEPNESS = 12.0  # per unit of bytes_ratio: the logistic rises from 12 % to 88 % over knee +- 1/6


@dataclass(frozen=True, slots=True)
class MltcpParams:
    # The line F in [0.5, 2.5]: the best linear point of `make sweep` on two compatible jobs
    # (docs/results.md); the paper's own values are unverified. Reno and CUBIC default to a step
    # (default_params below).
    slope: float = 2.0
    intercept: float = 0.5
    shape: str = "linear"  # one of SHAPES (module docstring)
    exponent: float = 1.0  # power: g(r) = r ** exponent
    knee: float = 0.5  # step, sigmoid: the bytes_ratio where F rises
    rule: str = "increase"  # one of RULES (module docstring)

    def __post_init__(self) -> None:
        for name in ("slope", "intercept", "exponent", "knee"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v)):
                raise PolicyError(f"{name}={v!r} must be a finite number")
        if self.slope < 0:
            raise PolicyError(f"slope={self.slope} must be >= 0 (F increases with bytes_ratio)")
        if self.intercept <= 0:
            raise PolicyError(f"intercept={self.intercept} must be > 0 (F(0) must still grow the window)")
        if self.rule not in RULES:
            raise PolicyError(f"rule={self.rule!r}: expected one of {', '.join(RULES)}")
        if self.shape not in SHAPES:
            raise PolicyError(f"shape={self.shape!r}: expected one of {', '.join(SHAPES)}")
        if not 0 < self.exponent <= 16:
            raise PolicyError(f"exponent={self.exponent} must be in (0, 16]")
        if not 0 < self.knee < 1:
            raise PolicyError(f"knee={self.knee} must be in (0, 1) (a fraction of the iteration's bytes)")

    @property
    def linear(self) -> bool:
        return self.shape == "linear" or (self.shape == "power" and self.exponent == 1)


# Each controller's default F: the best point of `make sweep` for it (docs/results.md, "MLTCP-Reno/CUBIC to
# 90 % and many jobs"). Reno and CUBIC take the step: the first flow past 20 % of its iteration grows 33x
# faster than one below, so colliding jobs separate within one iteration. DCQCN keeps MltcpParams()'s line
# (its rule puts F in the cut exponent too, measured with 2:0.5 only), and so do ns-3, which computes only
# the line, and kernel MLTCP, which takes every shape (a table of this module's F) but was measured with lines.
_CC_DEFAULTS = {
    "reno": MltcpParams(16.0, 0.5, "step", knee=0.2),
    "cubic": MltcpParams(16.0, 0.5, "step", knee=0.2),
    # DCTCP (user space, hosts/cc/dctcp.py) is Reno's window with DCTCP's cut, and F acts on the same additive
    # increase: Reno's step for now, unmeasured (no `make sweep` of DCTCP yet)
    "dctcp": MltcpParams(16.0, 0.5, "step", knee=0.2),
}


def default_params(cc: str) -> MltcpParams:
    """The default F for congestion control ``cc`` (MltcpParams() for any other)."""
    return _CC_DEFAULTS.get(cc, MltcpParams())


# Every command line that takes F takes it as one value in the text form (`--f`), defaulting to its family's.
F_HELP = (
    "MLTCP's F as SLOPE:INTERCEPT[:SHAPE=ARG][:RULE], e.g. 2:0.5, 16:0.5:step=0.1, 2:0.5:power=0.5, 7:1:bounded "
    "(mlfc.policy.mltcp; default: the congestion control's, default_params)"
)


def f_argument(text: str) -> str:
    """An argparse ``type`` for ``--f``: the text, checked (argparse reports a PolicyError's message)."""
    import argparse  # only command lines need it

    try:
        parse_params(text)
    except PolicyError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def resolve_params(text: str | None, cc: str) -> MltcpParams:
    """F from a ``--f`` value, or the family's default when none was given."""
    return default_params(cc) if text is None else parse_params(text)


# Weight of the iteration that just ended in the bytes-per-iteration EWMA: the default of the
# user-space MltcpTracker / SenderConfig and of kernel MLTCP's IterationDetection.
EWMA_WEIGHT = 0.5


@dataclass(frozen=True, slots=True)
class IterationDetection:
    """How kernel MLTCP (mlfc.hosts.kernel) cuts a TCP connection's traffic into iterations when the
    application says nothing: new data after the pipe was empty for longer than
    max(idle_rtts x smoothed RTT, idle_min seconds) starts an iteration; bytes per iteration is an
    EWMA of the bytes acknowledged in earlier iterations, weight ``ewma_weight`` for the last one.

    idle_min sits above the gaps between one iteration's messages (buckets, collective steps: well
    under a millisecond on a datacentre path) and below a compute phase (tens of milliseconds and up).

    ``group``: one progress per job instead of per connection. The connections with the same network
    namespace, local address, remote address and remote port (one job's connections to one peer service)
    share one bytes_ratio: the job's bytes acknowledged this iteration over the job's bytes per iteration
    (an EWMA of the job's totals), and the job's iteration begins when one of them starts an iteration
    after the whole job was idle for the gap above. Off by default (unmeasured)."""

    idle_rtts: float = 4.0
    idle_min: float = 0.005
    ewma_weight: float = EWMA_WEIGHT
    group: bool = False

    def __post_init__(self) -> None:
        for name in ("idle_rtts", "idle_min", "ewma_weight"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v)):
                raise PolicyError(f"{name}={v!r} must be a finite number")
        if self.idle_rtts < 0:
            raise PolicyError(f"idle_rtts={self.idle_rtts} must be >= 0")
        if not 0 < self.idle_min <= 60:
            raise PolicyError(f"idle_min={self.idle_min} must be in (0, 60] seconds")
        if not 0 < self.ewma_weight <= 1:
            raise PolicyError(f"ewma_weight={self.ewma_weight} must be in (0, 1]")
        if not isinstance(self.group, bool):
            raise PolicyError(f"group={self.group!r} must be True or False")


def bytes_ratio(bytes_sent: float, bytes_per_iteration: float) -> float:
    if bytes_per_iteration <= 0 or not math.isfinite(bytes_sent):
        return 0.0
    return max(0.0, min(1.0, bytes_sent / bytes_per_iteration))


def _logistic(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def shape_value(ratio: float, params: MltcpParams) -> float:
    """g(bytes_ratio) in [0, 1] for the params' shape; ratio already clamped to [0, 1]."""
    if params.shape == "linear":
        return ratio
    if params.shape == "power":
        return ratio**params.exponent
    if params.shape == "step":
        return 1.0 if ratio >= params.knee else 0.0
    lo = _logistic(-SIGMOID_STEEPNESS * params.knee)
    hi = _logistic(SIGMOID_STEEPNESS * (1 - params.knee))
    return (_logistic(SIGMOID_STEEPNESS * (ratio - params.knee)) - lo) / (hi - lo)


def mltcp_factor(ratio: float, params: MltcpParams = MltcpParams()) -> float:
    """F(bytes_ratio) = intercept + slope * g(bytes_ratio); ratio is clamped to [0, 1]."""
    r = 0.0 if ratio != ratio else max(0.0, min(1.0, ratio))
    return params.slope * shape_value(r, params) + params.intercept


def mltcp_scales(ratio: float, params: MltcpParams = MltcpParams()) -> tuple[float, float]:
    """(increase multiplier, decrease multiplier) of a flow at ``ratio`` under the params' rule: the
    controller multiplies its additive (or cubic) increase by the first and the size of its multiplicative
    cut (1 - beta) by the second."""
    f = mltcp_factor(ratio, params)
    if params.rule == "increase":
        return f, 1.0
    return f / (params.intercept + params.slope), params.intercept / f


def mltcp_slow_start_scale(ratio: float, params: MltcpParams = MltcpParams()) -> float:
    """What the rule multiplies slow start's growth by: F / F(1) under ``bounded-start``, else 1."""
    if params.rule != "bounded-start":
        return 1.0
    return mltcp_factor(ratio, params) / (params.intercept + params.slope)


def format_shape(params: MltcpParams) -> str:
    """The shape alone, as parse_shape reads it: 'linear', 'power=0.5', 'step=0.2', ..."""
    if params.shape == "linear":
        return "linear"
    return f"{params.shape}={getattr(params, SHAPE_ARG[params.shape]):g}"


def format_params(params: MltcpParams) -> str:
    """``SLOPE:INTERCEPT`` for the line, ``SLOPE:INTERCEPT:SHAPE=ARG`` for the other shapes."""
    head = f"{params.slope:g}:{params.intercept:g}"
    if params.shape != "linear":
        head = f"{head}:{format_shape(params)}"
    return head if params.rule == "increase" else f"{head}:{params.rule}"


def parse_shape(text: str) -> dict[str, object]:
    """'linear', 'power=0.5', 'step=0.2', 'sigmoid=0.3' -> MltcpParams keyword arguments, range-checked.
    Raises PolicyError on anything else."""
    name, sep, arg = text.strip().partition("=")
    name = name.strip()
    if name not in SHAPES:
        raise PolicyError(f"shape {text!r}: expected one of {', '.join(SHAPES)} (power=E, step=K, sigmoid=K)")
    if name == "linear":
        if sep:
            raise PolicyError(f"shape {text!r}: linear takes no argument")
        return {"shape": "linear"}
    if not sep:
        raise PolicyError(f"shape {text!r}: {name} needs its {SHAPE_ARG[name]}, e.g. {name}=0.5")
    try:
        value = float(arg)
    except ValueError:
        raise PolicyError(f"shape {text!r}: {SHAPE_ARG[name]} {arg!r} is not a number") from None
    kwargs: dict[str, object] = {"shape": name, SHAPE_ARG[name]: value}
    MltcpParams(**kwargs)  # type: ignore[arg-type]  # the range checks, before anyone uses it
    return kwargs


def parse_params(text: str) -> MltcpParams:
    """The inverse of format_params: 'SLOPE:INTERCEPT[:SHAPE[=ARG]][:RULE]'. Raises PolicyError."""
    parts = text.strip().split(":")
    rule = {}
    if len(parts) > 2 and parts[-1].strip() in RULES:
        rule = {"rule": parts.pop().strip()}
    if len(parts) not in (2, 3):
        raise PolicyError(
            f"F {text!r}: expected SLOPE:INTERCEPT[:SHAPE=ARG][:RULE], e.g. 2:0.5, 2:0.5:power=0.5 or 7:1:bounded"
        )
    try:
        slope, intercept = float(parts[0]), float(parts[1])
    except ValueError:
        raise PolicyError(f"F {text!r}: slope and intercept must be numbers") from None
    shape = parse_shape(parts[2]) if len(parts) == 3 else {}
    return MltcpParams(slope, intercept, **shape, **rule)  # type: ignore[arg-type]


def shift(delta: float, period: float, comm_fraction: float, params: MltcpParams = MltcpParams()) -> float:
    """How far two identical MLTCP jobs drift apart in one iteration (HotNets'24's shift equation):
    ``Shift(D) = S * D * (aT - D) / (aT * I + D * S)`` for an offset ``D`` between their communication
    starts, iteration time ``T``, communication fraction ``a``, slope ``S`` and intercept ``I``. Zero at
    D = 0 (unstable) and at D = aT (interleaved, stable); small offsets grow by about (1 + S/I) per
    iteration. Derived for the linear F only: other shapes raise PolicyError."""
    if not params.linear:
        raise PolicyError(f"the shift equation holds for a linear F, not {format_params(params)}")
    at = comm_fraction * period
    if not 0 < delta < at:
        return 0.0
    s, i = params.slope, params.intercept
    return s * delta * (at - delta) / (at * i + delta * s)
