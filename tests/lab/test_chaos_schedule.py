"""The chaos schedule (lab/chaos/schedule.py): seeded, every component in turn, spread over the run's middle."""

from __future__ import annotations

import pytest

from mlfc.lab.chaos.schedule import KINDS, LINK, chaos_topology, schedule, switch_links

LINKS = ["s1-s2"]


def test_same_seed_same_schedule_and_every_kind_of_fault_in_each_cycle() -> None:
    n = 2 * len(KINDS)
    a = schedule(16, n, 300, ["s1", "s2"], LINKS)
    assert a == schedule(16, n, 300, ["s1", "s2"], LINKS)
    assert a != schedule(17, n, 300, ["s1", "s2"], LINKS)
    for cycle in (a[: len(KINDS)], a[len(KINDS) :]):
        assert sorted((f.component, f.action) for f in cycle) == sorted(KINDS)
    assert {a for _, a in KINDS} == {"kill", "stop", "down"}
    its = [f.at_iteration for f in a]
    assert its == sorted(its) and len(set(its)) == len(its)
    assert its[0] >= 30 and its[-1] <= 240, "faults leave iterations before the first and after the last"
    assert all(0.2 <= f.outage_s <= 2.0 for f in a)
    assert {f.target for f in a if f.component == "switch"} <= {"s1", "s2"}
    assert {f.target for f in a if f.component == LINK} == {"s1-s2"}
    assert {f.describe() for f in a if f.target == "ps"} == {"kill -9 ps", "SIGSTOP ps"}


def test_link_faults_take_down_only_links_between_switches() -> None:
    assert switch_links(chaos_topology()) == ["ks1-ks2"]


def test_too_few_iterations_for_the_faults_is_refused() -> None:
    with pytest.raises(ValueError, match="too few"):
        schedule(1, 10, 20, ["s1"], LINKS)
    with pytest.raises(ValueError):
        schedule(1, 0, 100, ["s1"], LINKS)
    with pytest.raises(ValueError, match="no link"):
        schedule(1, 5, 100, ["s1"], [])
    with pytest.raises(ValueError, match="choose among"):
        schedule(1, 5, 100, ["s1"], LINKS, ("kill", "reboot"))


def test_actions_limit_the_kinds_of_fault() -> None:
    a = schedule(3, 12, 150, ["s1", "s2"], [], ("kill", "stop"))
    assert sorted((f.component, f.action) for f in a) == sorted(k for k in KINDS if k[1] != "down")


def test_a_previous_run_of_the_seed_leaves_nothing_the_next_one_reads(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from mlfc.lab.chaos.run import clear_previous_run

    old = ["w0.log", "w1.log", "ps.log", "coordinator.log", "acks-w0.jsonl", "ps.ckpt", "coordinator.db-wal", "token"]
    for name in old:
        (tmp_path / name).write_text('{"iteration": 149}\n')
    (tmp_path / "notes.txt").write_text("mine")
    clear_previous_run(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    clear_previous_run(tmp_path / "new")  # a first run: the folder is made
    assert (tmp_path / "new").is_dir()
