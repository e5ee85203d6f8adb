"""The PS's JSON lines and the STATS message are typed records (hosts/training/accounting.py); their keys,
in this order, are what the PS always wrote and what workers and the lab read: a field moved or renamed in a
record changes every output file, so it must change here too."""

from __future__ import annotations

import json
from collections import Counter

from mlfc.hosts.training.accounting import BucketRecord, IterationLoss, IterationRecord, PullStats


def _loss() -> IterationLoss:
    return IterationLoss(
        iteration=3,
        lost_chunks=Counter({(0, 1): 2, (1, 1): 1, (1, 0): 4}),
        chunks=Counter({0: 10, 1: 10}),
        lost_elements=Counter({1: 5}),
    )


def test_an_iteration_line_has_the_ps_keys_in_order_and_the_phases_from_the_times() -> None:
    rec = IterationRecord.of(7, 3, _loss(), [1, 0], 100.0, 100.5, 100.75, 101.0, 102.0)
    assert json.dumps(rec.to_dict()) == (
        '{"ps": true, "job": 7, "iteration": 3, "start": 100.0, "pushes_in": 100.5, "wait_s": 0.5, '
        '"aggregate_s": 0.25, "step_s": 0.25, "pull_s": 1.0, "end": 102.0, "lost_chunks": 7, "chunks": 20, '
        '"lost_by_worker": {"0": 2, "1": 5}, "lost_elements": 5}'
    )


def test_a_bucket_line_counts_the_loss_of_its_tensor_only() -> None:
    rec = BucketRecord.of(7, 3, 1, _loss(), 0.125)
    assert json.dumps(rec.to_dict()) == (
        '{"ps": true, "job": 7, "iteration": 3, "tensor": 1, "aggregate_s": 0.125, "lost_chunks": 3}'
    )


def test_stats_are_of_the_pulled_worker_and_of_the_job() -> None:
    stats = PullStats.of(_loss(), 1, sent_bytes=400, withheld_chunks=2, stale_elements=8)
    assert list(stats.to_dict().items()) == [
        ("pull_sent_bytes", 400),
        ("pull_withheld_chunks", 2),
        ("pull_stale_elements", 8),
        ("lost_chunks", 5),
        ("job_lost_chunks", 7),
        ("lost_by_tensor", {"0": 4, "1": 1}),
        ("chunks", 10),
        ("lost_elements", 5),
    ]
