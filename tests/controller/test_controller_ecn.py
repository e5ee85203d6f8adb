"""ECN per port and per class: the deployment file's ``defaults.ecn`` (RED or step, every port or a port,
every class or one), its errors, and the entries the controller compiles from it: what each (port,
class, depth) gets on the switch is the profile ``ecn_config.effective`` picks, in the switch's unit."""

from __future__ import annotations

from typing import Any

import pytest
from controller_helpers import PIPELINE, config_doc, make_config, needs_artifacts, switch_doc, target_doc
from hypothesis import given, settings
from hypothesis import strategies as st
from table_model import lookup

from mlfc import contract
from mlfc.controller import compile as comp
from mlfc.controller import ecn_config
from mlfc.controller.config import config_document, parse_config
from mlfc.controller.entries import Range, Ternary
from mlfc.controller.errors import ValidationError
from mlfc.controller.sync import SwitchConnection
from mlfc.policy import depth, ecn
from mlfc.proto import intent_pb2 as pb

STEP = {"step": {"k_bytes": 30_000}}
RED = {"red": {"kmin": 8, "kmax": 40, "pmax": 0.1}}


def config(ecn_section: Any, *switches: dict[str, Any], **defaults: Any) -> Any:
    docs = switches or (switch_doc("s1", 50051, 1), switch_doc("s2", 50052, 2))
    return make_config(*docs, defaults={"ecn": ecn_section, **defaults})


def entries_of(cfg: Any, intent: pb.Intent | None = None, switch: str = "s1") -> list[comp.TableEntry]:
    compiled = comp.compile_intent(intent or pb.Intent(), cfg).entries[switch]
    return [e for e in compiled if e.table == contract.ECN_PROFILE]


def probability(entries, port: int, klass: int, qdepth: int) -> float:  # type: ignore[no-untyped-def]
    e = lookup(entries, contract.ECN_PROFILE, {contract.EGRESS_PORT: port, contract.QUEUE_PRIORITY: klass,
                                              contract.ENQ_QDEPTH: qdepth})  # fmt: skip
    if e is None or e.action == contract.NO_MARK:
        return 0.0
    if e.action == contract.MARK_ALWAYS:
        return 1.0
    return e.params_dict()["threshold"] / ecn.RANDOM_RANGE


# ---- reading and writing the section ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("section", "default"),
    [
        ({"kmin": 4, "kmax": 32, "pmax": 0.2}, ecn.RedProfile(4, 32, 0.2)),  # the first form: RED in packets
        ({}, ecn.RedProfile()),
        ({"red": {"kmin": 2, "kmax": 9, "pmax": 0.5}}, ecn.RedProfile(2, 9, 0.5)),
        ({"dcqcn": {"kmin": 2}}, ecn.RedProfile(2, 32, 0.2)),
        (STEP, ecn.StepProfile(30_000)),
        ({"dctcp": {"k_bytes": 15_000}}, ecn.StepProfile(15_000)),
        ({"default": STEP, "ports": []}, ecn.StepProfile(30_000)),
        ({"ports": [{"port": 3, "profile": STEP}]}, ecn.RedProfile()),
    ],
)
def test_every_form_reads_and_writes_back(section: dict, default: ecn.MarkingProfile) -> None:
    cfg = config(section)
    assert cfg.defaults.ecn == default
    again = parse_config(config_document(cfg))
    assert (again.defaults.ecn, again.defaults.ecn_rules) == (cfg.defaults.ecn, cfg.defaults.ecn_rules)


def test_a_red_default_alone_is_written_in_the_first_form() -> None:
    """Configs written by the lab read the same as before: the default document is unchanged."""
    assert config_document(make_config(switch_doc()))["defaults"]["ecn"] == {"kmin": 4, "kmax": 32, "pmax": 0.2}


def test_rules_name_switch_port_and_class() -> None:
    cfg = config(
        {
            "default": {"kmin": 4, "kmax": 32, "pmax": 0.2},
            "ports": [
                {"priority": 5, "profile": STEP},
                {"switch": "s1", "port": 3, "profile": RED},
                {"switch": "s1", "port": 3, "priority": 5, "profile": {"dctcp": {"k_bytes": 4500}}},
                {"port": 2, "priority": 0, "profile": {"kmin": 1, "kmax": 2, "pmax": 1.0}},
            ],
        }
    )
    rules = cfg.defaults.ecn_rules
    assert [r.key for r in rules] == [("", 0, 5), ("s1", 3, None), ("s1", 3, 5), ("", 2, 0)]
    assert rules[2].profile == ecn.StepProfile(4500)
    assert rules[3].profile == ecn.RedProfile(1, 2, 1.0)
    assert config_document(cfg)["defaults"]["ecn"]["ports"][1] == {"switch": "s1", "port": 3, "profile": RED}


@pytest.mark.parametrize(
    ("section", "field", "message"),
    [
        ({"step": {"k_bytes": -1}}, "defaults.ecn.step.k_bytes", "byte count >= 0"),
        ({"dctcp": {"k_bytes": "30k"}}, "defaults.ecn.dctcp.k_bytes", "byte count"),
        ({"step": {}}, "defaults.ecn.step.k_bytes", "required"),
        ({"step": {"k": 3}}, "defaults.ecn.step.k", "unknown field"),
        ({"wred": {"kmin": 3}}, "defaults.ecn.wred", "unknown ECN profile kind 'wred'"),
        ({"red": {"kmin": 3}, "step": {"k_bytes": 3}}, "defaults.ecn", "one profile kind"),
        ({"red": {"kmin": 9, "kmax": 3}}, "defaults.ecn.red", "kmin=9 > kmax=3"),
        ({"default": STEP, "pmax": 0.1}, "defaults.ecn.pmax", "unknown field"),
        ({"default": "step"}, "defaults.ecn.default", "expected a profile"),
        ({"ports": [{"port": 3}]}, "defaults.ecn.ports[0].profile", "required"),
        ({"ports": [{"profile": STEP}]}, "defaults.ecn.ports[0]", "every port and class is `default`"),
        ({"ports": [{"priority": 8, "profile": STEP}]}, "defaults.ecn.ports[0].priority", "out of range 0..7"),
        ({"ports": [{"switch": "s9", "port": 1, "profile": STEP}]}, "defaults.ecn.ports[0].switch", "unknown switch"),
        ({"ports": [{"switch": "s1", "port": 7, "profile": STEP}]}, "defaults.ecn.ports[0].port", "not a port of s1"),
        (
            {"ports": [{"port": 3, "priority": 1, "profile": STEP}, {"port": 3, "priority": 1, "profile": RED}]},
            "defaults.ecn.ports[1]",
            "same switch/port/priority as defaults.ecn.ports[0]",
        ),
    ],
)
def test_bad_ecn_sections_name_the_field(section: Any, field: str, message: str) -> None:
    with pytest.raises(ValidationError) as err:
        config(section)
    assert message in str(err.value)
    assert err.value.field == field


def test_k_must_lie_below_what_a_packet_can_find_queued_where_it_is_in_force() -> None:
    """switch_doc's port 3 holds 32 packets: a packet finds at most 31 queued. K of 30 packets marks at 31;
    K of 31 would never mark."""
    config({"step": {"k_bytes": 30 * 1500 + 1499}})
    with pytest.raises(ValidationError, match=r"31 packets of 1500 bytes: on s1 port 3 \(class 0\)") as err:
        config({"step": {"k_bytes": 31 * 1500}})
    assert err.value.field == "defaults.ecn"
    with pytest.raises(ValidationError) as err:
        config({"ports": [{"port": 3, "priority": 6, "profile": {"step": {"k_bytes": 46_500}}}]})
    assert err.value.field == "defaults.ecn.ports[0].profile"
    # the same K on ports without a configured depth, or a port whose classes all have their own RED
    config({"ports": [{"port": 1, "profile": {"step": {"k_bytes": 46_500}}}]})
    config({"default": {"step": {"k_bytes": 46_500}}, "ports": [{"port": 3, "profile": RED}]})
    # a deeper queue
    config({"step": {"k_bytes": 46_500}}, switch_doc(ports=[1, 2, {"port": 3, "depth_pkts": 64}]))
    # defaults.queue's depth counts for every listed port without its own
    with pytest.raises(ValidationError, match="on s1 port 1"):
        config({"step": {"k_bytes": 15_000}}, switch_doc(ports=[1, 2, 3]), queue={"depth_pkts": 8})


def test_k_beyond_the_deepest_queue_a_tofino_switch_reports_is_refused() -> None:
    tofino = {**switch_doc("t1", 9559, 1, target="tofino"), "ports": [1, 2, 3]}
    del tofino["thrift_port"]
    k = contract.MAX_QDEPTH * 80  # MAX_QDEPTH cells: no depth above it
    with pytest.raises(ValidationError, match="beyond the deepest queue") as err:
        config({"step": {"k_bytes": k}}, tofino)
    assert err.value.field == "defaults.ecn"
    config({"step": {"k_bytes": k}}, switch_doc(ports=[1, 2, 3]))  # in 1500-byte packets it is shallow


# ---- compiling: entries per port and class, their precedence ---------------------------------------


def test_without_rules_the_entries_are_what_they_were() -> None:
    """No `ports`: one every-port RED profile, no class key, entry priority 1 (as before per-class ECN)."""
    got = entries_of(make_config(switch_doc()))
    want = comp.ecn_entries({0: ecn.RedProfile()})
    assert got == want
    assert all(e.priority == comp.PRIO_ECN_ANY and contract.QUEUE_PRIORITY not in e.match_dict() for e in got)


def test_a_class_step_on_one_port_beats_the_ports_profile_and_the_default() -> None:
    cfg = config(
        {
            "default": RED,
            "ports": [
                {"switch": "s1", "port": 3, "profile": {"step": {"k_bytes": 0}}},
                {"switch": "s1", "port": 3, "priority": 5, "profile": STEP},
            ],
        }
    )
    entries = entries_of(cfg)
    class5 = [e for e in entries if e.match_dict().get(contract.QUEUE_PRIORITY) == Ternary(5, 0x7)]
    assert {(e.action, e.match_dict().get(contract.ENQ_QDEPTH)) for e in class5} == {
        (contract.MARK_ALWAYS, Range(21, contract.MAX_QDEPTH)),  # 30,000 bytes: above 20 packets of 1500
        (contract.NO_MARK, Range(0, 20)),
    }
    assert {e.priority for e in class5} == {ecn_config.PRECEDENCE_PORT_CLASS}
    assert all(e.match_dict()[contract.EGRESS_PORT] == Ternary(3, 0x1FF) for e in class5)
    assert [probability(entries, 3, 5, q) for q in (1, 20, 21, 500)] == [0, 0, 1, 1]
    assert [probability(entries, 3, 4, q) for q in (1, 20)] == [1, 1]  # port 3's other classes: its own step
    assert [probability(entries, 1, 5, q) for q in (8, 41)] == [0, 1]  # other ports: the RED default
    # s2 has none of s1's rules
    assert [probability(entries_of(cfg, switch="s2"), 3, 5, q) for q in (8, 41)] == [0, 1]


def test_a_class_on_every_port_beats_a_ports_profile() -> None:
    cfg = config({"ports": [{"priority": 6, "profile": STEP}, {"port": 3, "profile": {"step": {"k_bytes": 0}}}]})
    entries = entries_of(cfg)
    assert [probability(entries, 3, 6, q) for q in (20, 21)] == [0, 1]  # the class's step, on port 3 too
    assert [probability(entries, 3, 2, q) for q in (1, 20)] == [1, 1]  # port 3's profile for the others
    assert [probability(entries, 2, 6, q) for q in (20, 21)] == [0, 1]
    assert ecn_config.precedence(3, 6) > ecn_config.precedence(0, 6) > ecn_config.precedence(3, None)
    assert ecn_config.precedence(3, None) > ecn_config.precedence(0, None) == comp.PRIO_ECN_ANY


def test_an_intents_port_profile_replaces_the_files_port_rule_but_not_its_class_rules() -> None:
    cfg = config({"ports": [{"switch": "s1", "port": 3, "profile": STEP}, {"port": 3, "priority": 5, "profile": STEP}]})
    intent = pb.Intent(ecn=[pb.PortEcn(switch="s1", port=3, profile=pb.EcnProfile(kmin=1, kmax=2, pmax=1.0))])
    entries = entries_of(cfg, intent)
    assert [probability(entries, 3, 1, q) for q in (1, 2, 3)] == [0, 1, 1]  # the intent's RED
    assert [probability(entries, 3, 5, q) for q in (20, 21)] == [0, 1]  # the file's class step stays


def test_a_step_compiles_in_cells_for_a_tofino_switch() -> None:
    tofino = {**switch_doc("t1", 9559, 1, target="tofino"), "ports": [1, 2, 3]}
    del tofino["thrift_port"]
    cfg = config({"ports": [{"port": 2, "priority": 3, "profile": STEP}]}, tofino, switch_doc("s2", 50052, 2))
    cells = entries_of(cfg, switch="t1")
    marks = [e for e in cells if e.action == contract.MARK_ALWAYS and contract.QUEUE_PRIORITY in e.match_dict()]
    assert [e.match_dict()[contract.ENQ_QDEPTH] for e in marks] == [Range(376, contract.MAX_QDEPTH)]  # 30,000/80
    packets = entries_of(cfg, switch="s2")
    marks = [e for e in packets if e.action == contract.MARK_ALWAYS and contract.QUEUE_PRIORITY in e.match_dict()]
    assert [e.match_dict()[contract.ENQ_QDEPTH] for e in marks] == [Range(21, contract.MAX_QDEPTH)]


def test_packet_bytes_sets_the_size_of_a_counted_packet() -> None:
    cfg = config({"ports": [{"port": 1, "priority": 3, "profile": STEP}]}, packet_bytes=9000)
    assert [probability(entries_of(cfg), 1, 3, q) for q in (3, 4)] == [0, 1]  # 30,000 / 9,000 = 3 packets


profiles = st.one_of(
    st.builds(lambda a, b, p: ecn.RedProfile(min(a, b), max(a, b), p), st.integers(0, 40), st.integers(0, 40),
              st.sampled_from([0.0, 0.25, 1.0])),
    st.builds(ecn.StepProfile, st.integers(0, 40 * 1500)),
)  # fmt: skip
targets = st.tuples(st.sampled_from(["", "s1", "s2"]), st.sampled_from([0, 1, 3]), st.sampled_from([None, 0, 3, 7]))


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(targets, profiles, max_size=6), profiles, st.booleans())
def test_every_port_class_and_depth_gets_the_effective_profile(rules: dict, default, tofino: bool) -> None:  # type: ignore[no-untyped-def]
    """The compiled entries, looked up as the switch does, give each (port, class, depth) the marking of
    the profile ``ecn_config.effective`` picks from the file's rules for that switch."""
    rules.pop(("", 0, None), None)
    items = []
    for (sw, port, klass), profile in rules.items():
        item: dict[str, Any] = {"profile": ecn_config.profile_document(profile)}
        if sw:
            item["switch"] = sw
        if port:
            item["port"] = port
        if klass is not None:
            item["priority"] = klass
        items.append(item)
    s1 = switch_doc("s1", 50051, 1, ports=[1, 2, 3])
    if tofino:
        s1 = {**s1, "target": "tofino"}
        del s1["thrift_port"]
    section = {"default": ecn_config.profile_document(default), "ports": items}
    cfg = parse_config(config_doc(s1, switch_doc("s2", 50052, 2, ports=[1, 2, 3]), defaults={"ecn": section}))
    unit = cfg.depth_unit(cfg.switch("s1"))
    entries = entries_of(cfg)
    mine = ecn_config.for_switch({("", 0, None): default, **rules}, "s1")
    for port in (1, 2, 3):
        for klass in range(contract.NUM_QUEUES):
            profile = ecn_config.effective(mine, port, klass)
            depths = {0, 1, 2, 19, 20, 21, 40, 41, 300, 375, 376, 760, 761, contract.MAX_QDEPTH}
            for q in depths:
                want = ecn.marking_probability(profile, q, unit)
                got = probability(entries, port, klass, q)
                assert abs(got - want) <= 0.5 / ecn.RANDOM_RANGE or (want == got == 1.0), (port, klass, q, profile)


def test_a_depth_unit_that_cannot_hold_k_is_a_named_error() -> None:
    with pytest.raises(ValidationError, match=r"^ecn: port 2 class 3: k_bytes="):
        comp.ecn_entries({(2, 3): ecn.StepProfile(contract.MAX_QDEPTH * 80)}, depth.cell_unit())


# ---- on the committed pipeline and a real switch ---------------------------------------------------

PER_CLASS = {
    "default": {"kmin": 4, "kmax": 32, "pmax": 0.2},
    "ports": [
        {"priority": 6, "profile": STEP},
        {"switch": "s1", "port": 3, "profile": RED},
        {"switch": "s1", "port": 3, "priority": 5, "profile": {"step": {"k_bytes": 15_000}}},
    ],
}


@needs_artifacts
def test_per_class_entries_encode_against_the_committed_pipeline() -> None:
    assert PIPELINE is not None
    entries = comp.compile_intent(pb.Intent(), config(PER_CLASS), PIPELINE).entries["s1"]
    keyed = [e for e in entries if contract.QUEUE_PRIORITY in e.match_dict()]
    assert keyed
    for e in keyed:
        assert PIPELINE.decode(PIPELINE.encode(e)) == e, str(e)


def test_a_switch_holds_the_per_class_entries_as_compiled(switch_factory) -> None:  # type: ignore[no-untyped-def]
    """BMv2 (``[bmv2]``) and the reference switch (``[ref]``) take the new key and read it back as written."""
    sw = switch_factory(device_id=1)
    cfg = parse_config(config_doc(target_doc(sw), defaults={"ecn": PER_CLASS}))
    desired = [
        e for e in comp.compile_intent(pb.Intent(), cfg, PIPELINE).entries["s1"] if e.table == contract.ECN_PROFILE
    ]
    with SwitchConnection(sw.grpc_addr, 1, contract.P4INFO, contract.BMV2_JSON) as conn:
        conn.load_pipeline()
        conn.write_entries(desired)
        assert set(conn.read_entries([contract.ECN_PROFILE])) == set(desired)
