"""`make approx`'s treatments (issue 25): the five of the issue, what each runs, the round's order (a matched
top-k after mlfc), the published rows' figures, and bad input refused clearly."""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from types import SimpleNamespace

import pytest

from mlfc.lab.approx import cli, variants
from mlfc.lab.approx import run as approx_run
from mlfc.lab.results import IterationRecord
from mlfc.lab.tta import accuracy_points, final_mean


def args(**kw) -> argparse.Namespace:
    base = {"treatments": variants.TREATMENT_NAMES, "mlfc_bound": 0.5, "sweep": [], "topk": None}
    return argparse.Namespace(**(base | kw))


def test_the_treatments_by_default_and_what_each_runs():
    vs = {v.name: v for v in variants.variants(args())}
    assert list(vs) == ["full", "fp16", "topk-ef", "selective-old", "mlfc-push", "mlfc", "mlfc-share", "mlfc-telemetry",
                        "mlfc-precision", "mlfc-precision-pulls", "mlfc-precision-repair"]  # fmt: skip
    assert vs["mlfc-telemetry"].withhold_signal == "telemetry" and vs["mlfc-telemetry"].withhold
    prec = vs["mlfc-precision"]  # issue 46 item 3: telemetry's share, shed by precision first
    assert (prec.withhold_signal, prec.withhold, prec.precision) == ("telemetry", True, True)
    assert not vs["mlfc-telemetry"].precision
    assert "fp16/int8 before withholding" in prec.describe() and "mlfc-precision" in variants.ALONE_TREATMENTS
    one = argparse.Namespace(workers=1, eval_every=5)
    job = variants.jobs_for(one, variants.MODELS["digits-cnn"], prec, 1, 0, None)
    assert job[0].training.precision and job[0].training.withhold_signal == "telemetry"
    assert not prec.pull_precision and not job[0].training.pull_precision
    pulls = vs["mlfc-precision-pulls"]  # its second design: the pulls by precision too
    assert (pulls.precision, pulls.pull_precision, pulls.pull_bound) == (True, True, 0.5)
    assert "pulls as fp16/int8 changes first" in pulls.describe()
    assert "mlfc-precision-pulls" in variants.ALONE_TREATMENTS
    assert variants.jobs_for(one, variants.MODELS["digits-cnn"], pulls, 1, 0, None)[0].training.pull_precision
    repair = vs["mlfc-precision-repair"]  # its third design: only what is shed by plan is tolerated
    assert (repair.pull_precision, repair.repair_drops, repair.drop_policy) == (True, True, variants.NO_SELECTIVE_DROP)
    assert "tail drop, drops retransmitted" in repair.describe() and not pulls.repair_drops
    assert variants.jobs_for(one, variants.MODELS["digits-cnn"], repair, 1, 0, None)[0].training.repair_drops
    share = vs["mlfc-share"]  # the third design: mlfc with the others'-share signal
    assert (share.withhold_signal, vs["mlfc"].withhold_signal) == ("share", "marks")
    assert (share.loss_bound, share.pull_bound, share.loss_feedback) == (0.5, 0.5, True)
    assert "(share)" in share.describe() and "(marks)" in vs["mlfc"].describe()
    assert vs["full"].loss_bound == 0 and vs["full"].drop_policy == variants.NO_SELECTIVE_DROP
    assert vs["fp16"].compression() == "fp16" and vs["fp16"].loss_bound == 0
    old, new = vs["selective-old"], vs["mlfc"]
    assert (old.loss_bound, old.loss_feedback, old.withhold, old.tolerated_loss) == (0.1, False, False, "loss")
    assert (new.loss_bound, new.loss_feedback, new.withhold) == (0.5, True, True)
    assert new.tolerated_loss == "proportional" and new.drop_policy != variants.NO_SELECTIVE_DROP
    assert new.pull_bound == 0.5 and vs["mlfc-push"].pull_bound == 0  # mlfc approximates the pulls too
    assert vs["mlfc-push"].withhold and vs["mlfc-push"].loss_bound == 0.5
    assert "pulls left out up to 0.5" in new.describe() and "pulls" not in vs["mlfc-push"].describe()
    with pytest.raises(ValueError, match="no top-k fraction"):
        vs["topk-ef"].compression()  # matched: needs the round's mlfc bytes
    assert vs["topk-ef"].compression(0.2) == "topk:0.2"
    assert variants.variants(args(topk=0.1))[2].compression() == "topk:0.1"


def test_the_sweep_adds_mlfc_at_other_bounds():
    names = [v.name for v in variants.variants(args(treatments=("full", "mlfc"), sweep=[0.3, 0.5, 0.7]))]
    assert names == ["full", "mlfc", "mlfc-b0.3", "mlfc-b0.7"]  # 0.5 is mlfc's own


def test_rounds_rotate_and_a_matched_topk_runs_right_after_mlfc():
    vs = variants.variants(args())
    for rnd in range(6):
        names = [v.name for v in variants.run_order(vs, rnd)]
        assert sorted(names) == sorted(variants.TREATMENT_NAMES)
        assert names[names.index("mlfc") + 1] == "topk-ef"
    assert variants.run_order(vs, 0)[0].name == "full"
    assert variants.run_order(vs, 1)[0].name == "fp16"
    fixed = variants.variants(args(topk=0.1))  # a fixed fraction keeps its rotated place
    assert [v.name for v in variants.run_order(fixed, 2)] == ["topk-ef", "selective-old", "mlfc-push", "mlfc",
                                                            "mlfc-share", "mlfc-telemetry", "mlfc-precision",
                                                            "mlfc-precision-pulls", "mlfc-precision-repair", "full",
                                                            "fp16"]  # fmt: skip


@pytest.mark.parametrize(
    ("parse", "text", "match"),
    [
        (cli.parse_treatments, "full,everything", "full, fp16, topk-ef, selective-old, mlfc-push, mlfc"),
        (cli.parse_treatments, "full,full", "no repeats"),
        (cli.parse_models, "resnet", "digits-cnn, synthetic-mlp"),
        (cli.parse_seeds, "0,x", "expected integers"),
        (cli.parse_seeds, "1,1", "distinct"),
        (cli.parse_bounds, "0.5,1.5", "expected a fraction"),
        (cli.parse_topk, "half", "'match' or a fraction"),
    ],
)
def test_bad_options_are_refused_with_what_is_expected(parse, text, match):
    with pytest.raises(argparse.ArgumentTypeError, match=match):
        parse(text)


def test_options_parse():
    assert cli.parse_topk("match") is None and cli.parse_topk("0.25") == 0.25
    assert cli.parse_seeds("0,1") == [0, 1] and cli.parse_models("digits-cnn") == ("digits-cnn",)


def _record(job: int, it: int, *, acc=None, sent=None, pulled=None, nbytes=1000, end=None) -> IterationRecord:
    return IterationRecord("approx", job, f"{job}/0", it, float(it), float(it), float(it) + 0.5, end or it + 1.0,
                           nbytes, accuracy=acc, sent_bytes=sent, pull_sent_bytes=pulled)  # fmt: skip


def _result(records, a_star=1.0, name="mlfc") -> approx_run.Result:
    run = SimpleNamespace(records=records, points=lambda: accuracy_points(records), start=0.0, errors=[],
                          run=SimpleNamespace(counters={}))  # fmt: skip
    return approx_run.Result("digits-cnn", variants.mlfc_variant(name, 0.5), 3, 0, 0, run, a_star, 1000)


def test_a_runs_figures_smoothed_time_last_five_accuracy_and_bytes():
    accs = [0.5, 0.97, 0.5, 0.96, 0.96, 0.96, 0.96, 0.96, 0.96]  # a spike at 1, smoothed crossing later
    recs = [_record(1, i, acc=a, sent=500, pulled=600) for i, a in enumerate(accs)]
    recs += [_record(2, i, acc=a, sent=None) for i, a in enumerate(accs)]  # sent unknown: counted as full
    res = _result(recs)
    # mean of 3 evaluations first >= 0.95 at iteration 5 (0.96, 0.96, 0.96), reported at its end (6.0 s)
    assert res.tta() == [6.0, 6.0] and res.mean_tta == 6.0
    assert res.final == pytest.approx(0.96)
    assert res.push_share == pytest.approx(0.75) and res.pull_share == pytest.approx(0.8)
    assert res.bytes_share == pytest.approx(0.775)
    short = _result([_record(1, 0, acc=0.2), _record(2, 0, acc=0.99)])
    assert math.isnan(short.mean_tta)  # one job never got there: the run's figure is unknown, not the other's


def test_the_precision_column_gives_the_shares_of_chunks_by_precision_and_withheld():
    recs = [replace(_record(1, 0), chunks=10, fp16_chunks=6, withheld_chunks=1),  # fp32 3
            replace(_record(1, 1), chunks=10, int8_chunks=10)]  # fmt: skip
    assert _result(recs).precision == "fp32 15 %, fp16 30 %, int8 50 %, withheld 5 %"
    assert _result([_record(1, 0)]).precision == "-"  # records that do not say (older runs)


def test_final_accuracy_is_the_mean_of_the_last_five_evaluations():
    pts = _result([_record(1, i, acc=a) for i, a in enumerate([0.1, 0.2, 0.9, 0.8, 0.9, 0.8, 1.0])]).points()[1]
    assert final_mean(pts) == pytest.approx((0.9 + 0.8 + 0.9 + 0.8 + 1.0) / 5)
    assert final_mean(pts[:2]) == pytest.approx(0.15) and math.isnan(final_mean([]))
    with pytest.raises(ValueError):
        final_mean(pts, 0)


def test_a_published_command_does_not_name_the_output_folder() -> None:
    argv = ["--model", "digits-cnn", "--out", "/tmp/x", "--rounds", "1", "--out=/tmp/y", "--publish"]
    assert cli.without_out(argv) == ["--model", "digits-cnn", "--rounds", "1", "--publish"]


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--no-congested", "--no-alone"], "leaves nothing to run"),
        (["--no-congested", "--treatments", "fp16,topk-ef"], "none among --treatments"),
    ],
)
def test_only_alone_runs_need_a_treatment_that_runs_alone(argv, match, capsys) -> None:
    with pytest.raises(SystemExit):
        cli.main([*argv, "--topk", "0.1"])
    assert match in capsys.readouterr().err


def test_signals_per_phase_are_the_switches_marks_and_drops_per_worker_iteration() -> None:
    res = _result([_record(1, i) for i in range(4)] + [_record(2, i) for i in range(4)])
    res.run.run.counters = {1: {"ecn_marks": 6, "drops": 2}, 2: {"ecn_marks": 4}}
    assert res.signals_per_phase == pytest.approx(12 / 8)
    assert math.isnan(_result([]).signals_per_phase)
