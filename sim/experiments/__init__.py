"""The simulator's experiments: validation against the emulation, MLTCP at scale, circular
dependencies, MAIF time-to-accuracy, selective drop under incast, the speed benchmark, the scale
sweep and MLTCP's congestion regime, one module each; what they share is in ``common``.

Each experiment writes under ``out/<experiment>/``: one CSV of iteration records per run, a CSV of
its table, ``summary.md`` (the table, the command, the seeds) and PNG plots. Seeds are printed with
every run; progress goes to stderr.
"""

from __future__ import annotations

from collections.abc import Callable

from mlfc.sim.experiments.bench import benchmark
from mlfc.sim.experiments.circular import circular
from mlfc.sim.experiments.common import Context
from mlfc.sim.experiments.incast import incast
from mlfc.sim.experiments.maif import (
    MAIF_FABRIC,
    class_over_time,
    line_rate_time,
    maif_params,
    maif_search,
    search_jobs,
    search_times,
)
from mlfc.sim.experiments.mltcp_regime import mltcp_regime
from mlfc.sim.experiments.scale import at_scale
from mlfc.sim.experiments.scale_sweep import scale_sweep
from mlfc.sim.experiments.validation import small, validation

EXPERIMENTS: dict[str, Callable[[Context], str]] = {
    "validation": validation,
    "scale": at_scale,
    "circular": circular,
    "maif": maif_search,
    "incast": incast,
    "bench": benchmark,
    "scales": scale_sweep,
    "mltcp-regime": mltcp_regime,
}

__all__ = [
    "EXPERIMENTS",
    "MAIF_FABRIC",
    "Context",
    "at_scale",
    "benchmark",
    "circular",
    "class_over_time",
    "incast",
    "line_rate_time",
    "maif_params",
    "maif_search",
    "mltcp_regime",
    "scale_sweep",
    "search_jobs",
    "search_times",
    "small",
    "validation",
]
