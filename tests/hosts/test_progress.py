"""In-iteration progress (mlfc.hosts.progress) and MLTCP's F read from it (mlfc.hosts.cc.Mltcp)."""

from __future__ import annotations

import pytest

from mlfc.hosts.cc import Mltcp
from mlfc.hosts.progress import IterationProgress
from mlfc.policy.mltcp import MltcpParams, mltcp_factor


def test_ratio_from_declared_size_and_factor_from_policy():
    params = MltcpParams(slope=2.0, intercept=0.25)
    tr = IterationProgress(idle_gap=None)
    mltcp = Mltcp(params, tr)
    tr.start_iteration(expected_bytes=4000)
    assert tr.ratio == 0 and mltcp.factor() == 0.25 and tr.bucket == 0
    tr.on_sent(1000, 0.0)
    assert tr.ratio == 0.25 and mltcp.factor() == mltcp_factor(0.25, params) == 0.75 and tr.bucket == 4
    tr.on_sent(10_000, 0.0)
    assert tr.ratio == 1.0 and mltcp.factor() == 2.25 and tr.bucket == 15  # clamped


def test_bytes_per_iteration_learned_by_ewma():
    tr = IterationProgress(idle_gap=None, ewma_weight=0.5)
    tr.start_iteration()
    tr.on_sent(1000, 0.0)
    assert tr.ratio == 0.0  # no estimate in the first iteration
    tr.start_iteration()
    assert tr.bytes_per_iteration == 1000
    tr.on_sent(3000, 0.0)
    assert tr.ratio == 1.0
    tr.start_iteration()
    assert tr.bytes_per_iteration == pytest.approx(0.5 * 1000 + 0.5 * 3000)


def test_idle_gap_and_iteration_number_start_iterations():
    tr = IterationProgress(idle_gap=0.1)
    tr.on_sent(500, 0.0)
    tr.on_sent(500, 0.05)
    assert tr.iterations_started == 0 and tr.bytes_this_iteration == 1000
    tr.on_sent(200, 0.5)  # gap of 0.45 s > idle_gap
    assert tr.iterations_started == 1 and tr.bytes_per_iteration == 1000 and tr.ratio == pytest.approx(0.2)
    tr.note_iteration(7)
    tr.note_iteration(7)
    assert tr.iterations_started == 1
    tr.note_iteration(8)
    assert tr.iterations_started == 2 and tr.bytes_this_iteration == 0


def test_rejects_bad_settings():
    with pytest.raises(ValueError):
        IterationProgress(idle_gap=0)
    with pytest.raises(ValueError):
        IterationProgress(ewma_weight=0)
    with pytest.raises(ValueError):
        IterationProgress().start_iteration(expected_bytes=0)


def per_chunk(tr: IterationProgress, sizes: list[int], now: float) -> list[int]:
    out = []
    for size in sizes:
        out.append(tr.bucket)
        tr.on_sent(size, now)
    return out


@pytest.mark.parametrize(
    ("sent", "gap", "sizes"),
    [
        (0, 0.0, [1000] * 45),  # the start of an iteration
        (61_000, 0.0, [1000] * 10),  # crosses the 1/16 boundary (62,500 of 1,000,000) inside the run
        (990_000, 0.0, [1000] * 45 + [7]),  # reaches the end (ratio clamped to 1)
        (500_000, 1.0, [1000] * 20),  # an idle gap: the first chunk starts a new iteration
        (5_000, 0.0, [1000]),
        (5_000, 0.0, []),
    ],
)
def test_tagging_a_run_gives_what_chunk_by_chunk_gives(sent, gap, sizes):
    a, b = IterationProgress(idle_gap=0.1), IterationProgress(idle_gap=0.1)
    for tr in (a, b):
        tr.start_iteration(expected_bytes=1_000_000)
        tr.on_sent(sent, 0.0)
    assert a.tag_run(sizes, gap) == per_chunk(b, sizes, gap)
    assert (a.bytes_this_iteration, a.iterations_started, a.bytes_per_iteration) == (
        b.bytes_this_iteration,
        b.iterations_started,
        b.bytes_per_iteration,
    )


def test_checkpoint_restores_a_run_that_was_not_sent():
    tr = IterationProgress(idle_gap=0.1)
    tr.start_iteration(expected_bytes=10_000)
    tr.on_sent(2000, 0.0)
    state = tr.checkpoint()
    tr.tag_run([1000] * 5, 1.0)  # would start an iteration (idle gap) and count 5000 bytes
    tr.restore(state)
    assert (tr.bytes_this_iteration, tr.iterations_started, tr.expected_bytes) == (2000, 1, 10_000)


def test_explicit_start_then_iteration_number_then_idle_gap_is_one_iteration():
    """The training loop and the emulator call start_iteration(size) after their compute phase, then
    send_tensor notes the iteration number and sends after the idle gap: one boundary, the declared size
    kept, so a variable-size iteration gets its own ratio, not the EWMA of earlier ones."""
    tr = IterationProgress(idle_gap=0.1)
    now = 0.0
    for it, size in enumerate([1000, 4000, 500, 4000]):
        now += 0.6  # compute: longer than idle_gap
        tr.start_iteration(size)
        tr.note_iteration(it)  # send_tensor, before its first chunk
        half = tr.tag_run([size // 2], now)  # the first run of chunks, after the idle gap
        assert tr.iterations_started == it + 1, f"iteration {it}: counted {tr.iterations_started} boundaries"
        assert tr.expected_bytes == size and tr.bytes_per_iteration == size
        assert tr.ratio == pytest.approx(0.5) and half == [0]
        tr.note_iteration(it)  # a second tensor of the same iteration
        tr.on_sent(size - size // 2, now + 0.01)
        assert tr.ratio == 1.0 and tr.iterations_started == it + 1


def test_iteration_number_alone_still_starts_iterations_after_an_explicit_one():
    tr = IterationProgress(idle_gap=None)
    tr.start_iteration(1000)
    tr.note_iteration(0)
    tr.on_sent(1000, 0.0)
    tr.note_iteration(1)  # no explicit call this time: the number's change is the boundary
    assert tr.iterations_started == 2 and tr.expected_bytes is None and tr.bytes_per_iteration == 1000
