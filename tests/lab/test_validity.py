"""The checks that a run's bottleneck is the configured one (lab/validity.py), on made-up records."""

from __future__ import annotations

import math

import pytest

from mlfc.lab.probe import ProbeResult
from mlfc.lab.results import IterationRecord
from mlfc.lab.validity import CHUNK_BYTES, BottleneckNotCarried, link_utilisation, require_carried


def rec(job: int, start: float, push_end: float, packets: int) -> IterationRecord:
    return IterationRecord("t", job, "w0", 0, start - 1, start, push_end + 1, push_end + 1, packets * CHUNK_BYTES,
                           push_end=push_end)  # fmt: skip


def test_utilisation_counts_overlapping_pushes_once() -> None:
    # 1000 pps configured. Two pushes overlap on [1, 2]; the link is busy on [0, 3] (3 s) and moved 3000 packets.
    records = [rec(1, 0.0, 2.0, 1500), rec(2, 1.0, 3.0, 1500)]
    assert link_utilisation(records, 1000) == pytest.approx(1.0)
    # A CPU-starved switch: the same pushes took twice as long.
    assert link_utilisation([rec(1, 0.0, 4.0, 1500), rec(2, 2.0, 6.0, 1500)], 1000) == pytest.approx(0.5)


def test_utilisation_is_nan_without_the_push_split() -> None:
    r = IterationRecord("t", 1, "w0", 0, 0.0, 1.0, 2.0, 2.0, 1000)
    assert math.isnan(link_utilisation([r], 1000))


def test_a_probe_below_the_share_stops_the_run_naming_the_remedies() -> None:
    require_carried(ProbeResult(1500, 3000.0, 1450.0))
    with pytest.raises(BottleneckNotCarried, match=r"900 of 1500 pkt/s delivered \(60 %.*MLFC_BMV2.*--dataplane ref"):
        require_carried(ProbeResult(1500, 3000.0, 900.0))


def test_shift_equation_fixed_points_and_growth() -> None:
    from mlfc.policy.mltcp import MltcpParams, shift

    p = MltcpParams(2.0, 0.5)
    assert shift(0.0, 1.0, 0.4, p) == 0.0 and shift(0.4, 1.0, 0.4, p) == 0.0  # D = 0 and D = aT
    small = 1e-4
    assert shift(small, 1.0, 0.4, p) / small == pytest.approx(p.slope / p.intercept, rel=1e-2)  # D grows ~(1 + S/I)x
    # Iterating it converges to aT from any small offset.
    d = 0.01
    for _ in range(60):
        d += shift(d, 1.0, 0.4, p)
    assert d == pytest.approx(0.4, abs=1e-3)


def test_shift_series_measures_folded_offsets() -> None:
    from mlfc.lab.mltcp.shift import shift_series
    from mlfc.policy.mltcp import MltcpParams

    recs = []
    for i in range(6):
        for job, lag in ((1, 0.0), (2, 0.05 * i)):
            t0 = i * 1.0 + lag
            recs.append(IterationRecord("t", job, "w0", i, t0, t0 + 0.5, t0 + 0.9, t0 + 1.0, 1, push_end=t0 + 0.7))
    s = shift_series(recs, MltcpParams())
    assert s.period == pytest.approx(1.0)
    assert s.measured == pytest.approx([0.05, 0.10, 0.15, 0.20, 0.25])
    assert s.model[0] == s.measured[0] and s.model[-1] > s.model[0]
