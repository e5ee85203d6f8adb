"""The scale sweep's conclusions on hand-made rows (pure Python: no ns-3 needed): where the figures settle,
the events per unit of work, and the published table."""

from __future__ import annotations

from dataclasses import asdict, fields, replace

import pytest

from mlfc.lab.sim_figures import render_sim_scale
from mlfc.lab.summaries import load
from mlfc.sim.experiments.bench import full_size
from mlfc.sim.experiments.scale_sweep import (
    TOLERANCE,
    SweepRow,
    conclusion,
    events_per_unit,
    settled_scale,
)

SWEEP_FIELDS = [f.name for f in fields(SweepRow)]

BASE = SweepRow(scale=0.01, cc="reno", jobs=8, seed=1, iterations=20, base_avg_ms=3.0, mltcp_avg_ms=3.0,
                avg_speedup=1.0, p99_speedup=1.0, ideal_speedup=1.2, share=0.0, links_shared=2,
                interleaved_mltcp=1, interleaved_base=1, mltcp_from="3", base_from="3", events=1_000_000,
                wall_s=2.0, hosts="jumbo")  # fmt: skip


def at(scale: float, speedup: float, seed: int = 1, **kw: float) -> SweepRow:
    return replace(BASE, scale=scale, avg_speedup=speedup, seed=seed, **kw)


def test_settles_where_every_larger_scale_agrees() -> None:
    rows = [at(0.005, 0.90), at(0.01, 1.00), at(0.02, 1.10), at(0.05, 1.12), at(0.1, 1.11)]
    assert settled_scale(rows) == 0.02


def test_a_later_change_unsettles_a_smaller_scale() -> None:
    # 0.02 and 0.05 agree, but 0.1 moves away from both: only the largest pair could settle, and it does not
    rows = [at(0.02, 1.10), at(0.05, 1.11), at(0.1, 1.11 + 2 * TOLERANCE)]
    assert settled_scale(rows) is None


def test_seed_means_are_compared_not_single_seeds() -> None:
    rows = [at(0.05, 1.00, seed=1), at(0.05, 1.10, seed=2), at(0.1, 1.05, seed=1), at(0.1, 1.06, seed=2)]
    assert settled_scale(rows) == 0.05


def test_the_ideal_counts_too() -> None:
    rows = [at(0.05, 1.1, ideal_speedup=1.5), at(0.1, 1.1, ideal_speedup=1.2)]
    assert settled_scale(rows) is None


def test_events_per_unit_of_work() -> None:
    # two runs of 8 jobs x 20 iterations at scale 0.01: 1e6 / (2 x 8 x 20 x 0.01)
    assert events_per_unit([BASE]) == 312_500
    assert events_per_unit([replace(BASE, events=0)]) is None  # resumed runs carry no events


def test_conclusion_per_configuration() -> None:
    rows = [
        at(0.05, 1.1),
        at(0.1, 1.1),
        replace(at(0.05, 1.0), jobs=16),
        replace(at(0.1, 1.3), jobs=16),
        replace(at(0.05, 1.0), hosts="tso", events=100_000),
        replace(at(0.1, 1.2), hosts="tso", events=200_000),
    ]
    meta = conclusion(rows)
    assert meta["settled_from"] == {"reno, 8 jobs, 20 iterations": 0.05, "reno, 16 jobs, 20 iterations": None,
                                    "reno, 8 jobs, 20 iterations, hosts tso": None}  # fmt: skip
    assert meta["tolerance"] == TOLERANCE
    assert meta["events_per_job_iteration_per_scale"] == {"jumbo": 31_250, "tso": 6_250}  # per host model


def test_published_table() -> None:
    rows = [{**asdict(at(s, 1.05, seed=k)), "command": "python -m mlfc.sim scales"} for s in (0.05, 0.1)
            for k in (1, 2)]  # fmt: skip
    text = render_sim_scale({"rows": rows, **conclusion([at(0.05, 1.05), at(0.1, 1.05)])})
    assert "| 0.05 | reno, 8 jobs, 20 iterations, hosts jumbo | 1, 2 | 3, 3 | 1.050, 1.050 |" in text
    assert "settle from scale **0.05**" in text


def test_events_grow_in_proportion_to_the_scale_in_the_published_sweep() -> None:
    # bench/sim_bench.py projects the full-size wall time from a small run on this premise
    rows = [SweepRow(**{k: r[k] for k in SWEEP_FIELDS}) for r in load("sim-scale")["rows"] if r["hosts"] == "jumbo"]
    per = {r.scale: r.events / (2 * r.jobs * r.iterations * r.scale) for r in rows if r.events}
    assert min(per) <= 0.01 and max(per) == 1.0, "the sweep reaches from 1/100 to full size"
    assert max(per.values()) / min(per.values()) < 1.05


def test_full_size_projection() -> None:
    # 100 s in all, 90 s of it simulating at scale 0.02: 10 s of set-up + 90 / 0.02
    assert full_size(100.0, 90.0, 0.02) == pytest.approx(4510.0)


def test_host_models_are_judged_against_jumbo_at_the_same_scale() -> None:
    rows = [{**asdict(r), "command": "x"} for r in (
        at(0.05, 1.00, seed=1), at(0.05, 1.02, seed=2),  # jumbo: mean 1.01
        replace(at(0.05, 1.03, seed=1), hosts="tso", events=150_000),  # within 0.03 of jumbo's: agrees
        replace(at(0.1, 1.2), hosts="tso"),  # no jumbo row at 0.1: not judged
        replace(at(0.05, 1.1, seed=1), hosts="stretch-acks"),  # 0.09 off: differs
    )]  # fmt: skip
    text = render_sim_scale({"rows": rows, **conclusion([at(0.05, 1.0)])})
    tso = [ln for ln in text.splitlines() if "| tso |" in ln]
    stretch = [ln for ln in text.splitlines() if "| stretch-acks |" in ln]
    assert len(tso) == len(stretch) == 1
    assert tso[0].startswith("| 0.05 | reno, 8 jobs, 20 iterations | tso | 1 / 2 | 1.030 (1.010)")
    assert "0.020: agree | 0.15 |" in tso[0]
    assert "0.090: differ" in stretch[0]
