"""The fabric generators and ECMP's next hops (pure Python: no ns-3 needed)."""

from __future__ import annotations

import pytest

from mlfc.sim.jobs import PS, RING, SimJob, model_job
from mlfc.sim.lab import dumbbell
from mlfc.sim.metrics import comm_fraction, fabric_ideal, link_bytes, shared_groups
from mlfc.sim.topology import GBPS, from_lab, leaf_of, leaf_spine


def test_leaf_spine_shape_and_rates() -> None:
    t = leaf_spine(leaves=4, spines=2, hosts_per_leaf=8, host_rate_bps=100 * GBPS, oversubscription=2.0)
    assert len(t.hosts) == 32
    assert sorted(t.topology.switches) == [*(f"leaf{i}" for i in range(1, 5)), "spine1", "spine2"]
    uplinks = [t.rates[i] for i, lk in enumerate(t.topology.links) if lk.bottleneck]
    hostlinks = [t.rates[i] for i, lk in enumerate(t.topology.links) if not lk.bottleneck]
    assert len(uplinks) == 8 and set(uplinks) == {8 * 100 * GBPS / (2 * 2.0)}
    assert len(hostlinks) == 32 and set(hostlinks) == {100 * GBPS}
    assert len({h.ip for h in t.hosts.values()}) == 32
    assert leaf_of(t, "l3h5") == "leaf3"


def test_ecmp_next_hops_are_every_shortest_path() -> None:
    t = leaf_spine(leaves=4, spines=2, hosts_per_leaf=2)
    nh = t.next_hops()
    # remote destination: a leaf may use either spine; a spine has one way down; a host one way up
    assert sorted(n for _, n, _ in nh["leaf1"]["l3h1"]) == ["spine1", "spine2"]
    assert [n for _, n, _ in nh["spine2"]["l3h1"]] == ["leaf3"]
    assert [n for _, n, _ in nh["l1h1"]["l3h1"]] == ["leaf1"]
    # same leaf: straight down, never through a spine
    assert [n for _, n, _ in nh["leaf1"]["l1h2"]] == ["l1h2"]
    assert len(t.paths("l1h1", "l3h1")) == 2 and all(len(p) == 4 for p in t.paths("l1h1", "l3h1"))
    assert t.paths("l1h1", "l1h2") == [[("l1h1", "leaf1"), ("leaf1", "l1h2")]]
    # hosts never forward
    assert all(dst not in nh["l1h2"] or nh["l1h2"][dst][0][1] == "leaf1" for dst in t.hosts)


def test_from_lab_keeps_the_lab_topology_and_rates_its_bottleneck() -> None:
    lab = dumbbell(2)
    t = from_lab(lab, 1e9, 17e6, 1e-4)
    assert t.topology is lab
    for i, lk in enumerate(lab.links):
        assert t.rates[i] == (17e6 if lk.bottleneck else 1e9)
    assert [n for _, n, _ in t.next_hops()["s1"]["j1ps"]] == ["s2"]


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"leaves": 1}, "2 leaves"),
        ({"oversubscription": 0}, "oversubscription"),
        ({"hosts_per_leaf": 0}, "host per leaf"),
    ],
)
def test_leaf_spine_rejects_bad_shapes(kw: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        leaf_spine(**kw)


def test_job_validation_and_scaling() -> None:
    with pytest.raises(ValueError, match="needs a ps host"):
        SimJob(1, "x", 10, 10, 0.1, ("a",))
    with pytest.raises(ValueError, match="ring needs at least 2"):
        SimJob(1, "x", 10, 10, 0.1, ("a",), pattern=RING)
    with pytest.raises(ValueError, match="unknown model"):
        model_job(1, "alexnet", ("a",), "b")
    j = model_job(1, "resnet50", ("a",), "b", PS, scale=0.5)
    assert j.push_bytes == round(4 * 25_557_032 * 0.5) and j.compute_s == pytest.approx(0.06)


def test_fabric_ideal_and_shared_links() -> None:
    t = leaf_spine(leaves=4, spines=2, hosts_per_leaf=2, host_rate_bps=100 * GBPS)
    a = SimJob(1, "a", 1_000_000, 1_000_000, 0.001, ("l1h1",), "l3h1")
    b = SimJob(2, "b", 1_000_000, 1_000_000, 0.001, ("l2h1",), "l3h1")
    lb = link_bytes(t, a)
    assert lb[("l1h1", "leaf1")] == 1_000_000 and lb[("leaf1", "spine1")] == 500_000  # ECMP split
    assert sorted(shared_groups(t, [a, b])) == [("l3h1", "leaf3"), ("leaf3", "l3h1")]
    solo = {1: 0.00116, 2: 0.00116}
    # each push is 80 us on the PS link: two jobs load it to 2 * 80 / 1160 < 1, so ideal = solo
    assert fabric_ideal(t, [a, b], solo) == solo
    busy = {1: 0.0001, 2: 0.0001}
    ideal = fabric_ideal(t, [a, b], busy)
    assert ideal[1] == pytest.approx(0.0001 * 2 * 80e-6 / 0.0001)
    assert comm_fraction(t, a) == pytest.approx(160e-6 / (160e-6 + 0.001))
