"""The deployment file: which switches to control, with what pipeline, routes, queues and defaults.

Loaded from YAML and validated completely before anything touches a switch; every error names the
offending field (``switches[1].grpc_addr: ...``). Unknown keys are errors too (a typo must not
silently fall back to a default). configs/example.yaml documents every field.

One file (over 400 lines) on purpose: the reader and the writer (``config_document``) of one schema
stay side by side, so a field added to one is seen missing in the other.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from mlfc import contract
from mlfc.controller.ecn_config import EcnRule, check_ecn_rules, ecn_document, parse_ecn
from mlfc.controller.errors import ValidationError, join
from mlfc.controller.fields import (
    as_address,
    as_bool,
    as_float,
    as_int,
    as_list,
    as_mapping,
    as_policy,
    as_str,
    check_unique,
    parse_mac,
    parse_prefix,
)
from mlfc.controller.queues import QueueSettings
from mlfc.controller.tofino_pipeline import FORMATS, TofinoArtifacts
from mlfc.policy import depth
from mlfc.policy.drop import DropPolicy
from mlfc.policy.ecn import MarkingProfile, RedProfile
from mlfc.tls import TlsConfig, TlsError, as_client, check_listen, load

DEFAULT_INTENT_ADDR = "127.0.0.1:50090"
DEFAULT_METRICS_ADDR = "127.0.0.1:9464"
# bmv2: simple_switch_CLI over Thrift; refswitch: the same command lines to mlfc-refswitch's admin port
# (given as thrift_port); tofino: the TNA program, queues are traffic-manager configuration done outside
# the controller (docs/tofino.md); none: no queue adapter (e.g. a switch whose TM is managed elsewhere).
TARGETS = ("bmv2", "refswitch", "tofino", "none")
QUEUE_TARGETS = ("bmv2", "refswitch")  # targets whose queues the controller shapes through thrift_port
# A port's (or defaults.queue's) keys. rate_bps and depth_bytes are the reference switch's: BMv2's queue
# rates are packets per second and its depths packets, so a bmv2 switch refuses them.
QUEUE_KEYS = ("rate_pps", "rate_bps", "depth_pkts", "depth_bytes")
BYTE_QUEUE_TARGETS = ("refswitch",)
# The P4 architecture each target runs: which compiled program (and P4Info) its switches get.
ARCHITECTURES = {"bmv2": "v1model", "refswitch": "v1model", "none": "v1model", "tofino": "tna"}


@dataclass(frozen=True, slots=True)
class PortConfig:
    port: int
    queue: QueueSettings = field(default_factory=QueueSettings)


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
    tls: bool | None = None  # P4Runtime over TLS; None: as the deployment (on when it has a tls section)
    tls_server_name: str = ""  # the name its certificate carries, when not the host of grpc_addr

    @property
    def port_numbers(self) -> tuple[int, ...]:
        return tuple(p.port for p in self.ports)


@dataclass(frozen=True, slots=True)
class Defaults:
    ecn: MarkingProfile = field(default_factory=RedProfile)  # every port and class (controller/ecn_config.py)
    drop_policy: DropPolicy = field(default_factory=DropPolicy)
    interleaving: bool = False
    queue: QueueSettings = field(default_factory=QueueSettings)
    packet_bytes: int = depth.DEFAULT_PACKET_BYTES  # converts packet depths into Tofino's 80-byte cells
    ecn_rules: tuple[EcnRule, ...] = ()  # per port and class, over ``ecn``


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    intent_addr: str = DEFAULT_INTENT_ADDR
    metrics_addr: str = DEFAULT_METRICS_ADDR
    election_id: int = 10
    counter_interval_s: float = 1.0  # telemetry read period
    audit_interval_s: float = 10.0  # full read-back + pipeline cookie check, repairs drift
    reconnect_min_s: float = 0.2  # backoff after a failed connection / lost primary role
    reconnect_max_s: float = 5.0
    probe_interval_s: float = 0.1  # TCP probes of a switch that is down (docs/controller.md: reconnection)
    write_batch: int = 5000  # updates per Write RPC
    apply_timeout_s: float = 5.0  # Apply waits this long for connected switches to converge
    read_back_on_apply: bool = True  # read the switch before every diff (False: diff against last read)
    state_file: Path | None = None  # the last accepted intent, restored on start (None: not kept)
    tls: TlsConfig | None = None  # the intent API serves TLS, switches are reached over TLS (docs/tls.md)
    allow_remote: bool = False  # the intent API may listen on a non-loopback address (only with tls)

    def switch_tls(self, sw: SwitchConfig) -> TlsConfig | None:
        """How the controller reaches ``sw``'s P4Runtime: TLS trusting ``tls.ca`` and showing the
        controller's certificate (for a switch that requires client certificates), or None: plain text."""
        if self.tls is None or sw.tls is False:
            return None
        return replace(as_client(self.tls), server_name=sw.tls_server_name)


@dataclass(frozen=True, slots=True)
class DeploymentConfig:
    switches: tuple[SwitchConfig, ...]
    p4info: Path = contract.P4INFO
    device_config: Path = contract.BMV2_JSON
    defaults: Defaults = Defaults()
    controller: ControllerSettings = ControllerSettings()
    source: Path | None = None
    tofino: TofinoArtifacts = field(default_factory=TofinoArtifacts)  # for switches with target: tofino

    def cells_per_packet(self, sw: SwitchConfig) -> int:
        """Queue-depth units per packet on ``sw``: 1 (packets) on v1model, 80-byte cells on Tofino."""
        return self.depth_unit(sw).per_packet

    def depth_unit(self, sw: SwitchConfig) -> depth.DepthUnit:
        """What one unit of ``sw``'s queue depth is: a packet of ``packet_bytes`` (v1model), an 80-byte
        cell (Tofino)."""
        return switch_depth_unit(sw, self.defaults.packet_bytes)

    @property
    def architectures(self) -> tuple[str, ...]:
        """The P4 architectures the switches run (v1model, tna), in a stable order."""
        return tuple(sorted({ARCHITECTURES[sw.target] for sw in self.switches}))

    def switch(self, name: str) -> SwitchConfig:
        for sw in self.switches:
            if sw.name == name:
                return sw
        raise KeyError(name)

    @property
    def switch_names(self) -> tuple[str, ...]:
        return tuple(sw.name for sw in self.switches)


def switch_depth_unit(sw: SwitchConfig, packet_bytes: int) -> depth.DepthUnit:
    return depth.switch_unit(sw.target == "tofino", packet_bytes)


def queue_settings(sw: SwitchConfig, default: QueueSettings) -> dict[int, QueueSettings]:
    """Each configured port's settings, a field left unset falling back to the deployment default. A
    tofino switch gets none: its queues are traffic-manager configuration (docs/tofino.md)."""
    if sw.target == "tofino":
        return {}
    out = {}
    for port in sw.ports:
        queue = port.queue
        # One rate per port, in one unit: the port's own (either unit) replaces the default's.
        own_rate = queue.rate_pps is not None or queue.rate_bps is not None
        rate_pps, rate_bps = (queue.rate_pps, queue.rate_bps) if own_rate else (default.rate_pps, default.rate_bps)
        depth = queue.depth_pkts if queue.depth_pkts is not None else default.depth_pkts
        depth_bytes = queue.depth_bytes if queue.depth_bytes is not None else default.depth_bytes
        out[port.port] = QueueSettings(rate_pps, depth, rate_bps, depth_bytes)
    return out


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
    root = as_mapping(data, "", {"switches", "pipeline", "defaults", "controller", "listen", "tls"})
    if "switches" not in root:
        raise ValidationError("switches", "required: at least one switch")
    switches = as_list(root["switches"], "switches", min_len=1)
    parsed = tuple(_switch(s, join("switches", i)) for i, s in enumerate(switches))
    check_unique(parsed, "switches", lambda s: s.name, "name")
    check_unique(parsed, "switches", lambda s: s.grpc_addr, "grpc_addr")
    check_unique(parsed, "switches", lambda s: s.thrift_port and (s.thrift_host, s.thrift_port), "thrift_port")

    pipeline = as_mapping(root.get("pipeline", {}), "pipeline", {"p4info", "device_config", "tofino"})
    p4info = _artifact(pipeline.get("p4info"), "pipeline.p4info", base_dir, contract.P4INFO)
    device_config = _artifact(pipeline.get("device_config"), "pipeline.device_config", base_dir, contract.BMV2_JSON)
    tofino = _tofino(pipeline.get("tofino", {}), "pipeline.tofino", base_dir)

    defaults = _defaults(root.get("defaults", {}), "defaults")
    check_ecn_rules(
        defaults.ecn,
        defaults.ecn_rules,
        parsed,
        lambda sw: switch_depth_unit(sw, defaults.packet_bytes),
        lambda sw: {port: q.depth_pkts for port, q in queue_settings(sw, defaults.queue).items()},
    )
    if defaults.queue != QueueSettings():
        for i, sw in enumerate(parsed):
            if sw.target in QUEUE_TARGETS and sw.ports and sw.thrift_port is None:
                raise ValidationError(
                    join(join("switches", i), "thrift_port"), "required: defaults.queue applies to its ports"
                )
    if defaults.queue.in_bytes:
        for i, sw in enumerate(parsed):
            if sw.target in QUEUE_TARGETS and sw.target not in BYTE_QUEUE_TARGETS:
                key = "rate_bps" if defaults.queue.rate_bps is not None else "depth_bytes"
                for port, q in queue_settings(sw, defaults.queue).items():
                    if q.in_bytes:
                        raise ValidationError(
                            join("defaults.queue", key),
                            f"applies to port {port} of {join('switches', i)}, a {sw.target} switch: " + _NO_BYTES,
                        )
    return DeploymentConfig(
        switches=parsed,
        p4info=p4info,
        device_config=device_config,
        defaults=defaults,
        controller=_controller(root.get("controller", {}), root.get("listen", {}), root.get("tls"), parsed, base_dir),
        source=source,
        tofino=tofino,
    )


def _tofino(data: Any, path: str, base_dir: Path | None) -> TofinoArtifacts:
    fields = as_mapping(data, path, {"p4info", "bfrt", "context", "binary", "device_config_format"})
    base = TofinoArtifacts()
    fmt = as_str(fields.get("device_config_format", base.device_config_format), join(path, "device_config_format"))
    if fmt not in FORMATS:
        raise ValidationError(join(path, "device_config_format"), f"{fmt!r} is not one of {', '.join(FORMATS)}")
    return TofinoArtifacts(
        p4info=_artifact(fields.get("p4info"), join(path, "p4info"), base_dir, base.p4info),
        bfrt=_artifact(fields.get("bfrt"), join(path, "bfrt"), base_dir, base.bfrt),
        context=_artifact(fields.get("context"), join(path, "context"), base_dir, base.context),
        binary=_artifact(fields.get("binary"), join(path, "binary"), base_dir, base.binary),
        device_config_format=fmt,
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
        "tls",
        "tls_server_name",
    }
    fields = as_mapping(data, path, keys)
    for required in ("name", "grpc_addr"):
        if required not in fields:
            raise ValidationError(join(path, required), "required")
    name = as_str(fields["name"], join(path, "name"))
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise ValidationError(join(path, "name"), f"{name!r} must be letters, digits, '_', '.' or '-'")
    grpc_addr = as_address(fields["grpc_addr"], join(path, "grpc_addr"))
    device_id = as_int(fields.get("device_id", 1), join(path, "device_id"), 0, (1 << 64) - 1)
    target = as_str(fields.get("target", "bmv2"), join(path, "target"))
    if target not in TARGETS:
        raise ValidationError(join(path, "target"), f"{target!r} is not one of {', '.join(TARGETS)}")
    if target == "tofino":
        _check_tofino_switch(fields, path)
    thrift_port = None
    if fields.get("thrift_port") is not None:
        thrift_port = as_int(fields["thrift_port"], join(path, "thrift_port"), 1, 65535)
    elif target in QUEUE_TARGETS and _has_queue_settings(fields.get("ports", [])):
        raise ValidationError(join(path, "thrift_port"), f"required on a {target} switch with queue settings")
    thrift_host = as_str(fields.get("thrift_host", "127.0.0.1"), join(path, "thrift_host"))
    election_id = None
    if fields.get("election_id") is not None:
        election_id = as_int(fields["election_id"], join(path, "election_id"), 1, (1 << 64) - 1)

    port_list = as_list(fields.get("ports", []), path)
    ports = tuple(_port(p, join(join(path, "ports"), i), target) for i, p in enumerate(port_list))
    check_unique(ports, join(path, "ports"), lambda p: p.port, "port")
    port_numbers = {p.port for p in ports}
    routes = []
    for i, r in enumerate(as_list(fields.get("routes_v4", []), join(path, "routes_v4"))):
        route = _route(r, join(join(path, "routes_v4"), i))
        if ports and route.port not in port_numbers:
            raise ValidationError(
                join(join(join(path, "routes_v4"), i), "port"), f"{route.port} is not in {join(path, 'ports')}"
            )
        routes.append(route)
    check_unique(routes, join(path, "routes_v4"), lambda r: r.prefix, "prefix")
    tls = None if fields.get("tls") is None else as_bool(fields["tls"], join(path, "tls"))
    server_name = ""
    if fields.get("tls_server_name") is not None:
        server_name = as_str(fields["tls_server_name"], join(path, "tls_server_name"))
    return SwitchConfig(
        name,
        grpc_addr,
        device_id,
        target,
        thrift_port,
        thrift_host,
        election_id,
        ports,
        tuple(routes),
        tls,
        server_name,
    )


def _check_tofino_switch(fields: dict[str, Any], path: str) -> None:
    """Tofino queues are traffic-manager state (bfrt ``tf1.tm.*``), which the controller does not
    drive: a rate or depth given here would be silently missing on the switch."""
    if fields.get("thrift_port") is not None:
        raise ValidationError(join(path, "thrift_port"), "a tofino switch has no Thrift queue channel")
    if _has_queue_settings(fields.get("ports", [])):
        raise ValidationError(
            join(path, "ports"), "queue rate/depth on a tofino switch is traffic-manager configuration (docs/tofino.md)"
        )


def _has_queue_settings(ports: Any) -> bool:
    return isinstance(ports, list) and any(
        isinstance(p, dict) and any(p.get(k) is not None for k in QUEUE_KEYS) for p in ports
    )


_NO_BYTES = (
    "BMv2 has no byte rate or byte depth (its queue rates are packets per second, its depths packets): "
    "use rate_pps / depth_pkts, or target refswitch"
)


def _port(data: Any, path: str, target: str) -> PortConfig:
    if isinstance(data, int) and not isinstance(data, bool):
        return PortConfig(as_int(data, path, 0, contract.MAX_PORT))
    fields = as_mapping(data, path, {"port", *QUEUE_KEYS})
    if "port" not in fields:
        raise ValidationError(join(path, "port"), "required")
    if target in QUEUE_TARGETS and target not in BYTE_QUEUE_TARGETS:
        for key in ("rate_bps", "depth_bytes"):
            if fields.get(key) is not None:
                raise ValidationError(join(path, key), f"a {target} switch: {_NO_BYTES}")
    return PortConfig(as_int(fields["port"], join(path, "port"), 0, contract.MAX_PORT), _queue(fields, path))


def _queue(fields: dict[str, Any], path: str) -> QueueSettings:
    rate, rate_bps = fields.get("rate_pps"), fields.get("rate_bps")
    depth, depth_bytes = fields.get("depth_pkts"), fields.get("depth_bytes")
    if rate is not None and rate_bps is not None:
        raise ValidationError(join(path, "rate_bps"), "a port has one rate: rate_pps (packets/s) or rate_bps (bit/s)")
    return QueueSettings(
        None if rate is None else as_int(rate, join(path, "rate_pps"), 1, 100_000_000),
        None if depth is None else as_int(depth, join(path, "depth_pkts"), 1, 1 << 20),
        None if rate_bps is None else as_int(rate_bps, join(path, "rate_bps"), 1, 10**12),
        None if depth_bytes is None else as_int(depth_bytes, join(path, "depth_bytes"), 1, 1 << 32),
    )


def _route(data: Any, path: str) -> Route:
    fields = as_mapping(data, path, {"prefix", "port", "src_mac", "dst_mac"})
    for required in ("prefix", "port", "src_mac", "dst_mac"):
        if required not in fields:
            raise ValidationError(join(path, required), "required")
    return Route(
        prefix=parse_prefix(fields["prefix"], join(path, "prefix")),
        port=as_int(fields["port"], join(path, "port"), 0, contract.MAX_PORT),
        src_mac=parse_mac(fields["src_mac"], join(path, "src_mac")),
        dst_mac=parse_mac(fields["dst_mac"], join(path, "dst_mac")),
    )


def _defaults(data: Any, path: str) -> Defaults:
    fields = as_mapping(data, path, {"ecn", "drop_policy", "interleaving", "queue", "packet_bytes"})
    ecn, ecn_rules = Defaults().ecn, ()
    if "ecn" in fields:
        ecn, ecn_rules = parse_ecn(fields["ecn"], join(path, "ecn"))
    drop = Defaults().drop_policy
    if "drop_policy" in fields:
        drop_fields = as_mapping(fields["drop_policy"], join(path, "drop_policy"), {"level_depths", "min_importance"})
        kwargs = {k: tuple(as_list(v, join(join(path, "drop_policy"), k))) for k, v in drop_fields.items()}
        drop = as_policy(lambda: DropPolicy(**kwargs), join(path, "drop_policy"))
    interleaving = as_bool(fields.get("interleaving", False), join(path, "interleaving"))
    queue = _queue(as_mapping(fields.get("queue", {}), join(path, "queue"), set(QUEUE_KEYS)), join(path, "queue"))
    packet_bytes = fields.get("packet_bytes", Defaults().packet_bytes)
    as_policy(lambda: depth.cells_per_packet(packet_bytes), join(path, "packet_bytes"))
    return Defaults(ecn, drop, interleaving, queue, packet_bytes, ecn_rules)


def _tls(data: Any, switches: tuple[SwitchConfig, ...], base_dir: Path | None) -> TlsConfig | None:
    """The deployment's ``tls`` section: its files are read and checked now (mlfc.tls), for the intent API
    (a server: cert and key) and, when a switch is reached over TLS, as a client (ca)."""
    if data is None:
        for i, sw in enumerate(switches):
            if sw.tls:
                raise ValidationError(join(join("switches", i), "tls"), "needs the deployment's tls section (ca, ...)")
        return None
    d = as_mapping(data, "tls", {"ca", "cert", "key", "client_auth"})
    tls = TlsConfig(
        ca=None if d.get("ca") is None else _artifact(d["ca"], "tls.ca", base_dir, Path()),
        cert=None if d.get("cert") is None else _artifact(d["cert"], "tls.cert", base_dir, Path()),
        key=None if d.get("key") is None else _artifact(d["key"], "tls.key", base_dir, Path()),
        client_auth=as_bool(d.get("client_auth", False), "tls.client_auth"),
    )
    try:
        load(tls, "server")
        if any(sw.tls is not False for sw in switches):
            load(as_client(tls), "client")
    except TlsError as exc:
        raise ValidationError("tls", str(exc)) from None
    return tls


def _controller(
    data: Any, listen_data: Any, tls_data: Any, switches: tuple[SwitchConfig, ...], base_dir: Path | None
) -> ControllerSettings:
    keys = {
        "election_id",
        "counter_interval_s",
        "audit_interval_s",
        "reconnect_min_s",
        "reconnect_max_s",
        "probe_interval_s",
        "write_batch",
        "apply_timeout_s",
        "read_back_on_apply",
        "state_file",
    }
    fields = as_mapping(data, "controller", keys)
    listen = as_mapping(listen_data, "listen", {"intent", "metrics", "allow_remote"})
    base = ControllerSettings()

    def num(key: str, lo: float, hi: float) -> float:
        return as_float(fields.get(key, getattr(base, key)), join("controller", key), lo, hi)

    settings = ControllerSettings(
        intent_addr=as_address(listen.get("intent", base.intent_addr), "listen.intent", allow_port_zero=True),
        metrics_addr=as_address(listen.get("metrics", base.metrics_addr), "listen.metrics", allow_port_zero=True),
        election_id=as_int(fields.get("election_id", base.election_id), "controller.election_id", 1, (1 << 64) - 1),
        counter_interval_s=num("counter_interval_s", 0.05, 3600),
        audit_interval_s=num("audit_interval_s", 0.1, 86400),
        reconnect_min_s=num("reconnect_min_s", 0.01, 60),
        reconnect_max_s=num("reconnect_max_s", 0.01, 3600),
        probe_interval_s=num("probe_interval_s", 0.01, 60),
        write_batch=as_int(fields.get("write_batch", base.write_batch), "controller.write_batch", 1, 100_000),
        apply_timeout_s=num("apply_timeout_s", 0.0, 3600),
        read_back_on_apply=as_bool(
            fields.get("read_back_on_apply", base.read_back_on_apply), "controller.read_back_on_apply"
        ),
        state_file=_state_file(fields.get("state_file"), base_dir),
        tls=_tls(tls_data, switches, base_dir),
        allow_remote=as_bool(listen.get("allow_remote", False), "listen.allow_remote"),
    )
    try:
        check_listen(settings.intent_addr, settings.allow_remote, settings.tls)
    except ValueError as exc:
        raise ValidationError("listen.intent", str(exc).replace("--allow-remote", "listen.allow_remote")) from None
    if settings.reconnect_max_s < settings.reconnect_min_s:
        raise ValidationError("controller.reconnect_max_s", "must be >= controller.reconnect_min_s")
    return settings


# ---- writing ----------------------------------------------------------------------------------


def config_document(cfg: DeploymentConfig) -> dict[str, Any]:
    """The deployment file for ``cfg``: what ``parse_config`` reads back into an equal config. Programs
    that set up switches (the lab, scripts) build a ``DeploymentConfig`` and write this, so the file's
    schema lives here alone."""
    controller_cfg = cfg.controller
    controller: dict[str, Any] = {
        k: getattr(controller_cfg, k)
        for k in ("election_id", "counter_interval_s", "audit_interval_s", "reconnect_min_s", "reconnect_max_s",
                  "probe_interval_s", "write_batch", "apply_timeout_s", "read_back_on_apply")
    }  # fmt: skip
    if controller_cfg.state_file is not None:
        controller["state_file"] = str(controller_cfg.state_file)
    defaults_cfg = cfg.defaults
    defaults: dict[str, Any] = {
        "ecn": ecn_document(defaults_cfg.ecn, defaults_cfg.ecn_rules),
        "drop_policy": {
            "level_depths": list(defaults_cfg.drop_policy.level_depths),
            "min_importance": list(defaults_cfg.drop_policy.min_importance),
        },
        "interleaving": defaults_cfg.interleaving,
        "queue": _queue_document(defaults_cfg.queue),
        "packet_bytes": defaults_cfg.packet_bytes,
    }
    artifacts = cfg.tofino
    tofino = {
        "p4info": str(artifacts.p4info),
        "bfrt": str(artifacts.bfrt),
        "context": str(artifacts.context),
        "binary": str(artifacts.binary),
        "device_config_format": artifacts.device_config_format,
    }
    doc: dict[str, Any] = {
        "pipeline": {"p4info": str(cfg.p4info), "device_config": str(cfg.device_config), "tofino": tofino},
        "listen": {
            "intent": controller_cfg.intent_addr,
            "metrics": controller_cfg.metrics_addr,
            "allow_remote": controller_cfg.allow_remote,
        },
        "controller": controller,
        "defaults": defaults,
        "switches": [_switch_document(sw) for sw in cfg.switches],
    }
    if controller_cfg.tls is not None:
        files = {k: str(v) for k in ("ca", "cert", "key") if (v := getattr(controller_cfg.tls, k)) is not None}
        doc["tls"] = {**files, "client_auth": controller_cfg.tls.client_auth}
    return doc


def write_config(cfg: DeploymentConfig, path: Path) -> Path:
    path.write_text(yaml.safe_dump(config_document(cfg), sort_keys=False))
    return path


def _queue_document(q: QueueSettings) -> dict[str, int]:
    return {k: v for k in QUEUE_KEYS if (v := getattr(q, k)) is not None}


def _mac_text(mac: int) -> str:
    return ":".join(f"{(mac >> (8 * i)) & 0xFF:02x}" for i in range(5, -1, -1))


def _switch_document(sw: SwitchConfig) -> dict[str, Any]:
    out: dict[str, Any] = {"name": sw.name, "grpc_addr": sw.grpc_addr, "device_id": sw.device_id, "target": sw.target}
    if sw.thrift_port is not None:
        out["thrift_port"] = sw.thrift_port
        out["thrift_host"] = sw.thrift_host
    if sw.election_id is not None:
        out["election_id"] = sw.election_id
    if sw.tls is not None:
        out["tls"] = sw.tls
    if sw.tls_server_name:
        out["tls_server_name"] = sw.tls_server_name
    out["ports"] = [{"port": p.port, **_queue_document(p.queue)} for p in sw.ports]
    out["routes_v4"] = [
        {"prefix": str(r.prefix), "port": r.port, "src_mac": _mac_text(r.src_mac), "dst_mac": _mac_text(r.dst_mac)}
        for r in sw.routes_v4
    ]
    return out


# ---- helpers ----


def _state_file(value: Any, base_dir: Path | None) -> Path | None:
    if value is None:
        return None
    state_file = Path(as_str(value, "controller.state_file"))
    if not state_file.is_absolute() and base_dir is not None:
        state_file = base_dir / state_file
    if not state_file.parent.is_dir():
        raise ValidationError("controller.state_file", f"folder {str(state_file.parent)!r} does not exist")
    if state_file.is_dir():
        raise ValidationError("controller.state_file", f"{str(state_file)!r} is a folder")
    return state_file


def _artifact(value: Any, path: str, base_dir: Path | None, default: Path) -> Path:
    if value is None:
        return default
    artifact = Path(as_str(value, path))
    if not artifact.is_absolute() and base_dir is not None:
        artifact = base_dir / artifact
    return artifact
