"""Everything the simulator takes from the emulation lab, in one place.

The lab (``mlfc.lab``) and the shared topology data (``mlfc.topologies``) define the topologies, the job mixes
and treatments, the iteration records and the figures of merit (ideal iteration time, share of the
ideal gain, iteration of interleaving). The simulator reports the same quantities by the same
definitions, so it imports them instead of restating them; a rename of the lab touches this file only.
"""

from __future__ import annotations

from mlfc.lab.e2e.regime import signals_per_phase as lab_signals_per_phase
from mlfc.lab.emulator import PROFILES, JobProfile, gradients, synthetic_accuracy
from mlfc.lab.jobs import JobSpec
from mlfc.lab.mltcp import regime as regime_curve
from mlfc.lab.results import (
    IterationRecord,
    JobSummary,
    format_table,
    percentile,
    plot_timeline,
    read_csv,
    summarise,
    write_csv,
)
from mlfc.lab.scenarios import (
    BOTTLENECK_PPS,
    MIXES,
    TREATMENTS,
    Mix,
    Treatment,
    ideal_iteration_times,
    interleaving_iteration,
    share_of_ideal_gain,
)
from mlfc.topologies import Host, Link, Topology, dumbbell
from mlfc.topologies import leaf_spine as lab_leaf_spine

__all__ = [
    "BOTTLENECK_PPS",
    "MIXES",
    "PROFILES",
    "TREATMENTS",
    "Host",
    "IterationRecord",
    "JobProfile",
    "JobSpec",
    "JobSummary",
    "Link",
    "Mix",
    "Topology",
    "Treatment",
    "dumbbell",
    "format_table",
    "gradients",
    "ideal_iteration_times",
    "interleaving_iteration",
    "lab_leaf_spine",
    "lab_signals_per_phase",
    "percentile",
    "plot_timeline",
    "read_csv",
    "regime_curve",
    "share_of_ideal_gain",
    "summarise",
    "synthetic_accuracy",
    "write_csv",
]
