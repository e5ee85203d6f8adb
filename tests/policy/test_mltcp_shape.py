"""MLTCP's F shapes (mlfc.policy.mltcp): every shape spans [intercept, intercept + slope], rises with
bytes_ratio, has the form it is named for, and round-trips through its text form; the boundaries that
only compute a linear F (simulator, real-training jobs) refuse the others; the kernel takes every shape."""

from __future__ import annotations

import argparse
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlfc.policy.mltcp import (
    MltcpParams,
    format_params,
    mltcp_factor,
    parse_params,
    parse_shape,
    shift,
)
from mlfc.policy.priority import PolicyError

SHAPED = [
    MltcpParams(2.0, 0.5),
    MltcpParams(2.0, 0.5, "power", exponent=0.5),
    MltcpParams(4.0, 0.25, "power", exponent=2.0),
    MltcpParams(4.0, 0.25, "step", knee=0.2),
    MltcpParams(3.0, 0.5, "sigmoid", knee=0.3),
]


@pytest.mark.parametrize("params", SHAPED, ids=format_params)
def test_every_shape_spans_intercept_to_intercept_plus_slope(params: MltcpParams) -> None:
    assert mltcp_factor(0.0, params) == pytest.approx(params.intercept)
    assert mltcp_factor(1.0, params) == pytest.approx(params.intercept + params.slope)
    assert mltcp_factor(-3.0, params) == mltcp_factor(0.0, params)  # clamped
    assert mltcp_factor(7.0, params) == mltcp_factor(1.0, params)
    assert mltcp_factor(math.nan, params) == pytest.approx(params.intercept)


@pytest.mark.parametrize("params", SHAPED, ids=format_params)
@given(a=st.floats(0, 1), b=st.floats(0, 1))
def test_every_shape_rises_with_the_iteration(params: MltcpParams, a: float, b: float) -> None:
    lo, hi = min(a, b), max(a, b)
    assert mltcp_factor(lo, params) <= mltcp_factor(hi, params) + 1e-12


def test_linear_is_the_papers_line_and_the_default() -> None:
    p = MltcpParams()
    assert p.shape == "linear" and p.linear
    assert mltcp_factor(0.3, p) == pytest.approx(p.slope * 0.3 + p.intercept)
    assert MltcpParams(2, 0.5, "power", exponent=1.0).linear  # r ** 1 is the line


def test_power_below_one_rises_early_and_above_one_late() -> None:
    concave = MltcpParams(2.0, 0.5, "power", exponent=0.5)
    convex = MltcpParams(2.0, 0.5, "power", exponent=2.0)
    line = MltcpParams(2.0, 0.5)
    assert mltcp_factor(0.25, concave) == pytest.approx(0.5 + 2 * 0.5)
    assert mltcp_factor(0.25, convex) == pytest.approx(0.5 + 2 * 0.0625)
    assert mltcp_factor(0.25, convex) < mltcp_factor(0.25, line) < mltcp_factor(0.25, concave)
    # What the concave shape is for: a flow 5 % into its push against one just starting.
    assert mltcp_factor(0.05, concave) / mltcp_factor(0.0, concave) > 1.8
    assert mltcp_factor(0.05, line) / mltcp_factor(0.0, line) < 1.25


def test_step_has_two_levels_split_at_the_knee() -> None:
    p = MltcpParams(4.0, 0.25, "step", knee=0.2)
    assert mltcp_factor(0.1999, p) == 0.25 and mltcp_factor(0.2, p) == 4.25 and mltcp_factor(0.9, p) == 4.25


def test_sigmoid_is_half_way_at_the_knee_and_steep_around_it() -> None:
    p = MltcpParams(2.0, 0.5, "sigmoid", knee=0.5)
    assert mltcp_factor(0.5, p) == pytest.approx(1.5)  # symmetric knee: half of the slope
    assert mltcp_factor(0.3, p) < 0.8 and mltcp_factor(0.7, p) > 2.2
    early = MltcpParams(2.0, 0.5, "sigmoid", knee=0.2)
    assert mltcp_factor(0.4, early) > 2.0


@pytest.mark.parametrize("params", SHAPED, ids=format_params)
def test_text_form_round_trips(params: MltcpParams) -> None:
    assert parse_params(format_params(params)) == params


def test_text_forms() -> None:
    assert format_params(MltcpParams(2, 0.5)) == "2:0.5"
    assert format_params(MltcpParams(2, 0.5, "power", exponent=0.5)) == "2:0.5:power=0.5"
    assert parse_params("4:0.25:step=0.2") == MltcpParams(4, 0.25, "step", knee=0.2)
    assert parse_shape("linear") == {"shape": "linear"}
    assert parse_shape(" sigmoid=0.3") == {"shape": "sigmoid", "knee": 0.3}


@pytest.mark.parametrize(
    "text, message",
    [
        ("2", "SLOPE:INTERCEPT"),
        ("2:0.5:cubic=1", "expected one of"),
        ("2:0.5:power", "needs its exponent"),
        ("2:0.5:step=1.5", "knee=1.5 must be in"),
        ("2:0.5:step=x", "not a number"),
        ("2:0.5:power=0", "exponent=0.0 must be in"),
        ("2:0.5:linear=2", "takes no argument"),
        ("a:0.5", "must be numbers"),
    ],
)
def test_bad_shapes_are_refused_naming_the_problem(text: str, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        parse_params(text)


def test_the_shift_equation_is_for_the_line_only() -> None:
    assert shift(0.05, 1.0, 0.4, MltcpParams(2, 0.5)) > 0
    with pytest.raises(PolicyError, match="linear F"):
        shift(0.05, 1.0, 0.4, MltcpParams(2, 0.5, "step", knee=0.2))


def test_sweep_shape_axis_crosses_linear_points_only() -> None:
    from mlfc.lab.mltcp.sweep import parse_grid, parse_shapes, with_shapes

    grid = parse_grid("2:0.5,4:0.25:step=0.2")
    shapes = parse_shapes("linear,power=0.5")
    assert [format_params(p) for p in with_shapes(grid, shapes)] == ["2:0.5", "2:0.5:power=0.5", "4:0.25:step=0.2"]
    assert with_shapes(grid, None) == grid
    with pytest.raises(argparse.ArgumentTypeError, match="expected one of"):
        parse_shapes("linear,wiggly=2")


def test_the_shape_reaches_the_emulator_and_its_sender() -> None:
    from mlfc.lab.emulator import _sender_config, parser
    from mlfc.lab.jobs import emulator_args
    from mlfc.lab.scenarios import MIXES, TREATMENTS, stack_config

    mix = MIXES["two-compatible"]
    params = MltcpParams(2.0, 0.5, "power", exponent=0.5)
    cfg = stack_config(mix, TREATMENTS["mltcp-reno"], 5, mltcp_params=params)
    args = emulator_args(mix.jobs[0], cfg.iterations, cfg.transport)
    assert args[args.index("--f") + 1] == "2:0.5:power=0.5"  # F is one value on every command line
    ns = parser().parse_args(["worker", "--job", "1", "--bind", "10.0.0.1", "--ps", "10.0.0.2", *args[2:]])
    assert _sender_config(ns).mltcp == params


def test_kernel_takes_every_shape_but_only_the_increase_rule() -> None:
    from mlfc.hosts.kernel import KernelMltcpError
    from mlfc.hosts.kernel.params import decode, encode
    from mlfc.policy.mltcp import IterationDetection

    step = MltcpParams(4.0, 0.25, "step", knee=0.2)
    assert decode(encode(step, IterationDetection())).params == step  # a table of F, any shape
    with pytest.raises(KernelMltcpError, match="only the additive increase"):
        encode(MltcpParams(7.0, 1.0, rule="bounded"), IterationDetection())


def test_the_shape_reaches_real_training_jobs() -> None:
    from mlfc.hosts.training.cli import build_parser
    from mlfc.hosts.training.options import sender_config as _sender_config
    from mlfc.lab.jobs import Transport, training_job
    from mlfc.lab.scenarios import MIXES, with_training

    step = MltcpParams(4.0, 0.25, "step", knee=0.2)
    spec = with_training(MIXES["two-compatible"]).jobs[0]
    args = training_job(spec, 3, Transport(mltcp=True, mltcp_params=step)).common()
    assert args[args.index("--f") + 1] == "4:0.25:step=0.2"
    argv = ["worker", "--job", "1", "--rank", "0", "--ps", "10.0.0.2", "--mltcp", "--f", "4:0.25:step=0.2"]
    ns = build_parser().parse_args(argv)
    assert _sender_config(ns).mltcp == step


def test_each_controller_has_its_default_f() -> None:
    from mlfc.lab.emulator import _sender_config, parser
    from mlfc.lab.scenarios import MIXES, TREATMENTS, stack_config
    from mlfc.policy.mltcp import default_params

    assert default_params("reno") == default_params("cubic") == MltcpParams(16, 0.5, "step", knee=0.2)
    assert default_params("dcqcn") == MltcpParams()  # DCQCN keeps the line
    assert default_params("dctcp") == default_params("reno")  # Reno's window, Reno's step (unmeasured)
    mix = MIXES["two-compatible"]
    assert stack_config(mix, TREATMENTS["mltcp-reno"], 3).mltcp_params == default_params("reno")
    assert stack_config(mix, TREATMENTS["mltcp-dcqcn"], 3).mltcp_params == MltcpParams()
    dctcp = stack_config(mix, TREATMENTS["mltcp-dctcp"], 3)
    assert dctcp.cc == "dctcp" and dctcp.mltcp and dctcp.mltcp_params == default_params("dctcp")
    assert TREATMENTS["mltcp-dctcp"].baseline == "dctcp" and not stack_config(mix, TREATMENTS["dctcp"], 3).mltcp
    ns = parser().parse_args(["worker", "--job", "1", "--bind", "a", "--ps", "b", "--mltcp", "--cc", "dctcp"])
    assert _sender_config(ns).cc == "dctcp" and _sender_config(ns).mltcp == default_params("dctcp")
    from mlfc.hosts.training.cli import build_parser as train_parser
    from mlfc.hosts.training.options import sender_config as train_config

    ns = train_parser().parse_args(["worker", "--job", "1", "--rank", "0", "--ps", "10.0.0.2", "--cc", "dctcp"])
    assert train_config(ns).cc == "dctcp"
    ns = parser().parse_args(["worker", "--job", "1", "--bind", "a", "--ps", "b", "--mltcp", "--cc", "cubic"])
    assert _sender_config(ns).mltcp == default_params("cubic")
    ns = parser().parse_args(["worker", "--job", "1", "--bind", "a", "--ps", "b", "--mltcp", "--f", "8:0.5"])
    assert _sender_config(ns).mltcp == MltcpParams(8, 0.5)  # --f gives all of F


def test_the_tuner_keeps_the_shape_it_starts_from() -> None:
    from mlfc.policy.mltcp_tuning import FTuner

    start = MltcpParams(2.0, 0.5, "power", exponent=0.5)
    tuner = FTuner(start)
    seen = {tuner.observe(1.0 + 0.01 * i) for i in range(20)}
    assert all(p.shape == "power" and p.exponent == 0.5 for p in seen)


def test_the_emulator_refuses_a_bad_shape_when_it_parses_its_arguments(capsys) -> None:
    from mlfc.lab.emulator import parser

    with pytest.raises(SystemExit):
        parser().parse_args(["worker", "--job", "1", "--bind", "a", "--ps", "b", "--f", "1:0.5:step=2"])
    assert "knee=2.0 must be in" in capsys.readouterr().err


def test_e2e_takes_f_for_its_mltcp_treatments() -> None:
    from mlfc.lab.e2e.cli import _f_arg

    assert _f_arg("16:0.5:step=0.2") == MltcpParams(16, 0.5, "step", knee=0.2)
    with pytest.raises(argparse.ArgumentTypeError, match="must be numbers"):
        _f_arg("2:x")


def test_bounded_rule_never_grows_faster_than_the_plain_algorithm_and_ranks_by_the_cut():
    from mlfc.policy.mltcp import mltcp_scales

    p = parse_params("7:1:bounded")
    assert p.rule == "bounded" and format_params(p) == "7:1:bounded"
    inc0, dec0 = mltcp_scales(0.0, p)
    inc1, dec1 = mltcp_scales(1.0, p)
    assert inc1 == pytest.approx(1.0) and inc0 == pytest.approx(1 / 8)
    assert dec0 == pytest.approx(1.0) and dec1 == pytest.approx(1 / 8)
    # steady share ~ increase / cut: (F_a / F_b) ** 2 between the ends
    assert (inc1 / dec1) / (inc0 / dec0) == pytest.approx(64)
    ratios = [i / 10 for i in range(11)]
    incs = [mltcp_scales(r, p)[0] for r in ratios]
    assert incs == sorted(incs) and all(i <= 1.0 + 1e-12 for i in incs)
    assert mltcp_scales(0.5, parse_params("2:0.5")) == (pytest.approx(1.5), 1.0)  # the paper's rule


def test_bounded_rule_in_reno_and_cubic_cuts_a_flow_ahead_less():
    from types import SimpleNamespace

    from mlfc.hosts.cc import Cubic, Mltcp, Reno

    p = parse_params("7:1:bounded")
    for cls in (Reno, Cubic):
        ahead, behind = SimpleNamespace(ratio=1.0), SimpleNamespace(ratio=0.0)
        a, b = cls(1000, Mltcp(p, ahead)), cls(1000, Mltcp(p, behind))
        for cc in (a, b):
            cc.on_loss(0.0)  # leave slow start at the initial window's cut
        wa, wb = a.cwnd, b.cwnd
        assert wa > wb, cls.name
        a.on_loss(1.0)
        b.on_loss(1.0)
        assert a.cwnd / wa > b.cwnd / wb, cls.name


def test_bounded_start_ranks_flows_in_slow_start_and_the_other_rules_do_not():
    from types import SimpleNamespace

    from mlfc.hosts.cc import Cubic, Mltcp, Reno
    from mlfc.policy.mltcp import mltcp_slow_start_scale

    p = parse_params("7:1:bounded-start")
    assert format_params(p) == "7:1:bounded-start"
    assert mltcp_slow_start_scale(0.0, p) == pytest.approx(1 / 8)
    assert mltcp_slow_start_scale(1.0, p) == pytest.approx(1.0)
    for other in ("7:1:bounded", "2:0.5", "16:0.5:step=0.2"):
        assert mltcp_slow_start_scale(0.0, parse_params(other)) == 1.0
    for cls in (Reno, Cubic):
        ahead, behind = SimpleNamespace(ratio=1.0), SimpleNamespace(ratio=0.0)
        a, b = cls(1000, Mltcp(p, ahead)), cls(1000, Mltcp(p, behind))
        plain = cls(1000)
        for cc in (a, b, plain):
            cc.on_ack(8000, 0.01, False, 0.0)  # eight segments acked, all in slow start
        grew = [cc.cwnd - 10_000 for cc in (a, b, plain)]
        assert grew[0] == pytest.approx(8000) == pytest.approx(grew[2]), cls.name  # ahead: as fast as plain
        assert grew[1] == pytest.approx(1000), cls.name  # behind: F(0) / F(1) = 1/8 of it
