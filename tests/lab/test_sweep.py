"""The MLTCP sweep's pieces that need no network: grid parsing, the gain share, and that a
stack run hands F's parameters to the job emulator."""

from __future__ import annotations

import argparse
import math
from dataclasses import replace

import pytest

from mlfc.lab.jobs import emulator_args
from mlfc.lab.mltcp.sweep import parse_grid, sweep_row
from mlfc.lab.scenarios import MIXES, TREATMENTS, share_of_ideal_gain, stack_config
from mlfc.policy.mltcp import MltcpParams, default_params, format_params


def test_grid_parses_points_in_order() -> None:
    assert parse_grid("1:0.5, 4:0.25") == [MltcpParams(1.0, 0.5), MltcpParams(4.0, 0.25)]


@pytest.mark.parametrize("bad", ["4", "x:1", "1:0", "-1:0.5", "1:nan"])
def test_grid_rejects_bad_points_naming_them(bad: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="grid point"):
        parse_grid(bad)


def test_share_of_ideal_gain() -> None:
    # Baseline 1.4 s, ideal 1.0 s: reaching 1.0 is all of the gain, 1.2 s is 1.4/1.2 - 1 over 0.4.
    assert share_of_ideal_gain(1.4, 1.0, 1.0) == pytest.approx(1.0)
    assert share_of_ideal_gain(1.4, 1.2, 1.0) == pytest.approx((1.4 / 1.2 - 1) / 0.4)
    assert share_of_ideal_gain(1.4, 1.5, 1.0) < 0  # slower than the baseline
    assert math.isnan(share_of_ideal_gain(1.0, 1.0, 1.0))  # nothing to gain


def test_emulator_gets_the_swept_f() -> None:
    mix = MIXES["two-compatible"]
    cfg = stack_config(mix, TREATMENTS["mltcp-reno"], 5, mltcp_params=MltcpParams(8.0, 0.25))
    args = emulator_args(mix.jobs[0], cfg.iterations, cfg.transport)
    assert args[args.index("--f") + 1] == "8:0.25"
    base = stack_config(mix, TREATMENTS["baseline"], 5)
    plain = emulator_args(mix.jobs[0], base.iterations, base.transport)
    assert "--mltcp" not in plain and "--f" not in plain


def test_a_worker_the_coordinator_missed_is_an_error() -> None:
    from mlfc.lab.stack import unreported_workers

    cfg = stack_config(MIXES["two-compatible"], TREATMENTS["baseline"], 3)
    # job 1 reported all three iterations, job 2 stopped after the first
    assert unreported_workers({1: {0: 2}, 2: {0: 0}}, cfg) == [
        "coordinator saw job 2 worker 0 up to iteration 0, not 2"
    ]


def test_sweep_table_averages_rounds_and_shows_the_spread(tmp_path) -> None:
    from mlfc.lab.mltcp.sweep import plot_sweep, sweep_row, sweep_table
    from mlfc.lab.results import JobSummary
    from mlfc.lab.rounds import TreatmentResult

    def result(avg: float, interleaved: int | None) -> TreatmentResult:
        overall = JobSummary(0, 10, avg, avg * 1.1, 0.4)
        return TreatmentResult(TREATMENTS["mltcp-reno"], None, [], overall, interleaved)

    base = sweep_row(None, "reno")
    base.results += [result(1.4, None), result(1.4, None)]
    point = sweep_row(MltcpParams(2.0, 0.5), "reno")
    point.results += [result(1.0, 3), result(1.2, None)]
    table = sweep_table([base, point], ideal_avg=1.0)
    row = table.splitlines()[-1]
    # gains 100 % and 41.7 %: mean 71 %, spread 42..100; interleaved in round 1 from iteration 3 only
    assert "2:0.5" in row and "0.5..2.5" in row and "71 % (42..100)" in row and "3/-" in row
    plot_sweep(tmp_path / "s.png", [base, point], 1.0, "t")
    assert (tmp_path / "s.png").read_bytes()[:4] == b"\x89PNG"


def test_tuned_f_reaches_the_emulator_as_an_opt_in() -> None:
    mix = MIXES["two-compatible"]
    tuned = stack_config(mix, TREATMENTS["mltcp-reno-tune"], 12)
    assert tuned.mltcp and tuned.mltcp_tune and tuned.transport.mltcp_tune
    args = emulator_args(mix.jobs[0], 12, tuned.transport)
    assert "--mltcp-tune" in args and args[args.index("--f") + 1] == format_params(default_params("reno"))
    fixed = stack_config(mix, TREATMENTS["mltcp-reno"], 12)
    assert "--mltcp-tune" not in emulator_args(mix.jobs[0], 12, fixed.transport)
    row = sweep_row(MltcpParams(4, 0.25), "reno", tune=True)
    assert row.label == "tune@4:0.25" and row.treatment.tune and row.treatment.mltcp


def test_the_ideal_counts_the_other_directions_acks_on_a_packet_rate_bottleneck():
    from mlfc.lab.scenarios import ideal_iteration_times

    # four jobs, push 0.2 s + pull 0.2 s of a 0.9 s iteration: 0.89 per direction, compatible...
    t = {j: 0.9 for j in range(1, 5)}
    comm = {j: 0.4 for j in t}
    push = {j: 0.2 for j in t}
    assert ideal_iteration_times(t, comm, push) == t
    # ...until each direction also carries the other's ACKs, 0.8 per data packet: load 1.6
    slowed = ideal_iteration_times(t, comm, push, {j: 0.8 for j in t})
    assert all(v == pytest.approx(0.9 * 1.6) for v in slowed.values())
    assert ideal_iteration_times(t, comm, push, {j: 0.125 for j in t}) == pytest.approx(t)


@pytest.mark.parametrize("text", ["16:0.5:step=0.2", "2:0.5", "7:1:bounded", "7:1:bounded-start"])
def test_the_emulator_runs_exactly_the_f_it_is_given_rule_included(text: str) -> None:
    # The rule once never reached the emulator: "7:1:bounded" runs ran the paper's rule, recorded as 7:1.
    from mlfc.lab.emulator import _receiver_config, _sender_config, parser
    from mlfc.policy.mltcp import parse_params

    mix = MIXES["four-compatible"]
    cfg = stack_config(mix, TREATMENTS["mltcp-reno"], 5, mltcp_params=parse_params(text), ack_delay=0.01)
    common = emulator_args(mix.jobs[0], cfg.iterations, cfg.transport)
    args = parser().parse_args(["worker", *common, "--bind", "10.0.0.1", "--ps", "10.0.0.2", "--rank", "0"])
    assert _sender_config(args).mltcp == parse_params(text)
    assert _receiver_config(args).ack_delay == 0.01


@pytest.mark.parametrize("reaction", ["proportional", "loss", "ecn", "none"])
def test_the_reaction_to_a_tolerated_loss_reaches_the_emulators_senders(reaction: str) -> None:
    from mlfc.lab.emulator import _sender_config, parser

    mix = MIXES["four-compatible"]
    cfg = replace(stack_config(mix, TREATMENTS["mltcp-reno"], 5), tolerated_loss=reaction)
    common = emulator_args(mix.jobs[0], cfg.iterations, cfg.transport)
    assert ("--tolerated-loss" in common) == (reaction != "proportional")  # the default adds nothing to the command
    args = parser().parse_args(["worker", *common, "--bind", "10.0.0.1", "--ps", "10.0.0.2", "--rank", "0"])
    assert _sender_config(args).tolerated_loss == reaction
