"""Register, configure, inspect and unregister the MLTCP congestion controls.

``load`` opens an algorithm's object, writes the parameters (from :mod:`mlfc.policy.mltcp`) into its
parameter map, and only then registers the struct_ops, so no connection ever runs on unset
parameters. ``unload`` first moves every network namespace whose default is the algorithm to a
fallback (a namespace default holds a reference that would keep the program alive), then deletes
the registration. Connections still open keep their (unregistered) instance until they close;
``status`` lists such instances as "to be freed".
"""

from __future__ import annotations

import os
import struct
import time
from dataclasses import dataclass, field

from mlfc.hosts.kernel import KernelMltcpError, build, libbpf, namespaces, params
from mlfc.policy.mltcp import IterationDetection, MltcpParams, default_params


@dataclass(frozen=True)
class Algorithm:
    key: str  # "reno" | "cubic" | "dctcp"
    name: str  # the congestion control's name, as sysctl and TCP_CONGESTION see it
    obj: str  # object file (build.object_path)
    prefix: str  # map name prefix in the object (MLTCP_MAPS)

    @property
    def params_map(self) -> str:
        return f"{self.prefix}_params"

    @property
    def flows_map(self) -> str:
        return f"{self.prefix}_flows"

    @property
    def stats_map(self) -> str:
        return f"{self.prefix}_stats"

    @property
    def jobs_map(self) -> str:
        return f"{self.prefix}_jobs"


ALGORITHMS = {
    "reno": Algorithm("reno", "mltcp_reno", "mltcp_reno", "mltcp_r"),
    "cubic": Algorithm("cubic", "mltcp_cubic", "mltcp_cubic", "mltcp_c"),
    # DCTCP (needs ECN: docs/kernel-mltcp.md); without ECN a connection moves itself to mltcp_reno
    "dctcp": Algorithm("dctcp", "mltcp_dctcp", "mltcp_dctcp", "mltcp_d"),
}
# enum mltcp_stat
STAT_NAMES = ("init", "release", "iterations", "tx_start", "ssthresh", "no_params", "no_ecn")
FALLBACK_CC = "cubic"
_FLOW = struct.Struct("<IHHHHI16s16sQQQIIIIQ")  # struct mltcp_flow (key: the socket's address, u64)
_JOB_KEY = struct.Struct("<IHH16s16s")  # struct mltcp_job_key
_JOB = struct.Struct("<QQQQQII")  # struct mltcp_job


def algorithm(spec: str) -> Algorithm:
    key = spec.removeprefix("mltcp_")
    if key not in ALGORITHMS:
        raise KernelMltcpError(f"unknown algorithm {spec!r}: choose from {', '.join(ALGORITHMS)}")
    return ALGORITHMS[key]


def algorithms(specs: list[str] | None) -> list[Algorithm]:
    return [algorithm(s) for s in specs] if specs else list(ALGORITHMS.values())


def check_privileges() -> None:
    if os.geteuid() != 0:
        raise KernelMltcpError("registering a congestion control needs root (CAP_BPF and CAP_NET_ADMIN)")


def registered(alg: Algorithm) -> bool:
    return alg.name in namespaces.available()


# ---- load / unload ------------------------------------------------------------------------------


def load(
    algs: list[Algorithm],
    policy: MltcpParams | None = None,
    detection: IterationDetection | None = None,
    *,
    log=print,
) -> None:
    """Register each algorithm with the parameters (``policy`` None: each family's default F,
    mlfc.policy.mltcp.default_params); on any failure none of them stays registered."""
    check_privileges()
    build.ensure_built()
    values = {
        alg.key: params.encode(policy or default_params(alg.key), detection or IterationDetection()) for alg in algs
    }
    for alg in algs:
        if registered(alg):
            raise KernelMltcpError(f"{alg.name} is already registered: `mlfc-mltcp set` changes its parameters, "
                                   "`mlfc-mltcp unload` removes it")  # fmt: skip
    done: list[Algorithm] = []
    try:
        for alg in algs:
            with libbpf.BpfObject(str(build.object_path(alg.obj))) as obj:
                try:
                    obj.load()
                except OSError as exc:
                    raise KernelMltcpError(f"the kernel refused {alg.name}'s programs: {exc}") from exc
                libbpf.map_update(obj.map_fd(alg.params_map), struct.pack("<I", 0), values[alg.key])
                try:
                    obj.attach_struct_ops(alg.name)
                except OSError as exc:
                    raise KernelMltcpError(f"registering {alg.name} failed: {exc}") from exc
            done.append(alg)
            log(f"registered {alg.name}")
    except BaseException:
        for alg in done:
            _unregister(alg)
        raise


def struct_ops_maps(alg: Algorithm) -> list[tuple[libbpf.MapInfo, str]]:
    """Every struct_ops map of this algorithm with its state (in use = registered)."""
    out = []
    for fd, info in libbpf.maps():
        try:
            if info.type == libbpf.BPF_MAP_TYPE_STRUCT_OPS and info.name == alg.name:
                raw = libbpf.map_lookup(fd, struct.pack("<I", 0), info.value_size)
                state = struct.unpack_from("<I", raw, 4)[0] if raw else -1
                out.append((info, libbpf.STRUCT_OPS_STATES.get(state, f"state {state}")))
        finally:
            os.close(fd)
    return out


def _unregister(alg: Algorithm) -> list[int]:
    """Delete the registration of every registered instance; returns their map ids."""
    ids = []
    for info, state in struct_ops_maps(alg):
        if state != "in use":
            continue
        fd = libbpf.open_map(info.id)
        try:
            libbpf.map_delete(fd, struct.pack("<I", 0))
            ids.append(info.id)
        finally:
            os.close(fd)
    return ids


def unload(algs: list[Algorithm], fallback: str = FALLBACK_CC, *, log=print) -> list[str]:
    """Unregister; returns warnings (instances kept alive by open connections)."""
    check_privileges()
    names = {a.name for a in algs}
    if fallback in names:
        raise KernelMltcpError(f"the fallback {fallback!r} is being unloaded: choose another (--fallback)")
    for ns in namespaces.all_namespaces():
        try:
            current = namespaces.get_default_cc(ns)
        except KernelMltcpError:
            continue  # the holder exited meanwhile
        if current in names:
            namespaces.set_default_cc(ns, fallback)
            log(f"{ns.label}: default congestion control {current} -> {fallback}")
    warnings = []
    for alg in algs:
        ids = _unregister(alg)
        log(f"unregistered {alg.name}" if ids else f"{alg.name} was not registered")
        deadline = time.monotonic() + 2.0
        while (held := [m.id for m, _ in struct_ops_maps(alg) if m.id in ids]) and time.monotonic() < deadline:
            time.sleep(0.05)  # the kernel frees an unused instance after an RCU grace period
        if held:
            warnings.append(f"{alg.name}: the unregistered instance (map {', '.join(map(str, held))}) is still held "
                            "by open connections; it goes away when they close")  # fmt: skip
        older = [m.id for m, _ in struct_ops_maps(alg) if m.id not in ids]
        if older:
            warnings.append(f"{alg.name}: older unregistered instances (maps {', '.join(map(str, older))}) are held by "
                            "open connections or a leaked kernel reference (docs/kernel-mltcp.md)")  # fmt: skip
    return warnings


# ---- parameters ---------------------------------------------------------------------------------


def _maps_named(name: str) -> list[tuple[int, libbpf.MapInfo]]:
    found = []
    for fd, info in libbpf.maps():
        if info.name == name:
            found.append((fd, info))
        else:
            os.close(fd)
    return found


def set_params(algs: list[Algorithm], policy: MltcpParams, detection: IterationDetection) -> int:
    """Write new parameters into every instance (registered or kept by open connections); returns
    how many maps were written. Connections pick them up on their next ACK."""
    check_privileges()
    value = params.encode(policy, detection)
    n = 0
    for alg in algs:
        for fd, _ in _maps_named(alg.params_map):
            try:
                libbpf.map_update(fd, struct.pack("<I", 0), value)
                n += 1
            finally:
                os.close(fd)
    if n == 0:
        raise KernelMltcpError(f"no {'/'.join(a.name for a in algs)} loaded: run `mlfc-mltcp load` first")
    return n


def read_params(alg: Algorithm) -> list[params.KernelParams]:
    out = []
    for fd, info in _maps_named(alg.params_map):
        try:
            raw = libbpf.map_lookup(fd, struct.pack("<I", 0), info.value_size)
            if raw:
                out.append(params.decode(raw))
        finally:
            os.close(fd)
    return out


# ---- status -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FlowState:
    """One connection's iteration state, as the congestion control last wrote it."""

    netns: int
    local: str
    peer: str
    iterations: int
    bytes_per_iteration: int
    last_iteration_bytes: int
    last_f: float
    cwnd: int
    ssthresh: int
    age_s: float
    # grouping on: the connection's job (same namespace, local address, peer address and port) when the
    # record was written; 0 with grouping off
    job_iterations: int = 0
    job_bytes_per_iteration: int = 0


@dataclass(frozen=True)
class JobState:
    """One job's shared progress (grouping on): the connections from ``local`` to ``peer`` in ``netns``."""

    netns: int
    local: str  # the address, no port: every local port of the job
    peer: str
    iterations: int
    bytes_per_iteration: int
    last_iteration_bytes: int
    this_iteration_bytes: int
    last_f: float  # F from the job's bytes_ratio when its last iteration ended
    idle_s: float  # since the job's last activity


@dataclass
class AlgorithmStatus:
    name: str
    registered: bool
    instances: list[tuple[int, str]] = field(default_factory=list)  # (map id, state)
    params: list[params.KernelParams] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)
    flows: list[FlowState] = field(default_factory=list)
    jobs: list[JobState] = field(default_factory=list)


def _addr(family: int, raw: bytes, port: int | None = None) -> str:
    import ipaddress

    if family == 10:
        host = str(ipaddress.IPv6Address(raw))
        return host if port is None else f"[{host}]:{port}"
    host = str(ipaddress.IPv4Address(raw[:4]))
    return host if port is None else f"{host}:{port}"


def flows(alg: Algorithm) -> list[FlowState]:
    now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)  # bpf_ktime_get_ns's clock
    out = []
    for fd, info in _maps_named(alg.flows_map):
        try:
            for _, v in libbpf.map_items(fd, info.key_size, info.value_size):
                (netns, family, sport, dport, _, its, saddr, daddr, bpi, last, updated, f_fp, cwnd, ssthresh,
                 job_its, job_bpi) = _FLOW.unpack(v[: _FLOW.size])  # fmt: skip
                out.append(FlowState(netns, _addr(family, saddr, sport), _addr(family, daddr, dport), its, bpi, last,
                                     params.from_fp(f_fp), cwnd, ssthresh, (now - updated) / 1e9, job_its,
                                     job_bpi))  # fmt: skip
        finally:
            os.close(fd)
    return out


def jobs(alg: Algorithm) -> list[JobState]:
    """The jobs' shared progress (grouping on; kept after the connections close, until the LRU map
    needs the room)."""
    now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    out = []
    for fd, info in _maps_named(alg.jobs_map):
        try:
            for k, v in libbpf.map_items(fd, info.key_size, info.value_size):
                netns, family, dport, saddr, daddr = _JOB_KEY.unpack(k[: _JOB_KEY.size])
                acked, start, bpi, last, last_ns, its, f_fp = _JOB.unpack(v[: _JOB.size])
                out.append(JobState(netns, _addr(family, saddr), _addr(family, daddr, dport), its, bpi, last,
                                    max(acked - start, 0), params.from_fp(f_fp), (now - last_ns) / 1e9))  # fmt: skip
        finally:
            os.close(fd)
    return out


def stats(alg: Algorithm) -> dict[str, int]:
    total = dict.fromkeys(STAT_NAMES, 0)
    for fd, info in _maps_named(alg.stats_map):
        try:
            for i, name in enumerate(STAT_NAMES):
                raw = libbpf.map_lookup(fd, struct.pack("<I", i), info.value_size)
                total[name] += struct.unpack("<Q", raw[:8])[0] if raw else 0
        finally:
            os.close(fd)
    return total


def status(algs: list[Algorithm] | None = None) -> list[AlgorithmStatus]:
    check_privileges()
    out = []
    for alg in algs or list(ALGORITHMS.values()):
        st = AlgorithmStatus(alg.name, registered(alg))
        st.instances = [(info.id, state) for info, state in struct_ops_maps(alg)]
        if st.instances:
            st.params = read_params(alg)
            st.stats = stats(alg)
            st.flows = flows(alg)
            st.jobs = jobs(alg)
        out.append(st)
    return out
