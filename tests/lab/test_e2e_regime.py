"""The e2e lab's bottleneck regime (issue 45): what each option sets on the stack, and the signals a run counts."""

from __future__ import annotations

import math

import pytest

from mlfc.lab.e2e.regime import mean_signals, regime_row, signals_per_phase
from mlfc.lab.results import IterationRecord
from mlfc.lab.scenarios import DEEP, MIXES, TREATMENTS, Regime, ideal_iteration_times, stack_config
from mlfc.lab.stack import StackRun
from mlfc.policy.ecn import RedProfile, StepProfile
from mlfc.policy.priority import PolicyError


def test_deep_is_the_labs_first_regime() -> None:
    cfg = stack_config(MIXES["two-compatible"], TREATMENTS["mltcp-reno"], 5, regime=DEEP)
    assert cfg.bottleneck_bps is None and cfg.queue_depth == 64 and cfg.ecn == RedProfile()
    assert DEEP.flags() == "" and DEEP.queue_bytes == 96_000 and DEEP.rate_bps() == 1500 * 1500 * 8


def test_shallow_sets_link_queue_and_step() -> None:
    shallow = Regime(link_bps=20_000_000, queue_pkts=32, mark_threshold_bytes=6000)
    cfg = stack_config(MIXES["two-compatible"], TREATMENTS["mltcp-reno"], 5, regime=shallow)
    assert cfg.bottleneck_bps == 20_000_000 and cfg.queue_depth == 32 and cfg.ecn == StepProfile(6000)
    assert shallow.flags() == "--link-bps 20000000 --queue-depth 32 --mark-threshold 6000"
    assert shallow.rate_bps() == 20e6


def test_a_bad_threshold_is_refused() -> None:
    with pytest.raises(PolicyError):
        Regime(mark_threshold_bytes=-1).ecn()


def _run(records: int, marks: int, drops: int) -> StackRun:
    recs = [IterationRecord("x", 1, "w0", i, float(i), i + 0.5, i + 0.9, i + 1.0, 1000) for i in range(records)]
    return StackRun(recs, {1: {"ecn_marks": marks, "drops": drops}}, [], [], 1.0)


def test_signals_per_flow_per_phase() -> None:
    # 10 worker-iterations = 20 flow phases (a push and a pull each); 30 marks + 10 drops = 2 per phase
    assert signals_per_phase(_run(10, 30, 10)) == 2.0
    assert math.isnan(signals_per_phase(_run(0, 5, 0)))
    assert mean_signals([_run(10, 30, 10), _run(10, 10, 0), _run(0, 1, 1)]) == 1.25


def test_regime_row_carries_the_rounds() -> None:
    record = {
        "mix": "two-compatible", "cc": "reno", "treatment": "mltcp-reno", "f": "16:0.5:step=0.2",
        "queue_bytes": 96_000, "mark_threshold_bytes": 6000, "link_bps": 18e6, "share_of_ideal": [0.9, 0.8],
        "avg_over_ideal": [1.02, 1.04], "baseline_avg_over_ideal": [1.3, 1.3], "interleaved_from": [3, None],
        "signals_per_round": [2.0, 3.0], "baseline_signals_per_round": [4.0, 4.0], "command": "x",
    }  # fmt: skip
    row = regime_row(record, "ref")
    assert row["platform"] == "ref" and row["rounds"] == 2 and row["share_of_ideal"] == [0.9, 0.8]
    assert row["signals_per_phase"] == 2.5 and row["mark_threshold_bytes"] == 6000


def test_an_ack_costs_its_bytes_on_a_link_in_bits() -> None:
    """The ideal counts the other direction's ACKs: a data packet's slot on a packets/s link, their few bytes on
    the reference switch's link in bit/s (the four-job ideal was once inflated by counting them as slots)."""
    assert DEEP.ack_cost("refswitch") == 1.0 and Regime(link_bps=18_000_000).ack_cost("bmv2") == 1.0
    cost = Regime(link_bps=18_000_000).ack_cost("refswitch")
    assert 0.03 < cost < 0.07
    solo = {1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0}
    comm, push = dict.fromkeys(solo, 0.5), dict.fromkeys(solo, 0.25)
    slots = ideal_iteration_times(solo, comm, push, dict.fromkeys(solo, 1.2))
    bytes_ = ideal_iteration_times(solo, comm, push, dict.fromkeys(solo, 1.2 * cost))
    assert slots[1] == pytest.approx(2.2) and bytes_[1] == pytest.approx(4 * (0.25 + 1.2 * cost * 0.25))


def test_rows_in_other_regimes_or_with_another_f_keep_their_own_runs() -> None:
    """Runs are published under names that say the regime and F: two rows never share (overwrite) a CSV."""
    from pathlib import Path

    from mlfc.lab.e2e.regime import run_names

    t = TREATMENTS["mltcp-reno"]
    names = set()
    for regime, f in ((Regime(18_000_000, 64, 15000), "16:0.5"), (Regime(18_000_000, 64, 6000), "16:0.5"),
                      (Regime(18_000_000, 64, 15000), "8:0.5"), (DEEP, "16:0.5")):  # fmt: skip
        made = [n for _, n in run_names("two-compatible", "ref", None, regime, t, f, [Path("m")], [Path("b")])]
        assert len(made) == 2 and not names & set(made)
        names |= set(made)
    assert "two-compatible/ref-link18M-k15000/baseline-vs-mltcp-reno@8_0.5-r1.csv" in names
