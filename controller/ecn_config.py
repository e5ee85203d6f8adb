"""The deployment file's ECN section (``defaults.ecn``): which marking profile each (switch, port,
priority queue) runs, read and written side by side (controller/config.py calls both), and the one
precedence the compiler and the checks share.

``defaults.ecn`` takes one of::

    {kmin: 4, kmax: 32, pmax: 0.2}                  # RED in packets on every port and class (the first form)
    {red: {kmin: 4, kmax: 32, pmax: 0.2}}           # the same; `dcqcn` is another name for `red`
    {step: {k_bytes: 30000}}                        # DCTCP's step at K bytes; `dctcp` is another name
    {default: <profile>, ports: [<rule>, ...]}      # per port and class

where a rule is ``{switch, port, priority, profile: <profile>}`` and an omitted switch, port or
priority means every switch, every port (as port 0 in an intent) or every class.

Precedence, highest first (the ``ecn_profile`` entry priority): a port's own class profile (4), a
class's profile on every port (3), a port's profile (2), the every-port default (1); at one level a
named switch's rule beats an every-switch rule. The class ranks above the port: the marking regime
follows the traffic class (a port's rule tunes the classes that have none of their own).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mlfc import contract
from mlfc.controller.errors import ValidationError, join
from mlfc.controller.fields import as_int, as_list, as_mapping, as_policy, as_str
from mlfc.policy.depth import DepthUnit
from mlfc.policy.ecn import MarkingProfile, RedProfile, StepProfile
from mlfc.policy.priority import PolicyError

if TYPE_CHECKING:
    from mlfc.controller.config import SwitchConfig

EVERY_SWITCH = ""
EVERY_PORT = 0
EVERY_CLASS = None

RED_KINDS = ("red", "dcqcn")
STEP_KINDS = ("step", "dctcp")
_RED_KEYS = {"kmin", "kmax", "pmax"}

# (switch, port, priority) with EVERY_SWITCH / EVERY_PORT / EVERY_CLASS for "every"
EcnKey = tuple[str, int, int | None]
# (port, priority) on one switch
EcnTarget = tuple[int, int | None]

PRECEDENCE_EVERY_PORT = 1
PRECEDENCE_PORT = 2
PRECEDENCE_CLASS = 3
PRECEDENCE_PORT_CLASS = 4


def precedence(port: int, priority: int | None) -> int:
    """The rank of a profile for ``port`` (EVERY_PORT: every port) and ``priority`` (EVERY_CLASS: every
    class) on one switch; higher wins. The compiler writes it as the entries' priority."""
    if priority is EVERY_CLASS:
        return PRECEDENCE_EVERY_PORT if port == EVERY_PORT else PRECEDENCE_PORT
    return PRECEDENCE_CLASS if port == EVERY_PORT else PRECEDENCE_PORT_CLASS


@dataclass(frozen=True, slots=True)
class EcnRule:
    """One profile for the ports and classes it names."""

    profile: MarkingProfile
    switch: str = EVERY_SWITCH
    port: int = EVERY_PORT
    priority: int | None = EVERY_CLASS
    where: str = field(default="", compare=False)  # its place in the deployment file, for errors

    @property
    def key(self) -> EcnKey:
        return (self.switch, self.port, self.priority)


def for_switch(profiles: Mapping[EcnKey, Any], switch: str) -> dict[EcnTarget, Any]:
    """(port, priority) -> value on ``switch``: its own keys beat every switch's at the same target."""
    out: dict[EcnTarget, Any] = {}
    for (sw, port, prio), value in profiles.items():
        if sw == EVERY_SWITCH:
            out.setdefault((port, prio), value)
    for (sw, port, prio), value in profiles.items():
        if sw == switch:
            out[(port, prio)] = value
    return out


def effective(per_switch: Mapping[EcnTarget, Any], port: int, priority: int) -> Any:
    """What a packet of class ``priority`` leaving ``port`` gets among one switch's targets (None: none)."""
    best: tuple[int, Any] | None = None
    for (p, c), value in per_switch.items():
        if p in (EVERY_PORT, port) and c in (EVERY_CLASS, priority):
            rank = precedence(p, c)
            if best is None or rank > best[0]:
                best = (rank, value)
    return None if best is None else best[1]


# ---- reading ------------------------------------------------------------------------------------


def parse_profile(data: Any, path: str) -> MarkingProfile:
    """``{red|dcqcn: {kmin, kmax, pmax}}``, ``{step|dctcp: {k_bytes}}`` or the bare ``{kmin, kmax, pmax}``."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValidationError(path, f"expected a profile like {{step: {{k_bytes: 30000}}}}, got {data!r}")
    kinds = [k for k in data if k in RED_KINDS or k in STEP_KINDS]
    if not kinds and (not data or data.keys() & _RED_KEYS):  # the first form: RED, named by its fields
        return _red(as_mapping(data, path, _RED_KEYS), path)
    if len(data) != 1:
        raise ValidationError(path, f"one profile kind (red/dcqcn or step/dctcp), got {', '.join(map(str, data))}")
    kind, params = next(iter(data.items()))
    where = join(path, str(kind))
    if kind in RED_KINDS:
        return _red(as_mapping(params, where, _RED_KEYS), where)
    if kind in STEP_KINDS:
        p = as_mapping(params, where, {"k_bytes"})
        if "k_bytes" not in p:
            raise ValidationError(join(where, "k_bytes"), "required: the step's K, in bytes")
        return as_policy(lambda: StepProfile(p["k_bytes"]), join(where, "k_bytes"))
    raise ValidationError(
        where,
        f"unknown ECN profile kind {kind!r} (expected red or dcqcn: RED in packets; step or dctcp: a step at k_bytes)",
    )


def _red(params: dict[str, Any], path: str) -> RedProfile:
    return as_policy(lambda: RedProfile(**params), path)


def parse_ecn(data: Any, path: str) -> tuple[MarkingProfile, tuple[EcnRule, ...]]:
    """``defaults.ecn``: the every-port default and the per-port/per-class rules (unchecked against the
    switches: ``check_ecn_rules`` does that)."""
    if not (isinstance(data, dict) and data.keys() & {"default", "ports"}):
        return parse_profile(data, path), ()
    fields = as_mapping(data, path, {"default", "ports"})
    default = parse_profile(fields["default"], join(path, "default")) if "default" in fields else RedProfile()
    rules: list[EcnRule] = []
    seen: dict[EcnKey, str] = {}
    for i, item in enumerate(as_list(fields.get("ports"), join(path, "ports"))):
        rule = _rule(item, join(join(path, "ports"), i))
        if rule.key in seen:
            raise ValidationError(rule.where, f"same switch/port/priority as {seen[rule.key]}")
        seen[rule.key] = rule.where
        rules.append(rule)
    return default, tuple(rules)


def _rule(data: Any, path: str) -> EcnRule:
    fields = as_mapping(data, path, {"switch", "port", "priority", "profile"})
    if "profile" not in fields:
        raise ValidationError(join(path, "profile"), "required")
    switch = as_str(fields["switch"], join(path, "switch")) if fields.get("switch") is not None else EVERY_SWITCH
    port = as_int(fields.get("port", EVERY_PORT), join(path, "port"), 0, contract.MAX_PORT)
    priority = EVERY_CLASS
    if fields.get("priority") is not None:
        priority = as_int(fields["priority"], join(path, "priority"), 0, contract.NUM_QUEUES - 1)
    if (switch, port, priority) == (EVERY_SWITCH, EVERY_PORT, EVERY_CLASS):
        raise ValidationError(path, "names no switch, port or priority: every port and class is `default`")
    return EcnRule(parse_profile(fields["profile"], join(path, "profile")), switch, port, priority, path)


def check_ecn_rules(
    default: MarkingProfile,
    rules: Sequence[EcnRule],
    switches: Sequence[SwitchConfig],
    unit_of: Callable[[SwitchConfig], DepthUnit],
    queue_depths_of: Callable[[SwitchConfig], Mapping[int, int | None]],
    path: str = "defaults.ecn",
) -> None:
    """Each rule names a configured switch and a listed port; a step profile's K lies below the deepest
    queue each switch reports (its depth unit) and, on a port whose queue depth (packets) is configured,
    below what a packet can find queued there (depth - 1), wherever the profile is the one in force."""
    names = {sw.name: sw for sw in switches}
    for rule in rules:
        if rule.switch != EVERY_SWITCH and rule.switch not in names:
            raise ValidationError(
                join(rule.where, "switch"), f"unknown switch {rule.switch!r} (known: {', '.join(names)})"
            )
        if rule.switch != EVERY_SWITCH and rule.port != EVERY_PORT:
            ports = names[rule.switch].port_numbers
            if ports and rule.port not in ports:
                raise ValidationError(
                    join(rule.where, "port"), f"{rule.port} is not a port of {rule.switch} ({list(ports)})"
                )
    every = EcnRule(default, where=path)
    by_key: dict[EcnKey, EcnRule] = {every.key: every, **{rule.key: rule for rule in rules}}
    for sw in switches:
        unit = unit_of(sw)
        mine = for_switch(by_key, sw.name)
        for rule in mine.values():
            if isinstance(rule.profile, StepProfile):
                try:
                    rule.profile.threshold(unit)
                except PolicyError as exc:
                    raise ValidationError(_k_path(rule), f"on {sw.name}: {exc}") from None
        for port, capacity in sorted(queue_depths_of(sw).items()):
            if capacity is None or unit.per_packet != 1:
                continue
            for prio in range(contract.NUM_QUEUES):
                rule = effective(mine, port, prio)
                if rule is None or not isinstance(rule.profile, StepProfile):
                    continue
                k = rule.profile.threshold(unit)
                if k >= capacity - 1:
                    raise ValidationError(
                        _k_path(rule),
                        f"{rule.profile.k_bytes} bytes is {k} packets of {unit.unit_bytes} bytes: on {sw.name} port "
                        f"{port} (class {prio}) a packet finds at most {capacity - 1} queued (depth_pkts {capacity}), "
                        "so it would never mark",
                    )


def _k_path(rule: EcnRule) -> str:
    """Where a rule's profile is written: the default is the section itself (or its ``default``)."""
    return rule.where if rule.key == (EVERY_SWITCH, EVERY_PORT, EVERY_CLASS) else join(rule.where, "profile")


# ---- writing ------------------------------------------------------------------------------------


def profile_document(profile: MarkingProfile) -> dict[str, Any]:
    if isinstance(profile, StepProfile):
        return {"step": {"k_bytes": profile.k_bytes}}
    return {"red": {"kmin": profile.kmin, "kmax": profile.kmax, "pmax": profile.pmax}}


def ecn_document(default: MarkingProfile, rules: Iterable[EcnRule]) -> dict[str, Any]:
    """What ``parse_ecn`` reads back into ``default`` and ``rules``; a RED default alone keeps the first
    form (``{kmin, kmax, pmax}``)."""
    rules = tuple(rules)
    if not rules:
        if isinstance(default, RedProfile):
            return {"kmin": default.kmin, "kmax": default.kmax, "pmax": default.pmax}
        return profile_document(default)
    items = []
    for rule in rules:
        item: dict[str, Any] = {}
        if rule.switch != EVERY_SWITCH:
            item["switch"] = rule.switch
        if rule.port != EVERY_PORT:
            item["port"] = rule.port
        if rule.priority is not EVERY_CLASS:
            item["priority"] = rule.priority
        items.append({**item, "profile": profile_document(rule.profile)})
    return {"default": profile_document(default), "ports": items}
