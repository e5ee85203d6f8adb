"""Intent compilation: validation names the field; entries reproduce the shared policy functions."""

from __future__ import annotations

import pytest
from controller_helpers import make_config, switch_doc
from hypothesis import given, settings
from hypothesis import strategies as st
from table_model import lookup

from mlfc import contract
from mlfc.controller import compile as comp
from mlfc.controller import validate
from mlfc.controller.entries import Lpm, Range, Ternary
from mlfc.controller.errors import ValidationError
from mlfc.policy import drop, ecn, priority
from mlfc.policy.telemetry import rate_class
from mlfc.proto import intent_pb2 as pb

CONFIG = make_config(switch_doc("s1", 50051, 1), switch_doc("s2", 50052, 2))


def compiled(intent: pb.Intent, switch: str = "s1") -> tuple[comp.TableEntry, ...]:
    return comp.compile_intent(intent, CONFIG).entries[switch]


def job_class(entries, job: int, iteration: int = 0, progress: int = 0) -> int:
    e = lookup(
        entries,
        contract.JOB_PRIORITY,
        {contract.JOB_ID: job, contract.ITERATION: iteration, contract.PROGRESS: progress},
    )
    return contract.PRIORITY_DEFAULT if e is None else e.params_dict()["priority"]


# ---- job priorities -----------------------------------------------------------------------------


def test_window_beats_the_job_wide_entry() -> None:
    intent = pb.Intent(
        jobs=[
            pb.JobIntent(job_id=5, priority=2, windows=[pb.IterationWindow(first=10, last=20, priority=6)]),
            pb.JobIntent(job_id=9, priority=0),
        ]
    )
    entries = compiled(intent)
    jp = [e for e in entries if e.table == contract.JOB_PRIORITY]
    job_wide = next(e for e in jp if e.match == ((contract.JOB_ID, Ternary(5, 0xFFFF)),))
    window = next(e for e in jp if contract.ITERATION in e.match_dict())
    assert window.priority > job_wide.priority > 0
    assert window.match_dict() == {contract.JOB_ID: Ternary(5, 0xFFFF), contract.ITERATION: Range(10, 20)}
    assert window.params_dict() == {"priority": 6}
    # Behaviour: a window iteration takes the window's class, all others the job's class.
    assert [job_class(entries, 5, it) for it in (9, 10, 15, 20, 21)] == [2, 6, 6, 6, 2]
    assert job_class(entries, 9, 15) == 0  # demoted below the default
    assert job_class(entries, 77, 15) == contract.PRIORITY_DEFAULT  # unknown job: default action


def test_interleaving_bands_come_from_the_policy_and_spare_job_0_and_listed_jobs() -> None:
    entries = compiled(pb.Intent(jobs=[pb.JobIntent(job_id=5, priority=4)], interleaving=True))
    bands = priority.interleaving_bands()
    band_entries = [e for e in entries if contract.PROGRESS in e.match_dict()]
    assert sorted((e.match_dict()[contract.PROGRESS], e.params_dict()["priority"]) for e in band_entries) == sorted(
        (Range(b.lo, b.hi), b.priority) for b in bands
    )
    for b in bands:
        for progress in (b.lo, b.hi):
            assert job_class(entries, 8, 0, progress) == b.priority  # a job without its own class
            assert job_class(entries, 5, 0, progress) == 4  # a job with its own class keeps it
            assert job_class(entries, 0, 0, progress) == contract.PRIORITY_DEFAULT  # untagged traffic


def test_no_interleaving_entries_unless_asked() -> None:
    assert not [e for e in compiled(pb.Intent()) if contract.PROGRESS in e.match_dict()]


# ---- ECN, drop -------------------------------------------------------------------------------------


def mark_probability(entries, port: int, depth: int) -> float:
    e = lookup(entries, contract.ECN_PROFILE, {contract.EGRESS_PORT: port, contract.ENQ_QDEPTH: depth})
    if e is None or e.action == contract.NO_MARK:
        return 0.0
    if e.action == contract.MARK_ALWAYS:
        return 1.0
    return e.params_dict()["threshold"] / ecn.RANDOM_RANGE


def test_ecn_ranges_equal_compile_profile() -> None:
    profile = CONFIG.defaults.ecn
    entries = [e for e in compiled(pb.Intent()) if e.table == contract.ECN_PROFILE]
    got = [(e.match_dict()[contract.ENQ_QDEPTH], e.action, e.params_dict().get("threshold")) for e in entries]
    want = [
        (
            Range(r.lo, r.hi),
            contract.MARK_ALWAYS if r.always else contract.MARK_WITH_PROBABILITY,
            None if r.always else r.threshold,
        )
        for r in ecn.compile_profile(profile)
    ]
    assert got == want
    assert all(contract.EGRESS_PORT not in e.match_dict() for e in entries)  # every port


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 60), st.integers(0, 60), st.floats(0, 1), st.integers(0, 70), st.sampled_from(["s1", ""]))
def test_a_ports_own_profile_shadows_the_default_at_every_depth(
    a: int, b: int, pmax: float, depth: int, sw: str
) -> None:
    own = ecn.EcnProfile(min(a, b), max(a, b), pmax)
    intent = pb.Intent(
        ecn=[pb.PortEcn(switch=sw, port=3, profile=pb.EcnProfile(kmin=own.kmin, kmax=own.kmax, pmax=pmax))]
    )
    entries = compiled(intent)
    own_ranges = ecn.compile_profile(own)
    default_ranges = ecn.compile_profile(CONFIG.defaults.ecn)
    assert mark_probability(entries, 3, depth) == ecn.compiled_probability(own_ranges, depth)
    assert mark_probability(entries, 1, depth) == ecn.compiled_probability(default_ranges, depth)
    # s2 gets the port profile only when it was given for every switch.
    s2_expect = own_ranges if sw == "" else default_ranges
    assert mark_probability(compiled(intent, "s2"), 3, depth) == ecn.compiled_probability(s2_expect, depth)


def test_intent_ecn_for_every_port_replaces_the_default() -> None:
    intent = pb.Intent(ecn=[pb.PortEcn(profile=pb.EcnProfile(kmin=1, kmax=2, pmax=1.0))])
    entries = compiled(intent)
    assert mark_probability(entries, 1, 1) == 0.0
    assert mark_probability(entries, 1, 2) == 1.0


def test_drop_levels_and_thresholds_come_from_the_policy() -> None:
    policy = drop.DropPolicy((10, 20, 30), (0, 3, 5, 8))
    entries = compiled(pb.Intent(drop_policy=pb.DropPolicy(level_depths=[10, 20, 30], min_importance=[0, 3, 5, 8])))
    levels = sorted(
        (e.match_dict()[contract.DEQ_QDEPTH], e.params_dict()["l"])
        for e in entries
        if e.table == contract.CONGESTION_LEVELS
    )
    assert levels == [(Range(lo, hi), lvl) for lo, hi, lvl in drop.level_ranges(policy)]
    for q in (0, 9, 10, 19, 20, 30, contract.MAX_QDEPTH):
        e = lookup(entries, contract.CONGESTION_LEVELS, {contract.DEQ_QDEPTH: q})
        assert (0 if e is None else e.params_dict()["l"]) == drop.congestion_level(policy, q)
    for level in range(drop.NUM_LEVELS):
        e = lookup(entries, contract.DROP_THRESHOLD, {contract.LEVEL: level})
        assert (0 if e is None else e.params_dict()["importance"]) == policy.min_importance[level]


def test_unset_fields_fall_back_to_the_deployment_defaults() -> None:
    policy = validate.validate_intent(pb.Intent(), CONFIG)
    assert policy.drop_policy == CONFIG.defaults.drop_policy
    assert policy.ecn_for_switch("s1") == {(validate.EVERY_PORT, validate.EVERY_CLASS): CONFIG.defaults.ecn}
    assert policy.interleaving is False


# ---- routes, flows ------------------------------------------------------------------------------


def test_routes_come_from_the_deployment_file() -> None:
    routes = [e for e in compiled(pb.Intent()) if e.table == contract.ROUTES_V4]
    assert {(e.match_dict()[contract.IPV4_DST], e.params_dict()["port"]) for e in routes} == {
        (Lpm(0x0A000101, 32), 1),
        (Lpm(0x0A000200, 24), 2),
    }
    assert routes[0].params_dict()["src_mac"] == 0x000000000100


def test_more_specific_flows_win() -> None:
    intent = pb.Intent(
        jobs=[
            pb.JobIntent(job_id=1, priority=3, flows=[pb.Flow(dst="10.0.2.0/24")]),
            pb.JobIntent(job_id=2, priority=3, flows=[pb.Flow(dst="10.0.2.5", protocol=17, dst_port=4791)]),
        ]
    )
    entries = compiled(intent)

    def job_of(dst: int, proto: int, dport: int) -> int | None:
        fields = {
            contract.IPV4_SRC: 0x0A000101,
            contract.IPV4_DST: dst,
            contract.IP_PROTOCOL: proto,
            contract.L4_SRC_PORT: 1234,
            contract.L4_DST_PORT: dport,
        }
        e = lookup(entries, contract.FLOWS, fields)
        return None if e is None else e.params_dict()["job_id"]

    assert job_of(0x0A000205, 17, 4791) == 2
    assert job_of(0x0A000205, 6, 4791) == 1
    assert job_of(0x0A000206, 17, 4791) == 1
    assert job_of(0x0A000305, 17, 4791) is None


# ---- validation ---------------------------------------------------------------------------------


def _job(**kw) -> pb.JobIntent:
    kw.setdefault("job_id", 1)
    kw.setdefault("priority", 3)
    return pb.JobIntent(**kw)


@pytest.mark.parametrize(
    ("intent", "field", "text"),
    [
        (pb.Intent(jobs=[_job(job_id=0)]), "jobs[0].job_id", "no job"),
        (pb.Intent(jobs=[_job(job_id=70000)]), "jobs[0].job_id", "out of range"),
        (pb.Intent(jobs=[_job(), _job(priority=7)]), "jobs[1].priority", "reserved"),
        (pb.Intent(jobs=[_job(priority=12)]), "jobs[0].priority", "out of range"),
        (pb.Intent(jobs=[_job(), _job(job_id=2), _job(job_id=1)]), "jobs[2].job_id", "duplicate of jobs[0]"),
        (
            pb.Intent(jobs=[_job(windows=[pb.IterationWindow(first=5, last=4, priority=2)])]),
            "jobs[0].windows[0].first",
            "> last",
        ),
        (
            pb.Intent(jobs=[_job(windows=[pb.IterationWindow(first=1, last=4, priority=7)])]),
            "jobs[0].windows[0].priority",
            "reserved",
        ),
        (
            pb.Intent(jobs=[_job(windows=[pb.IterationWindow(first=1, last=4), pb.IterationWindow(first=4, last=9)])]),
            "jobs[0].windows[1]",
            "overlap windows[0]",
        ),
        (pb.Intent(jobs=[_job(flows=[pb.Flow(src="10.0.0.300")])]), "jobs[0].flows[0].src", "not an IPv4 prefix"),
        (pb.Intent(jobs=[_job(flows=[pb.Flow(dst="10.0.1.5/24")])]), "jobs[0].flows[0].dst", "host bits"),
        (pb.Intent(jobs=[_job(flows=[pb.Flow(protocol=300)])]), "jobs[0].flows[0].protocol", "0..255"),
        (pb.Intent(jobs=[_job(flows=[pb.Flow(dst_port=70000)])]), "jobs[0].flows[0].dst_port", "0..65535"),
        (
            pb.Intent(jobs=[_job(flows=[pb.Flow(dst="10.0.0.1")]), _job(job_id=2, flows=[pb.Flow(dst="10.0.0.1/32")])]),
            "jobs[1].flows[0]",
            "same 5-tuple as jobs[0].flows[0]",
        ),
        (
            pb.Intent(ecn=[pb.PortEcn(port=1, profile=pb.EcnProfile(kmin=9, kmax=4))]),
            "ecn[0].profile",
            "kmin=9 > kmax=4",
        ),
        (pb.Intent(ecn=[pb.PortEcn(port=1, profile=pb.EcnProfile(kmax=4, pmax=1.5))]), "ecn[0].profile", "pmax"),
        (pb.Intent(ecn=[pb.PortEcn(port=1)]), "ecn[0].profile", "required"),
        (pb.Intent(ecn=[pb.PortEcn(switch="s9", profile=pb.EcnProfile())]), "ecn[0].switch", "unknown switch 's9'"),
        (pb.Intent(ecn=[pb.PortEcn(switch="s1", port=7, profile=pb.EcnProfile())]), "ecn[0].port", "not a port of s1"),
        (pb.Intent(ecn=[pb.PortEcn(port=600, profile=pb.EcnProfile())]), "ecn[0].port", "out of range"),
        (
            pb.Intent(ecn=[pb.PortEcn(port=1, profile=pb.EcnProfile()), pb.PortEcn(port=1, profile=pb.EcnProfile())]),
            "ecn[1]",
            "same switch/port as ecn[0]",
        ),
        (
            pb.Intent(drop_policy=pb.DropPolicy(level_depths=[5, 3, 9], min_importance=[0, 1, 2, 3])),
            "drop_policy",
            "level_depths[1]",
        ),
        (
            pb.Intent(drop_policy=pb.DropPolicy(level_depths=[1, 2, 3], min_importance=[1, 1, 2, 3])),
            "drop_policy",
            "min_importance[0]",
        ),
    ],
)
def test_bad_intents_name_the_field(intent: pb.Intent, field: str, text: str) -> None:
    with pytest.raises(ValidationError) as err:
        comp.compile_intent(intent, CONFIG)
    assert err.value.field == field
    assert text in str(err.value)


def test_unknown_fields_are_rejected_with_their_path() -> None:
    job = pb.JobIntent(job_id=3, priority=2)
    # Field 9 (varint) of a newer JobIntent, as an old server receives it.
    job_with_unknown = pb.JobIntent.FromString(job.SerializeToString() + bytes([0x48, 0x05]))
    intent = pb.Intent(jobs=[pb.JobIntent(job_id=1), job_with_unknown])
    with pytest.raises(ValidationError) as err:
        comp.compile_intent(intent, CONFIG)
    assert err.value.field == "jobs[1]"
    assert "unknown field number(s) [9]" in str(err.value)


def test_compilation_is_deterministic_and_keys_are_unique() -> None:
    intent = pb.Intent(
        jobs=[_job(job_id=i, windows=[pb.IterationWindow(first=i, last=i + 3, priority=5)]) for i in range(1, 50)],
        interleaving=True,
        ecn=[pb.PortEcn(port=2, profile=pb.EcnProfile(kmin=2, kmax=9, pmax=0.5))],
    )
    a, b = compiled(intent), compiled(intent)
    assert a == b
    assert len({e.key for e in a}) == len(a)


# ---- port rates (the telemetry's rate class) -------------------------------------------------------------


def test_each_route_carries_its_ports_configured_rate_as_its_rate_class() -> None:
    """set_next_hop's rate_class: the rate its port is configured with (packets/s at defaults.packet_bytes, or
    bits/s), as the class the telemetry carries (mlfc.policy.telemetry); a port without a rate of its own has
    the deployment default's; no rate anywhere: class 0, unknown."""
    routes = [{"prefix": f"10.0.{p}.0/24", "port": p, "src_mac": "00:00:00:00:00:01", "dst_mac": "00:00:00:00:00:02"}
              for p in (1, 2, 3)]  # fmt: skip
    cfg = make_config(
        {
            **switch_doc("s1", 50051, 1, target="refswitch"),
            "ports": [1, {"port": 2, "rate_bps": 10**9}, {"port": 3, "rate_pps": 1000}],
            "routes_v4": routes,
        },
        defaults={"packet_bytes": 1000, "queue": {"rate_pps": 500}},
    )

    def classes(entries) -> dict[int, int]:
        return {
            e.params_dict()["port"]: e.params_dict()["rate_class"] for e in entries if e.table == contract.ROUTES_V4
        }

    got = classes(comp.compile_intent(pb.Intent(), cfg).entries["s1"])
    assert got == {1: rate_class(500 * 8000), 2: rate_class(1e9), 3: rate_class(1000 * 8000)}
    bare = classes(compiled(pb.Intent()))
    assert bare == {1: 0, 2: 0}  # switch_doc rates port 3 only, which none of its routes takes
