"""The chaos ledger (issue 29 part 2): acknowledged reports looked up one by one, decisions judged against
the bound, the seeds list; pure functions, no Mininet."""

from __future__ import annotations

import pytest

from mlfc.lab.chaos.cli import parse_seeds
from mlfc.lab.chaos.ledger import Ledger, decision_ledger, report_ledger


def _ack(t: float, reports: list[tuple[int, int]], committed: bool = True, job: int = 1) -> dict:
    return {"time": t, "committed": committed, "job": job, "reports": [list(r) for r in reports]}


def test_a_lost_acked_report_is_reported_lost() -> None:
    store = {(1, 0, 0): 10.0, (1, 1, 0): 10.5}
    acks = [_ack(10.0, [(0, 0), (1, 0)]), _ack(11.0, [(0, 1)])]
    ledger = Ledger(report_ledger(acks, lambda j, w, i: store.get((j, w, i)), 1), [])
    assert ledger.reports_acked == 3 and ledger.reports_found == 2
    assert [(r.worker, r.iteration) for r in ledger.lost()] == [(0, 1)]
    assert not ledger.ok


def test_a_report_acked_twice_is_one_entry_and_uncommitted_batches_promise_nothing() -> None:
    acks = [_ack(5.0, [(0, 3)]), _ack(4.0, [(0, 3)]), _ack(6.0, [(1, 3)], committed=False)]
    entries = report_ledger(acks, lambda j, w, i: 1.0, 1)
    assert len(entries) == 1
    assert entries[0].acks == 2 and entries[0].first_ack == 4.0 and entries[0].found


def test_decisions_against_the_bound() -> None:
    decisions = [(1, 0.0, 1.0), (2, 2.0, 3.0), (3, 4.0, 5.0), (4, 6.0, None), (5, 9.0, 10.0)]
    seen = {1: 1.4, 2: 5.5, 5: 10.2}  # 2 seen 2.5 s after its ack: late; 3 never seen
    entries = {d.seq: d for d in decision_ledger(decisions, seen, [], bound=1.0, observed_until=20.0)}
    assert 4 not in entries  # never acknowledged: no promise
    assert entries[1].status == "applied" and entries[1].delay_s == pytest.approx(0.4)
    assert entries[2].status == "late" and not entries[2].applied
    assert entries[3].status == "never"
    assert entries[5].status == "applied"
    ledger = Ledger([], list(entries.values()))
    assert (ledger.decisions_acked, ledger.decisions_applied) == (4, 2)


def test_a_fault_moves_the_due_time_and_a_quick_successor_supersedes() -> None:
    # acked at 1.0, the switch was down 1.5..4.0 and seen again at 4.5: due from 4.0, within the bound
    entries = decision_ledger([(1, 0.0, 1.0)], {1: 4.5}, [(1.5, 4.0)], bound=1.0, observed_until=10.0)
    assert entries[0].due_from == 4.0 and entries[0].status == "applied"
    # never seen, but replaced 0.5 s after its acknowledgement: superseded, counted as applied
    entries = decision_ledger([(1, 0.0, 1.0), (2, 1.2, 1.5)], {2: 1.7}, [], bound=1.0, observed_until=10.0)
    assert entries[0].status == "superseded" and entries[0].applied
    # the bound ran out after the observation ended: not counted either way
    entries = decision_ledger([(1, 0.0, 9.5)], {}, [], bound=1.0, observed_until=10.0)
    assert entries[0].status == "unobserved" and Ledger([], entries).decisions_acked == 0


def test_parse_seeds() -> None:
    assert parse_seeds("1,2,3") == [1, 2, 3]
    assert parse_seeds("1-3,7,2") == [1, 2, 3, 7]
    for bad in ("a", "3-1", ""):
        with pytest.raises(ValueError):
            parse_seeds(bad)
