"""Online tuning of MLTCP's F: each sender finds its slope and intercept from what it observes.

No operator sweep: the sender measures its own iteration time (start to start) and runs a pattern
search on a log2 grid of (slope, intercept). It holds a point for ``window`` iterations, then tries
one neighbour (slope x2, /2, intercept x2, /2, in turn) for as long; a neighbour whose mean iteration
time beats the current point's by more than ``margin`` becomes the current point, otherwise the next
neighbour is tried. When every neighbour of a point has lost, the search has converged and the point
is kept; it reopens if the iteration time drifts ``reopen`` above what the point achieved (the mix of
jobs changed). The first iterations after a change are discarded (``settle``): F acts through the
offset between jobs, which needs an iteration or two to move.

The grid spans the sweep's range (docs/results.md: slopes 1..16, intercepts 1/8..1). Each job tunes on
its own; two jobs tuning together see each other's moves as noise, which the windows average out.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace

from mlfc.policy.mltcp import MltcpParams
from mlfc.policy.priority import PolicyError

SLOPES = (1.0, 2.0, 4.0, 8.0, 16.0)
INTERCEPTS = (0.125, 0.25, 0.5, 1.0)
_MOVES = ((1, 0), (-1, 0), (0, 1), (0, -1))  # grid steps: slope up/down, intercept up/down


@dataclass(frozen=True, slots=True)
class TuningParams:
    window: int = 3  # iterations measured per point
    settle: int = 1  # iterations discarded after each change of F
    margin: float = 0.02  # a neighbour must be this much faster (relative) to win
    reopen: float = 0.10  # a converged point is searched from again after this much slow-down

    def __post_init__(self) -> None:
        if self.window < 1 or self.settle < 0:
            raise PolicyError(f"window={self.window} must be >= 1 and settle={self.settle} >= 0")
        if not (0 <= self.margin < 1 and 0 < self.reopen < 10):
            raise PolicyError(f"margin={self.margin} must be in [0, 1) and reopen={self.reopen} in (0, 10)")


def _nearest(values: tuple[float, ...], v: float) -> int:
    return min(range(len(values)), key=lambda i: abs(math.log2(values[i]) - math.log2(v)))


@dataclass
class FTuner:
    """Feed ``observe(iteration_seconds)`` once per completed iteration; ``params`` is F to use now."""

    start: MltcpParams = field(default_factory=MltcpParams)
    tuning: TuningParams = field(default_factory=TuningParams)

    def __post_init__(self) -> None:
        self._here = (_nearest(SLOPES, self.start.slope), _nearest(INTERCEPTS, self.start.intercept))
        self._trying: tuple[int, int] | None = None
        self._move = 0  # next neighbour to try
        self._tried_move = 0
        self._losses = 0  # neighbours that lost in a row
        self._here_time: float | None = None  # mean iteration time measured at the current point
        self._samples: list[float] = []
        self._skip = self.tuning.settle
        self.converged = False
        self.history: list[tuple[MltcpParams, float]] = []  # (point, mean iteration time) per window

    @property
    def params(self) -> MltcpParams:
        s, i = self._trying or self._here
        return replace(self.start, slope=SLOPES[s], intercept=INTERCEPTS[i])  # the shape stays the start's

    def observe(self, iteration_s: float) -> MltcpParams:
        if not (math.isfinite(iteration_s) and iteration_s > 0):
            return self.params
        if self._skip > 0:
            self._skip -= 1
            return self.params
        self._samples.append(iteration_s)
        if len(self._samples) < self.tuning.window:
            return self.params
        mean = statistics.fmean(self._samples)
        self._samples = []
        self.history.append((self.params, mean))
        if self._trying is not None:
            self._judge(mean)
        elif self._here_time is None:
            self._here_time = mean
            self._next_neighbour()
        elif self.converged:
            if mean > self._here_time * (1 + self.tuning.reopen):
                self.converged, self._losses, self._here_time = False, 0, mean
                self._next_neighbour()
            else:
                self._here_time = min(self._here_time, mean)
        return self.params

    def _judge(self, mean: float) -> None:
        assert self._here_time is not None and self._trying is not None
        if mean < self._here_time * (1 - self.tuning.margin):
            self._here, self._here_time, self._losses = self._trying, mean, 0
            self._move = self._tried_move  # keep going the way that paid off
        else:
            self._losses += 1
        self._trying = None
        self._skip = self.tuning.settle
        if self._losses >= len(_MOVES):
            self.converged = True
        else:
            self._next_neighbour()

    def _next_neighbour(self) -> None:
        """Try the next neighbour on the grid (skipping steps off its edge)."""
        for _ in range(len(_MOVES)):
            ds, di = _MOVES[self._move]
            self._tried_move = self._move
            self._move = (self._move + 1) % len(_MOVES)
            s, i = self._here[0] + ds, self._here[1] + di
            if 0 <= s < len(SLOPES) and 0 <= i < len(INTERCEPTS):
                self._trying = (s, i)
                self._skip = self.tuning.settle
                return
            self._losses += 1  # an edge counts as a lost neighbour
        self.converged = True
