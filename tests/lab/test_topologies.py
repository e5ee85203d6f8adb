"""topologies/: the shared topology definitions build by name, keep the address plan, and route every
host pair; the chaos test's dumbbell uses names of its own."""

from __future__ import annotations

import pytest

from mlfc.topologies import BUILDERS, build, circular_ring, dumbbell, job_dumbbell, leaf_spine


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_every_named_topology_routes_every_host_from_every_switch(name: str) -> None:
    topo = build(name, 3, 1)
    assert topo.bottleneck_ports(), name
    for sw in topo.switches:
        assert {r.prefix for r in topo.routes(sw)} == {f"{h.ip}/32" for h in topo.hosts.values()}


def test_unknown_names_are_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="expected one of dumbbell, leaf-spine, ring"):
        build("torus", 2)


def test_the_address_plan_is_shared() -> None:
    for topo in (dumbbell(2), leaf_spine(2), circular_ring(3)):
        assert topo.hosts["j2ps"].ip == "10.0.2.101" and topo.hosts["j1w0"].ip == "10.0.1.1", topo.name
        assert topo.hosts["j2ps"].role == "ps" and topo.hosts["j2ps"].job == 2


def test_the_chaos_dumbbell_has_names_of_its_own() -> None:
    topo = job_dumbbell(1, 2, "k")
    assert set(topo.switches) == {"ks1", "ks2"}
    assert set(topo.hosts) == {"kj1w0", "kj1w1", "kj1ps"}
    assert topo.bottleneck_ports() == [("ks1", 1), ("ks2", 1)]
    assert not set(topo.hosts) & set(dumbbell(1, 2).hosts)
    with pytest.raises(ValueError, match="prefix"):
        job_dumbbell(1, 2, "")
