"""The deployment file: which switches to control, with what pipeline, routes, queues and defaults.

Loaded from YAML and validated completely before anything touches a switch; every error names the
offending field (``switches[1].grpc_addr: ...``). Unknown keys are errors too (a typo must not
silently fall back to a default). configs/example.yaml documents every field.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from mlfc.controller.errors import ValidationError, join
from mlfc.controller.pipeline import DEFAULT_BMV2_JSON, DEFAULT_P4INFO, default_artifact
from mlfc.policy.drop import DropPolicy
from mlfc.policy.ecn import EcnProfile
from mlfc.policy.priority import PolicyError

DEFAULT_INTENT_ADDR = "127.0.0.1:50090"
DEFAULT_METRICS_ADDR = "127.0.0.1:9464"
MAX_PORT = 510  # bit<9> ports; 511 is v1model's drop port
# bmv2: simple_switch_CLI over Thrift; refswitch: the same command lines to mlfc-refswitch's admin port
# (given as thrift_port); none: no queue adapter (e.g. a switch whose TM is managed elsewhere).
TARGETS = ("bmv2", "refswitch", "none")
QUEUE_TARGETS = ("bmv2", "refswitch")  # targets whose queues the controller shapes through thrift_port

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """Per-port queue shaping; None leaves the target's default (BMv2: no rate limit, 64 packets)."""

    rate_pps: int | None = None
    depth_pkts: int | None = None


@dataclass(frozen=True, slots=True)
class PortConfig:
    port: int
    queue: QueueSettings = QueueSettings()


@dataclass(frozen=True, slots=True)
class Route:
    prefix: ipaddress.IPv4Network
    port: int
    src_mac: int
    dst_mac: int


@dataclass(frozen=True, slots=True)
class SwitchConfig:
    name: str
    grpc_addr: str
    device_id: int = 1
    target: str = "bmv2"
    thrift_port: int | None = None  # BMv2's Thrift port; for target refswitch, its admin port
    thrift_host: str = "127.0.0.1"
    election_id: int | None = None  # None: the controller-wide election id
    ports: tuple[PortConfig, ...] = ()
    routes_v4: tuple[Route, ...] = ()

    @property
    def port_numbers(self) -> tuple[int, ...]:
        return tuple(p.port for p in self.ports)


@dataclass(frozen=True, slots=True)
class Defaults:
    ecn: EcnProfile = field(default_factory=EcnProfile)
    drop_policy: DropPolicy = field(default_factory=DropPolicy)
    interleaving: bool = False
    queue: QueueSettings = QueueSettings()


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    intent_addr: str = DEFAULT_INTENT_ADDR
    metrics_addr: str = DEFAULT_METRICS_ADDR
    election_id: int = 10
    counter_interval_s: float = 1.0  # telemetry read period
    audit_interval_s: float = 10.0  # full read-back + pipeline cookie check, repairs drift
    reconnect_min_s: float = 0.2  # backoff after a failed connection / lost primary role
    reconnect_max_s: float = 5.0
    write_batch: int = 5000  # updates per Write RPC
    apply_timeout_s: float = 5.0  # Apply waits this long for connected switches to converge
    read_back_on_apply: bool = True  # read the switch before every diff (False: diff against last read)
    state_file: Path | None = None  # the last accepted intent, restored on start (None: not kept)


@dataclass(frozen=True, slots=True)
class DeploymentConfig:
    switches: tuple[SwitchConfig, ...]
    p4info: Path = field(default_factory=lambda: default_artifact(DEFAULT_P4INFO))
    device_config: Path = field(default_factory=lambda: default_artifact(DEFAULT_BMV2_JSON))
    defaults: Defaults = Defaults()
    controller: ControllerSettings = ControllerSettings()
    source: Path | None = None

    def switch(self, name: str) -> SwitchConfig:
        for sw in self.switches:
            if sw.name == name:
                return sw
        raise KeyError(name)

    @property
    def switch_names(self) -> tuple[str, ...]:
        return tuple(sw.name for sw in self.switches)


# ---- loading ----------------------------------------------------------------------------------


def load_config(path: Path | str) -> DeploymentConfig:
    """Read and validate a YAML deployment file (relative artifact paths resolve against its folder)."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ValidationError("", f"cannot read {path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise ValidationError("", f"{path} is not valid YAML: {exc}") from exc
    return parse_config(data, base_dir=path.parent, source=path)


def parse_config(data: Any, base_dir: Path | None = None, source: Path | None = None) -> DeploymentConfig:
    """Validate a deployment document (the parsed YAML) into a ``DeploymentConfig``."""
    root = _mapping(data, "", {"switches", "pipeline", "defaults", "controller", "listen"})
    if "switches" not in root:
        raise ValidationError("switches", "required: at least one switch")
    switches = _list(root["switches"], "switches", min_len=1)
    parsed = tuple(_switch(s, join("switches", i)) for i, s in enumerate(switches))
    _check_unique(parsed, "switches", lambda s: s.name, "name")
    _check_unique(parsed, "switches", lambda s: s.grpc_addr, "grpc_addr")
    _check_unique(parsed, "switches", lambda s: s.thrift_port and (s.thrift_host, s.thrift_port), "thrift_port")

    pipeline = _mapping(root.get("pipeline", {}), "pipeline", {"p4info", "device_config"})
    p4info = _artifact(pipeline.get("p4info"), "pipeline.p4info", base_dir, DEFAULT_P4INFO)
    device_config = _artifact(pipeline.get("device_config"), "pipeline.device_config", base_dir, DEFAULT_BMV2_JSON)

    defaults = _defaults(root.get("defaults", {}), "defaults")
    if defaults.queue != QueueSettings():
        for i, sw in enumerate(parsed):
            if sw.target in QUEUE_TARGETS and sw.ports and sw.thrift_port is None:
                raise ValidationError(
                    join(join("switches", i), "thrift_port"), "required: defaults.queue applies to its ports"
                )
    return DeploymentConfig(
        switches=parsed,
        p4info=p4info,
        device_config=device_config,
        defaults=defaults,
        controller=_controller(root.get("controller", {}), root.get("listen", {}), base_dir),
        source=source,
    )


def _switch(data: Any, path: str) -> SwitchConfig:
    keys = {
        "name",
        "grpc_addr",
        "device_id",
        "target",
        "thrift_port",
        "thrift_host",
        "election_id",
        "ports",
        "routes_v4",
    }
    d = _mapping(data, path, keys)
    for required in ("name", "grpc_addr"):
        if required not in d:
            raise ValidationError(join(path, required), "required")
    name = _str(d["name"], join(path, "name"))
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise ValidationError(join(path, "name"), f"{name!r} must be letters, digits, '_', '.' or '-'")
    grpc_addr = _address(d["grpc_addr"], join(path, "grpc_addr"))
    device_id = _int(d.get("device_id", 1), join(path, "device_id"), 0, (1 << 64) - 1)
    target = _str(d.get("target", "bmv2"), join(path, "target"))
    if target not in TARGETS:
        raise ValidationError(join(path, "target"), f"{target!r} is not one of {', '.join(TARGETS)}")
    thrift_port = None
    if d.get("thrift_port") is not None:
        thrift_port = _int(d["thrift_port"], join(path, "thrift_port"), 1, 65535)
    elif target in QUEUE_TARGETS and _has_queue_settings(d.get("ports", [])):
        raise ValidationError(join(path, "thrift_port"), f"required on a {target} switch with queue settings")
    thrift_host = _str(d.get("thrift_host", "127.0.0.1"), join(path, "thrift_host"))
    election_id = None
    if d.get("election_id") is not None:
        election_id = _int(d["election_id"], join(path, "election_id"), 1, (1 << 64) - 1)

    ports = tuple(_port(p, join(join(path, "ports"), i)) for i, p in enumerate(_list(d.get("ports", []), path)))
    _check_unique(ports, join(path, "ports"), lambda p: p.port, "port")
    port_numbers = {p.port for p in ports}
    routes = []
    for i, r in enumerate(_list(d.get("routes_v4", []), join(path, "routes_v4"))):
        route = _route(r, join(join(path, "routes_v4"), i))
        if ports and route.port not in port_numbers:
            raise ValidationError(
                join(join(join(path, "routes_v4"), i), "port"), f"{route.port} is not in {join(path, 'ports')}"
            )
        routes.append(route)
    _check_unique(routes, join(path, "routes_v4"), lambda r: r.prefix, "prefix")
    return SwitchConfig(name, grpc_addr, device_id, target, thrift_port, thrift_host, election_id, ports, tuple(routes))


def _has_queue_settings(ports: Any) -> bool:
    return isinstance(ports, list) and any(
        isinstance(p, dict) and (p.get("rate_pps") is not None or p.get("depth_pkts") is not None) for p in ports
    )


def _port(data: Any, path: str) -> PortConfig:
    if isinstance(data, int) and not isinstance(data, bool):
        return PortConfig(_int(data, path, 0, MAX_PORT))
    d = _mapping(data, path, {"port", "rate_pps", "depth_pkts"})
    if "port" not in d:
        raise ValidationError(join(path, "port"), "required")
    return PortConfig(_int(d["port"], join(path, "port"), 0, MAX_PORT), _queue(d, path))


def _queue(d: dict[str, Any], path: str) -> QueueSettings:
    rate = d.get("rate_pps")
    depth = d.get("depth_pkts")
    return QueueSettings(
        None if rate is None else _int(rate, join(path, "rate_pps"), 1, 100_000_000),
        None if depth is None else _int(depth, join(path, "depth_pkts"), 1, 1 << 20),
    )


def _route(data: Any, path: str) -> Route:
    d = _mapping(data, path, {"prefix", "port", "src_mac", "dst_mac"})
    for required in ("prefix", "port", "src_mac", "dst_mac"):
        if required not in d:
            raise ValidationError(join(path, required), "required")
    return Route(
        prefix=parse_prefix(d["prefix"], join(path, "prefix")),
        port=_int(d["port"], join(path, "port"), 0, MAX_PORT),
        src_mac=parse_mac(d["src_mac"], join(path, "src_mac")),
        dst_mac=parse_mac(d["dst_mac"], join(path, "dst_mac")),
    )


def _defaults(data: Any, path: str) -> Defaults:
    d = _mapping(data, path, {"ecn", "drop_policy", "interleaving", "queue"})
    ecn = Defaults().ecn
    if "ecn" in d:
        e = _mapping(d["ecn"], join(path, "ecn"), {"kmin", "kmax", "pmax"})
        ecn = _policy(lambda: EcnProfile(**e), join(path, "ecn"))
    drop = Defaults().drop_policy
    if "drop_policy" in d:
        p = _mapping(d["drop_policy"], join(path, "drop_policy"), {"level_depths", "min_importance"})
        kwargs = {k: tuple(_list(v, join(join(path, "drop_policy"), k))) for k, v in p.items()}
        drop = _policy(lambda: DropPolicy(**kwargs), join(path, "drop_policy"))
    interleaving = _bool(d.get("interleaving", False), join(path, "interleaving"))
    queue = _queue(_mapping(d.get("queue", {}), join(path, "queue"), {"rate_pps", "depth_pkts"}), join(path, "queue"))
    return Defaults(ecn, drop, interleaving, queue)


def _controller(data: Any, listen_data: Any, base_dir: Path | None) -> ControllerSettings:
    keys = {
        "election_id",
        "counter_interval_s",
        "audit_interval_s",
        "reconnect_min_s",
        "reconnect_max_s",
        "write_batch",
        "apply_timeout_s",
        "read_back_on_apply",
        "state_file",
    }
    d = _mapping(data, "controller", keys)
    listen = _mapping(listen_data, "listen", {"intent", "metrics"})
    base = ControllerSettings()

    def num(key: str, lo: float, hi: float) -> float:
        return _float(d.get(key, getattr(base, key)), join("controller", key), lo, hi)

    settings = ControllerSettings(
        intent_addr=_address(listen.get("intent", base.intent_addr), "listen.intent", allow_port_zero=True),
        metrics_addr=_address(listen.get("metrics", base.metrics_addr), "listen.metrics", allow_port_zero=True),
        election_id=_int(d.get("election_id", base.election_id), "controller.election_id", 1, (1 << 64) - 1),
        counter_interval_s=num("counter_interval_s", 0.05, 3600),
        audit_interval_s=num("audit_interval_s", 0.1, 86400),
        reconnect_min_s=num("reconnect_min_s", 0.01, 60),
        reconnect_max_s=num("reconnect_max_s", 0.01, 3600),
        write_batch=_int(d.get("write_batch", base.write_batch), "controller.write_batch", 1, 100_000),
        apply_timeout_s=num("apply_timeout_s", 0.0, 3600),
        read_back_on_apply=_bool(d.get("read_back_on_apply", base.read_back_on_apply), "controller.read_back_on_apply"),
        state_file=_state_file(d.get("state_file"), base_dir),
    )
    if settings.reconnect_max_s < settings.reconnect_min_s:
        raise ValidationError("controller.reconnect_max_s", "must be >= controller.reconnect_min_s")
    return settings


# ---- field parsers (shared with the intent compiler) -------------------------------------------


def parse_prefix(value: Any, path: str) -> ipaddress.IPv4Network:
    """An IPv4 address or prefix; host bits must be zero (``10.0.1.5/24`` is a typo, not a route)."""
    if not isinstance(value, str) or not value:
        raise ValidationError(path, f"expected an IPv4 prefix like 10.0.1.0/24, got {value!r}")
    try:
        return ipaddress.IPv4Network(value, strict=True)
    except ValueError as exc:
        raise ValidationError(path, f"{value!r} is not an IPv4 prefix: {exc}") from None


def parse_mac(value: Any, path: str) -> int:
    if isinstance(value, str) and re.fullmatch(r"([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}", value):
        return int(value.replace(":", "").replace("-", ""), 16)
    raise ValidationError(path, f"expected a MAC address like 00:00:00:00:00:01, got {value!r}")


def _address(value: Any, path: str, allow_port_zero: bool = False) -> str:
    if not isinstance(value, str):
        raise ValidationError(path, f"expected host:port, got {value!r}")
    m = re.fullmatch(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})", value)
    lowest = 0 if allow_port_zero else 1
    if not m or not lowest <= int(m.group(2)) <= 65535:
        raise ValidationError(path, f"expected host:port, got {value!r}")
    return value


def _state_file(value: Any, base_dir: Path | None) -> Path | None:
    if value is None:
        return None
    p = Path(_str(value, "controller.state_file"))
    if not p.is_absolute() and base_dir is not None:
        p = base_dir / p
    if not p.parent.is_dir():
        raise ValidationError("controller.state_file", f"folder {str(p.parent)!r} does not exist")
    if p.is_dir():
        raise ValidationError("controller.state_file", f"{str(p)!r} is a folder")
    return p


def _artifact(value: Any, path: str, base_dir: Path | None, default: Path) -> Path:
    if value is None:
        return default_artifact(default)
    p = Path(_str(value, path))
    if not p.is_absolute() and base_dir is not None:
        p = base_dir / p
    return p


def _policy(build: Callable[[], _T], path: str) -> _T:
    try:
        return build()
    except PolicyError as exc:
        raise ValidationError(path, str(exc)) from None
    except TypeError as exc:
        raise ValidationError(path, str(exc)) from None


def _mapping(value: Any, path: str, allowed: set[str]) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValidationError(path or "(document)", f"expected a mapping, got {type(value).__name__}")
    unknown = sorted(str(k) for k in value if k not in allowed)
    if unknown:
        raise ValidationError(join(path, unknown[0]), f"unknown field (expected one of {', '.join(sorted(allowed))})")
    return value


def _list(value: Any, path: str, min_len: int = 0) -> list[Any]:
    if value is None:
        value = []
    if not isinstance(value, list):
        raise ValidationError(path, f"expected a list, got {type(value).__name__}")
    if len(value) < min_len:
        raise ValidationError(path, f"needs at least {min_len} item(s)")
    return value


def _str(value: Any, path: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValidationError(path, f"expected a non-empty string, got {value!r}")
    return value


def _int(value: Any, path: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(path, f"expected an integer, got {value!r}")
    if not lo <= value <= hi:
        raise ValidationError(path, f"{value} out of range {lo}..{hi}")
    return value


def _float(value: Any, path: str, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(path, f"expected a number, got {value!r}")
    if not lo <= value <= hi:
        raise ValidationError(path, f"{value} out of range {lo}..{hi}")
    return float(value)


def _bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(path, f"expected true or false, got {value!r}")
    return value


def _check_unique(items: Any, path: str, key: Callable[[Any], Any], what: str) -> None:
    """Items whose key is None are not compared."""
    seen: dict[Any, int] = {}
    for i, item in enumerate(items):
        k = key(item)
        if k is None:
            continue
        if k in seen:
            raise ValidationError(join(join(path, i), what), f"duplicate of {join(path, seen[k])}.{what} ({k})")
        seen[k] = i
