"""The bounded-loss aggregation rule (mlfc.policy.aggregation) on small tensors with exact numbers."""

from __future__ import annotations

import numpy as np
import pytest

from mlfc.policy.aggregation import average_received, received_elements

F32 = np.float32


def test_nothing_lost_is_the_plain_mean():
    a = np.array([1, 2, 3, 4], F32)
    b = np.array([3, 6, 9, 12], F32)
    agg = average_received([a, b], [None, None])
    assert agg.mean.tolist() == [2, 4, 6, 8]
    assert agg.mean.dtype == F32
    assert agg.contributors.tolist() == [2, 2, 2, 2]
    assert agg.lost_elements == 0


def test_each_element_is_averaged_over_the_workers_whose_copy_arrived():
    # chunks of 8 bytes = 2 float32 elements; worker A lost chunk 1 (elements 2, 3),
    # worker B lost chunk 2 (elements 4, 5), worker C lost chunks 1 and 2
    a = np.array([1, 2, 3, 4, 5, 6], F32)
    b = np.array([3, 4, 5, 6, 7, 8], F32)
    c = np.array([5, 6, 7, 8, 9, 10], F32)
    masks = [received_elements(6, 4, 8, m) for m in ([1], [2], [1, 2])]
    assert masks[0].tolist() == [True, True, False, False, True, True]
    # what the transport delivered: zeros where chunks were missing (they must not count)
    a[2:4], b[4:6], c[2:6] = 0, 0, 0
    agg = average_received([a, b, c], masks)
    # elements 0, 1: (1 + 3 + 5) / 3, (2 + 4 + 6) / 3; 2, 3: only B arrived; 4, 5: only A arrived
    assert agg.mean.tolist() == [3, 4, 5, 6, 5, 6]
    assert agg.contributors.tolist() == [3, 3, 1, 1, 1, 1]
    assert agg.lost_elements == 0


def test_elements_no_worker_delivered_are_zero_and_counted():
    a = np.array([2, 4, 6, 8], F32)
    b = np.array([4, 8, 10, 12], F32)
    m = received_elements(4, 4, 8, [1])  # both lost elements 2, 3
    agg = average_received([a, b], [m, m])
    assert agg.mean.tolist() == [3, 6, 0, 0]
    assert agg.contributors.tolist() == [2, 2, 0, 0]
    assert agg.lost_elements == 2


def test_not_rescaled_by_the_fraction_received():
    # the other rule would give worker A's surviving elements x 4/3; ours keeps them as they are
    a = np.array([1, 1, 1, 1, 1, 1, 1, 1], F32)
    agg = average_received([a], [received_elements(8, 4, 8, [3])])
    assert agg.mean.tolist() == [1, 1, 1, 1, 1, 1, 0, 0]


def test_an_element_straddling_a_lost_chunk_boundary_is_lost():
    # chunks of 6 bytes over 4-byte elements: chunk 1 = bytes 6..11 covers elements 1 (bytes 4..7) and 2 (8..11)
    assert received_elements(4, 4, 6, [1]).tolist() == [True, False, False, True]
    # the last, short chunk (bytes 12..15 of 16) covers element 3 only
    assert received_elements(4, 4, 6, [2]).tolist() == [True, True, True, False]


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="outside"):
        received_elements(4, 4, 8, [2])
    with pytest.raises(ValueError, match="no worker"):
        average_received([], [])
    with pytest.raises(ValueError, match="differs"):
        average_received([np.zeros(3, F32), np.zeros(4, F32)], [None, None])
    with pytest.raises(ValueError, match="floating"):
        average_received([np.zeros(3, np.int32)], [None])
