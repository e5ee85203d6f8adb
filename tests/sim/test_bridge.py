"""The policy bridge: the simulated switch and MLTCP compute exactly what mlfc/policy says.

The pure half checks the controller's entries as the bridge reads them; the ns-3 half evaluates
the loaded C++ tables over grids and compares with the Python policy functions."""

from __future__ import annotations

import pytest

from mlfc import contract
from mlfc.policy import drop, ecn, priority
from mlfc.policy.drop import DropPolicy
from mlfc.policy.ecn import EcnProfile
from mlfc.policy.mltcp import MltcpParams, bytes_ratio, mltcp_factor
from mlfc.proto import intent_pb2 as ipb
from mlfc.sim import bridge
from mlfc.wire import PROGRESS_BUCKETS, progress_bucket

PROFILE = EcnProfile(kmin=4, kmax=32, pmax=0.2)
PORT_PROFILE = EcnProfile(kmin=10, kmax=20, pmax=0.5)
POLICY = DropPolicy(level_depths=(8, 20, 40), min_importance=(0, 3, 5, 8))


def _intent() -> ipb.Intent:
    intent = ipb.Intent(interleaving=True)
    intent.jobs.add(job_id=1, priority=5)
    j2 = intent.jobs.add(job_id=2, priority=3)
    j2.windows.add(first=10, last=20, priority=6)
    intent.ecn.add(switch="s1", port=2, profile=ipb.EcnProfile(kmin=10, kmax=20, pmax=0.5))
    return intent


def _tables() -> dict[str, bridge.Tables]:
    return bridge.compile_tables(_intent(), bridge.deployment(["s1", "s2"], PROFILE, POLICY))


def expected_class(job: int, iteration: int, progress: int) -> int:
    """What the intent means, from the policy module alone."""
    if job == 1:
        return 5
    if job == 2:
        return 6 if 10 <= iteration <= 20 else 3
    if job == 0:
        return contract.PRIORITY_DEFAULT
    return next(b.priority for b in priority.interleaving_bands() if b.lo <= progress <= b.hi)


def test_bridge_reads_every_policy_table() -> None:
    t = _tables()["s1"]
    assert {r.cls for r in t.priority} >= {5, 3, 6}
    assert t.min_importance == POLICY.min_importance
    assert [(r.depth, r.level) for r in t.levels] == [((lo, hi), lv) for lo, hi, lv in drop.level_ranges(POLICY)]
    assert any(r.port == (2, 0x1FF) for r in t.ecn) and any(r.port == (0, 0) for r in t.ecn)
    assert not any(r.port == (2, 0x1FF) for r in _tables()["s2"].ecn)  # the port profile is s1's only


def test_bridge_rejects_tables_it_does_not_model() -> None:
    from mlfc.controller.entries import TableEntry

    with pytest.raises(bridge.BridgeError, match="not modelled"):
        bridge.tables_from_entries([TableEntry("MlfcIngress.something", (), "x")])
    with pytest.raises(ValueError, match="priorities"):
        bridge.treatment_intent("fastest")


@pytest.mark.ns3
def test_switch_tables_match_the_policy(sim_env) -> None:
    m = sim_env.mlfc
    cpp = {}
    for sw, tables in _tables().items():
        cpp[sw] = m.SwitchTables()
        bridge.load(cpp[sw], tables)
    s1, s2 = cpp["s1"], cpp["s2"]
    for job in (0, 1, 2, 3, 77):
        for it in (0, 9, 10, 15, 20, 21, contract.MAX_ITERATION):
            for prog in range(PROGRESS_BUCKETS):
                assert s1.ClassOf(job, it, prog) == expected_class(job, it, prog), (job, it, prog)
    general = ecn.compile_profile(PROFILE)
    own = ecn.compile_profile(PORT_PROFILE)
    for depth in range(0, 70):
        assert s1.LevelOf(depth) == drop.congestion_level(POLICY, depth)
        for port, ranges in ((1, general), (2, own), (3, general)):
            want = ecn.compiled_probability(ranges, depth)
            thr = s1.EcnThreshold(port, 1, depth)
            got = 1.0 if thr >= ecn.RANDOM_RANGE else thr / ecn.RANDOM_RANGE
            assert got == pytest.approx(want, abs=1e-12), (port, depth)
        assert s2.EcnThreshold(2, 1, depth) == s2.EcnThreshold(1, 1, depth)
    for level in range(drop.NUM_LEVELS):
        assert ord(s1.minImportance[level]) == POLICY.min_importance[level]  # uint8_t reads as a char


@pytest.mark.ns3
@pytest.mark.parametrize("params", [MltcpParams(), MltcpParams(1.0, 0.5), MltcpParams(16.0, 0.125)])
def test_mltcp_factor_matches_python_over_a_grid(sim_env, params: MltcpParams) -> None:
    m = sim_env.mlfc
    progress = m.FlowProgress()
    state = m.MltcpState()
    state.enabled, state.slope, state.intercept = True, params.slope, params.intercept
    state.progress = progress
    for per in (0, 1, 1448, 1_000_000, 3_000_000_017):
        for frac in (0.0, 0.001, 0.25, 0.5, 0.7777, 0.999, 1.0, 1.5, 10.0):
            sent = int(frac * per)
            progress.bytesPerIteration = per
            progress.iterationBase = 123_456
            progress.highSent = 123_456 + sent
            assert state.Factor() == pytest.approx(mltcp_factor(bytes_ratio(sent, per), params), rel=1e-12)
            if per:
                assert progress.BucketAt(123_456 + sent) == progress_bucket(sent / per)
    state.enabled = False
    assert state.Factor() == 1.0


@pytest.mark.ns3
def test_importance_pattern_reaches_the_tag(sim_env) -> None:
    progress = sim_env.mlfc.FlowProgress()
    progress.chunkBytes = 1000
    for c in (0, 9, 3):
        progress.importance.push_back(c)
    progress.iterationBase = 5000
    got = [int(progress.ImportanceAt(5000 + k * 1000 + 1)) for k in range(7)]
    assert got == [0, 9, 3, 0, 9, 3, 0]
