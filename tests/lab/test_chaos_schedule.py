"""The chaos schedule (lab/chaos_schedule.py): seeded, every component in turn, spread over the run's middle."""

from __future__ import annotations

import pytest

from mlfc.lab.chaos_schedule import COMPONENTS, schedule


def test_same_seed_same_schedule_and_every_component_in_each_cycle() -> None:
    a = schedule(16, 12, 150, ["s1", "s2"])
    assert a == schedule(16, 12, 150, ["s1", "s2"])
    assert a != schedule(17, 12, 150, ["s1", "s2"])
    for cycle in (a[:6], a[6:]):
        assert sorted(f.component for f in cycle) == sorted(COMPONENTS)
    its = [f.at_iteration for f in a]
    assert its == sorted(its) and len(set(its)) == len(its)
    assert its[0] >= 15 and its[-1] <= 120, "faults leave iterations before the first and after the last"
    assert all(0.2 <= f.outage_s <= 2.0 for f in a)
    assert {f.target for f in a if f.component == "switch"} <= {"s1", "s2"}


def test_too_few_iterations_for_the_faults_is_refused() -> None:
    with pytest.raises(ValueError, match="too few"):
        schedule(1, 10, 20, ["s1"])
    with pytest.raises(ValueError):
        schedule(1, 0, 100, ["s1"])


def test_a_previous_run_of_the_seed_leaves_nothing_the_next_one_reads(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from mlfc.lab.chaos_run import clear_previous_run

    old = ["w0.log", "w1.log", "ps.log", "coordinator.log", "acks-w0.jsonl", "ps.ckpt", "coordinator.db-wal", "token"]
    for name in old:
        (tmp_path / name).write_text('{"iteration": 149}\n')
    (tmp_path / "notes.txt").write_text("mine")
    clear_previous_run(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    clear_previous_run(tmp_path / "new")  # a first run: the folder is made
    assert (tmp_path / "new").is_dir()
