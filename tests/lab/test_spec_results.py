"""Topology descriptions (routes along shortest paths) and result summaries/plots."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from mlfc.lab import results
from mlfc.topologies import dumbbell, leaf_spine


def test_dumbbell_routes_cross_the_bottleneck() -> None:
    topo = dumbbell(jobs=3, workers_per_job=2)
    assert len(topo.hosts) == 9 and topo.bottleneck_ports() == [("s1", 1), ("s2", 1)]
    routes = {r.prefix: r for r in topo.routes("s1")}
    for host in topo.hosts.values():
        r = routes[f"{host.ip}/32"]
        if host.role == "ps":
            assert r.port == 1 and r.dst_mac == topo.switches["s2"].port_mac(1)
        else:
            assert r.port != 1 and r.dst_mac == host.mac
        assert r.src_mac == topo.switches["s1"].port_mac(r.port)
    assert len({h.ip for h in topo.hosts.values()}) == len(topo.hosts)
    assert len({h.mac for h in topo.hosts.values()}) == len(topo.hosts)


def test_leaf_spine_routes_reach_every_host_from_every_switch() -> None:
    topo = leaf_spine(jobs=2, workers_per_job=2, leaves=3, spines=2)
    for sw in topo.switches:
        routes = topo.routes(sw)
        assert len(routes) == len(topo.hosts)
        ports = set(topo.switch_ports(sw))
        assert all(r.port in ports for r in routes)


def test_bad_topologies_are_rejected() -> None:
    with pytest.raises(ValueError):
        dumbbell(jobs=0)
    with pytest.raises(ValueError):
        leaf_spine(jobs=1, leaves=1)


def _rec(job: int, it: int, start: float, dur: float) -> results.IterationRecord:
    return results.IterationRecord("s", job, f"w{job}", it, start, start + dur / 2, start + dur, start + dur, 1000)


def test_summary_and_percentiles(tmp_path: Path) -> None:
    recs = [_rec(1, i, i * 2.0, 2.0) for i in range(5)] + [_rec(2, i, i * 3.0, 3.0 + i) for i in range(5)]
    per_job, overall = results.summarise(recs, skip_warmup=1)
    assert per_job[0].avg == pytest.approx(2.0) and per_job[0].iterations == 4
    assert per_job[1].p99 == pytest.approx(7.0)
    assert overall.iterations == 8
    assert results.percentile([], 99) != results.percentile([], 99)  # NaN
    assert results.percentile([1, 2, 3, 4], 50) == 2
    results.write_csv(tmp_path / "r.csv", recs)
    assert results.read_csv(tmp_path / "r.csv") == recs
    results.plot_timeline(tmp_path / "t.png", recs, "test")
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"
    table = results.format_table(["job", "avg"], [[1, 2.0], [2, math.nan]])
    assert "2.000" in table and "-" in table.splitlines()[-1]


def test_ideal_iteration_times() -> None:
    from mlfc.lab.scenarios import ideal_iteration_times

    # Compatible (0.4 + 0.4 <= 1): as fast as alone.
    assert ideal_iteration_times({1: 1.0, 2: 1.0}, {1: 0.4, 2: 0.4}) == {1: 1.0, 2: 1.0}
    # Partially compatible (0.65 + 0.65 = 1.3): the link is the limit, every job 1.3x slower.
    ideal = ideal_iteration_times({1: 1.0, 2: 2.0}, {1: 0.65, 2: 1.3})
    assert ideal[1] == pytest.approx(1.3) and ideal[2] == pytest.approx(2.6)
    # Split into push and pull, the same jobs load each direction of a full-duplex link with only
    # 0.65: one job's pull runs beside the other's push, so both can iterate as fast as alone...
    split = ideal_iteration_times({1: 1.0, 2: 2.0}, {1: 0.65, 2: 1.3}, {1: 0.325, 2: 0.65})
    assert split[1] == pytest.approx(1.0) and split[2] == pytest.approx(2.0)
    # ...while push-heavy jobs overload the push direction: 0.6 + 0.6 = 1.2.
    heavy = ideal_iteration_times({1: 1.0, 2: 1.0}, {1: 0.7, 2: 0.7}, {1: 0.6, 2: 0.6})
    assert heavy[1] == pytest.approx(1.2)
    # A job without the split falls back to the whole phase against one resource.
    assert ideal_iteration_times({1: 1.0, 2: 1.0}, {1: 0.65, 2: 0.65}, {1: 0.3, 2: math.nan})[1] == pytest.approx(1.3)


def _phased(job: int, it: int, comm_start: float, push: float, pull: float) -> results.IterationRecord:
    end = comm_start + push + pull
    return results.IterationRecord(
        "s", job, "w0", it, comm_start - 0.6, comm_start, end, end, 1000, push_end=comm_start + push
    )


def test_interleaving_compares_pushes_with_pushes_and_pulls_with_pulls(tmp_path: Path) -> None:
    from mlfc.lab.scenarios import interleaving_iteration

    # Job 2 starts its push as job 1's push ends: job 1's pull and job 2's push overlap in time but
    # cross the link in opposite directions. Iterations 0-1 collide, from 2 on they are offset.
    recs = []
    for it in range(6):
        offset = 0.0 if it < 2 else 0.2
        recs += [_phased(1, it, it * 1.0, 0.2, 0.2), _phased(2, it, it * 1.0 + offset, 0.2, 0.2)]
    assert interleaving_iteration(recs) == 2
    # Without the push/pull split the same spans overlap by half: never interleaved.
    whole = [
        results.IterationRecord(
            *[
                getattr(r, f)
                for f in ("scenario", "job", "worker", "iteration", "start", "comm_start", "comm_end", "end", "bytes")
            ]
        )
        for r in recs
    ]
    assert interleaving_iteration(whole) is None
    # The split survives a CSV round trip and the plot draws it.
    per_job, _ = results.summarise(recs, skip_warmup=0)
    assert per_job[0].push_avg == pytest.approx(0.2)
    results.write_csv(tmp_path / "p.csv", recs)
    assert results.read_csv(tmp_path / "p.csv") == recs
    results.plot_timeline(tmp_path / "p.png", recs, "phases")


def test_circular_ring_pairs_share_exactly_one_link_direction() -> None:
    from mlfc.topologies import circular_ring

    topo = circular_ring()
    assert len(topo.bottleneck_ports()) == 6

    def path(src: str, dst: str) -> list[tuple[str, str]]:
        """Switch-to-switch hops of a packet from host src to host dst."""
        sw = next(n for _, n, _ in topo.neighbours(src))
        hops = []
        while True:
            port = next(r.port for r in topo.routes(sw) if r.prefix == f"{topo.hosts[dst].ip}/32")
            nxt = next(n for p, n, _ in topo.neighbours(sw) if p == port)
            if nxt == dst:
                return hops
            hops.append((sw, nxt))
            sw = nxt

    pushes = {j: set(path(f"j{j}w0", f"j{j}ps")) for j in (1, 2, 3)}
    pulls = {j: set(path(f"j{j}ps", f"j{j}w0")) for j in (1, 2, 3)}
    for a, b in ((1, 2), (2, 3), (3, 1)):
        assert len(pushes[a] & pushes[b]) == 1, (a, b, pushes)
        assert len(pulls[a] & pulls[b]) == 1
    assert all(len(p) == 2 for p in pushes.values())
    assert all({(y, x) for x, y in pushes[j]} == pulls[j] for j in (1, 2, 3)), "a pull retraces its push"
