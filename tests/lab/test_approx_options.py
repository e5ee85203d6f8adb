"""`make approx`'s choice of treatments: the sweep can run beside full delivery alone."""

from __future__ import annotations

import argparse

import pytest

from mlfc.lab import approx


def args(**kw) -> argparse.Namespace:
    base = {"loss_bound": 0.1, "rigid": "fp16", "sweep": [0.02, 0.1, 0.4], "treatments": approx.TREATMENT_NAMES,
            "loss_feedback": False}  # fmt: skip
    return argparse.Namespace(**(base | kw))


def test_all_three_treatments_and_the_sweep_by_default():
    names = [v.name for v in approx.variants(args())]
    assert names == ["full", "selective", "rigid", "bound 0.02", "bound 0.4"]  # 0.1 is the selective treatment


def test_loss_feedback_is_off_unless_asked_for_and_then_on_for_selective_and_the_sweep():
    assert not any(v.loss_feedback for v in approx.variants(args()))  # "selective" as measured so far
    vs = {v.name: v for v in approx.variants(args(loss_feedback=True))}
    assert vs["selective"].loss_feedback and vs["bound 0.4"].loss_feedback and not vs["full"].loss_feedback
    assert vs["selective"].describe().endswith("loss feedback") and "feedback" not in vs["full"].describe()


def test_full_delivery_beside_the_sweep_only():
    vs = approx.variants(args(treatments=approx.parse_treatments("full")))
    assert [v.name for v in vs] == ["full", "bound 0.02", "bound 0.1", "bound 0.4"]
    assert all(v.sweep for v in vs[1:]) and vs[0].loss_bound == 0


@pytest.mark.parametrize("text", ["", "full,everything", "selectiv"])
def test_unknown_treatments_are_refused(text):
    with pytest.raises(argparse.ArgumentTypeError, match="full, selective, rigid"):
        approx.parse_treatments(text)
