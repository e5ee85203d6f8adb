"""The phantom-queue ECN marker: a tc/eBPF program that sets CE from a model of a shaper's queue.

The kernel lab's bottleneck is an ``htb`` of rate R over a ``bfifo`` of ``limit`` bytes; this kernel
has no red, fq_codel or netem, so the only congestion signal it can give is a tail drop. The marker
(``bpf/ecn_marker.bpf.c``) hangs at clsact egress of the same device, where it sees every packet
before the shaper does, and keeps a virtual queue: drained at R since the previous packet, grown by
the packet's wire length, never past ``limit`` (a packet the real queue would drop is not counted).
An ECT(0)/ECT(1) IPv4 or IPv6 packet joining a virtual queue above K bytes is marked CE (``step``,
DCTCP's switch); ``red`` marks with a probability rising from 0 at kmin to pmax at kmax, and always
above kmax, like mlfc/policy/ecn.py's profile (here in bytes).

    with marker.attach("ns-router", "v9a", 50e6, k_bytes=30_000, limit_bytes=300_000) as m:
        ...
        print(m.stats().marked, m.stats().marks_by_source)

Each attach loads its own object instance (one config, one state per device), writes the
parameters before the program is attached, and attaches with libbpf's tc API inside the namespace.
The filter keeps the program and its maps alive if this process exits: :func:`find` reaches an
attached marker again (through the filter's program id), and its ``detach`` removes it.
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import ipaddress
import json
import os
import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from mlfc.hosts.kernel import KernelMltcpError, build, libbpf, namespaces

OBJECT = "ecn_marker"
PROGRAM = "ecn_marker"
MARKER_VERSION = 1
# The filter's place at clsact egress: one marker per device.
TC_HANDLE = 0x4D4C
TC_PRIORITY = 0x4D4C
MODES = {"step": 0, "red": 1}
MAPS = ("ecn_config", "ecn_state", "ecn_sources")
MAX_BYTES = (1 << 31) - 1  # the BPF side keeps the queue in nanobits (bytes * 8e9) in 64 bits
FP_ONE = 1 << 32

CONFIG = struct.Struct("<IIQQQQQII")  # struct marker_config
# struct marker_state: bpf_spin_lock, pad, vq (nanobits), last_ns, packets, bytes, ect, marked, ce,
# overflow, overflow_bytes, max_vq_bytes
STATE = struct.Struct("<II10Q")
SOURCE_KEY = struct.Struct("<16s")
SOURCE = struct.Struct("<QQ")  # packets, marks
NANOBITS_PER_BYTE = 8 * 10**9
T = TypeVar("T")


@dataclass(frozen=True)
class MarkerConfig:
    """What the marker models and how it marks. ``step``: CE above ``k_bytes``; ``red``: no mark at or
    below ``k_bytes`` (kmin), probability rising linearly to ``pmax`` at ``kmax_bytes``, always above."""

    rate_bps: int
    k_bytes: int
    limit_bytes: int
    mode: str = "step"
    kmax_bytes: int | None = None
    pmax: float = 1.0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise KernelMltcpError(f"marker mode {self.mode!r}: one of {', '.join(MODES)}")
        if not 1 <= self.rate_bps <= 10**12:
            raise KernelMltcpError(f"marker rate {self.rate_bps} bit/s: must be 1 .. 1e12")
        if not 1 <= self.limit_bytes <= MAX_BYTES:
            raise KernelMltcpError(f"marker limit {self.limit_bytes} B: must be 1 .. {MAX_BYTES}")
        if not 0 <= self.k_bytes <= self.limit_bytes:
            raise KernelMltcpError(f"marking threshold {self.k_bytes} B: must be 0 .. the limit {self.limit_bytes}")
        if self.mode == "red":
            if self.kmax_bytes is None or not self.k_bytes <= self.kmax_bytes <= MAX_BYTES:
                raise KernelMltcpError(f"red needs kmax_bytes >= k_bytes ({self.k_bytes}), got {self.kmax_bytes}")
            if not 0.0 <= self.pmax <= 1.0:
                raise KernelMltcpError(f"pmax {self.pmax}: a probability in [0, 1]")

    @property
    def thresholds(self) -> tuple[int, int, int]:
        """(kmin, kmax, pmax x 2^32) as the BPF side holds them; the step is kmin = kmax = K."""
        if self.mode == "step":
            return self.k_bytes, self.k_bytes, FP_ONE
        assert self.kmax_bytes is not None
        return self.k_bytes, self.kmax_bytes, round(self.pmax * FP_ONE)

    def encode(self, own_clsact: bool = False) -> bytes:
        kmin, kmax, pmax_fp = self.thresholds
        return CONFIG.pack(MARKER_VERSION, MODES[self.mode], self.rate_bps, self.limit_bytes, kmin, kmax, pmax_fp,
                           int(own_clsact), 0)  # fmt: skip

    @classmethod
    def decode(cls, raw: bytes) -> MarkerConfig:
        version, mode, rate, limit, kmin, kmax, pmax_fp, _, _ = CONFIG.unpack_from(raw)
        if version != MARKER_VERSION:
            raise KernelMltcpError(f"marker config version {version}, this loader knows {MARKER_VERSION}")
        name = {v: k for k, v in MODES.items()}[mode]
        if name == "step":
            return cls(rate, kmin, limit)
        return cls(rate, kmin, limit, "red", kmax, pmax_fp / FP_ONE)


@dataclass(frozen=True)
class MarkerStats:
    """Counters since attach. ``seen``/``bytes``: every packet and its wire bytes; ``ect``: ECT(0)/ECT(1)
    IP packets (markable); ``marked``: set CE here; ``ce``: arrived CE already; ``overflow``: packets
    the real queue would have dropped (not counted in the queue, never marked); ``vq_bytes``: the
    virtual queue after the last packet (not drained to now); ``marks_by_source``/``packets_by_source``:
    per source address (``"10.80.1.1"``, IPv6 compressed)."""

    seen: int
    marked: int
    marks_by_source: dict[str, int] = field(default_factory=dict)
    bytes: int = 0
    ect: int = 0
    ce: int = 0
    overflow: int = 0
    overflow_bytes: int = 0
    vq_bytes: float = 0.0
    max_vq_bytes: int = 0
    packets_by_source: dict[str, int] = field(default_factory=dict)


def read_stats(fds: dict[str, int]) -> MarkerStats:
    """The counters of a loaded marker object, from its maps' fds (``ecn_state``, ``ecn_sources``)."""
    raw = libbpf.map_lookup_locked(fds["ecn_state"], struct.pack("<I", 0), STATE.size)
    _, _, vq, _, packets, nbytes, ect, marked, ce, overflow, overflow_bytes, max_vq = STATE.unpack(raw)
    marks: dict[str, int] = {}
    seen: dict[str, int] = {}
    for key, value in libbpf.map_items(fds["ecn_sources"], SOURCE_KEY.size, SOURCE.size):
        addr = _address(key)
        seen[addr], marks[addr] = SOURCE.unpack(value)
    return MarkerStats(packets, marked, marks, nbytes, ect, ce, overflow, overflow_bytes,
                       vq / NANOBITS_PER_BYTE, max_vq, seen)  # fmt: skip


def _address(raw: bytes) -> str:
    addr = ipaddress.IPv6Address(raw)
    return str(addr.ipv4_mapped or addr)


def _in_namespace(path: str, fn: Callable[[], T]) -> T:
    """``fn()`` on a thread that has entered the network namespace at ``path`` (libbpf's netlink
    socket, like ``if_nametoindex``'s, lives in the calling thread's namespace)."""
    libc = ctypes.CDLL(None, use_errno=True)
    box: dict[str, object] = {}

    def target() -> None:
        try:
            fd = os.open(path, os.O_RDONLY)
            try:
                if libc.setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
                    err = ctypes.get_errno()
                    raise OSError(err, f"setns({path}): {os.strerror(err)}")
            finally:
                os.close(fd)
            box["result"] = fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, name="mlfc-marker-netns")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["result"]  # type: ignore[return-value]


def _ifindex(ns: namespaces.Namespace, dev: str) -> int:
    try:
        return socket.if_nametoindex(dev)
    except OSError:
        raise KernelMltcpError(f"no device {dev!r} in network namespace {ns.label}") from None


class Marker:
    """An attached marker; ``detach()`` (or leaving the ``with`` block) removes it and frees its maps."""

    def __init__(self, ns: namespaces.Namespace, dev: str, prog_id: int, fds: dict[str, int],
                 obj: libbpf.BpfObject | None, created_clsact: bool, prog_fd: int | None = None) -> None:  # fmt: skip
        self.ns, self.dev, self.prog_id = ns, dev, prog_id
        self._fds = fds
        self._obj = obj  # owns the fds when this process loaded the object
        self._prog_fd = prog_fd  # found markers: fds opened by id, closed here
        self._created_clsact = created_clsact
        self.attached = True

    @property
    def netns(self) -> str:
        return self.ns.label

    def _maps(self) -> dict[str, int]:
        if not self._fds:
            raise KernelMltcpError(f"the marker on {self.netns}/{self.dev} is detached")
        return self._fds

    def config(self) -> MarkerConfig:
        raw = libbpf.map_lookup(self._maps()["ecn_config"], struct.pack("<I", 0), CONFIG.size)
        assert raw is not None
        return MarkerConfig.decode(raw)

    def stats(self) -> MarkerStats:
        return read_stats(self._maps())

    def detach(self) -> None:
        """Remove the filter (and clsact, if attach created it) and release the maps; idempotent, and
        quiet when the device or namespace is gone already (deleting either removes the filter too)."""
        if not self.attached:
            return
        self.attached = False

        def remove() -> None:
            try:
                ifindex = socket.if_nametoindex(self.dev)
            except OSError:
                return
            there = libbpf.tc_egress_query(ifindex, TC_HANDLE, TC_PRIORITY)
            if there == self.prog_id:
                libbpf.tc_egress_detach(ifindex, TC_HANDLE, TC_PRIORITY)
            if self._created_clsact and there in (None, self.prog_id):  # not if someone replaced the filter
                libbpf.tc_clsact_delete(ifindex)

        try:
            if os.path.exists(self.ns.path):
                _in_namespace(self.ns.path, remove)
        finally:
            self._close()

    def release(self) -> None:
        """Let go of this process's handles and leave the marker attached (the filter holds the program and
        its maps); :func:`find` reaches it again."""
        self.attached = False
        self._close()

    def _close(self) -> None:
        if self._obj is not None:
            self._obj.close()
            self._obj = None
        else:
            for fd in [*self._fds.values(), *([self._prog_fd] if self._prog_fd is not None else [])]:
                os.close(fd)
            self._prog_fd = None
        self._fds = {}

    def __enter__(self) -> Marker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.detach()

    def __repr__(self) -> str:
        return f"Marker({self.netns}/{self.dev}, prog {self.prog_id}, {'attached' if self.attached else 'detached'})"


def _check_root() -> None:
    if os.geteuid() != 0:
        raise KernelMltcpError("the ECN marker needs root (CAP_BPF, CAP_NET_ADMIN)")


def attach(netns: str, dev: str, rate_bps: float, k_bytes: int, limit_bytes: int, mode: str = "step", *,
           kmax_bytes: int | None = None, pmax: float = 1.0) -> Marker:  # fmt: skip
    """Attach a marker at clsact egress of ``dev`` in ``netns`` (an ``ip netns`` name, a namespace file
    path, or ``root``) modelling a shaper of ``rate_bps`` over a queue of ``limit_bytes``; CE above
    ``k_bytes`` (``mode="red"``: kmin ``k_bytes``, ``kmax_bytes``, ``pmax``)."""
    cfg = MarkerConfig(int(rate_bps), int(k_bytes), int(limit_bytes), mode, kmax_bytes, pmax)
    _check_root()
    ns = namespaces.resolve(netns)
    build.ensure_built()
    obj = libbpf.BpfObject(str(build.object_path(OBJECT)))
    try:
        obj.load()
        fds = {name: obj.map_fd(name) for name in MAPS}
        prog_fd = obj.prog_fd(PROGRAM)

        def hook() -> tuple[int, bool]:
            ifindex = _ifindex(ns, dev)
            created = libbpf.tc_clsact_create(ifindex)
            try:
                if not created and libbpf.tc_egress_query(ifindex, TC_HANDLE, TC_PRIORITY) is not None:
                    raise KernelMltcpError(f"{ns.label}/{dev} has a marker already (detach it first)")
                # the parameters before the first packet; whether clsact is ours, for whoever detaches
                libbpf.map_update(fds["ecn_config"], struct.pack("<I", 0), cfg.encode(own_clsact=created))
                return libbpf.tc_egress_attach(ifindex, prog_fd, TC_HANDLE, TC_PRIORITY), created
            except BaseException:
                if created:
                    libbpf.tc_clsact_delete(ifindex)
                raise

        prog_id, created = _in_namespace(ns.path, hook)
    except BaseException:
        obj.close()
        raise
    return Marker(ns, dev, prog_id, fds, obj, created)


def find(netns: str, dev: str) -> Marker | None:
    """The marker attached on ``dev`` (by this process or another), or None; its ``detach`` also deletes
    the clsact qdisc if that marker's attach created it."""
    _check_root()
    ns = namespaces.resolve(netns)

    def query() -> int | None:
        return libbpf.tc_egress_query(_ifindex(ns, dev), TC_HANDLE, TC_PRIORITY)

    prog_id = _in_namespace(ns.path, query)
    if prog_id is None:
        return None
    prog_fd, map_ids = libbpf.prog_map_ids(prog_id)
    fds: dict[str, int] = {}
    for map_id in map_ids:
        fd = libbpf.open_map(map_id)
        name = libbpf.map_info(fd).name
        if name in MAPS:
            fds[name] = fd
        else:
            os.close(fd)
    if len(fds) != len(MAPS):
        for fd in [*fds.values(), prog_fd]:
            os.close(fd)
        raise KernelMltcpError(f"the tc program on {ns.label}/{dev} at the marker's place is not an ECN marker")
    raw = libbpf.map_lookup(fds["ecn_config"], struct.pack("<I", 0), CONFIG.size)
    own_clsact = bool(raw and CONFIG.unpack(raw)[7])
    return Marker(ns, dev, prog_id, fds, None, own_clsact, prog_fd)


def _describe(m: Marker) -> str:
    cfg = m.config()
    if cfg.mode == "step":
        how = f"CE above {cfg.k_bytes} B"
    else:
        how = f"RED {cfg.k_bytes}..{cfg.kmax_bytes} B, pmax {cfg.pmax:g}"
    return (
        f"{m.netns}/{m.dev}: {how} of a {cfg.limit_bytes} B queue drained at {cfg.rate_bps:g} bit/s, prog {m.prog_id}"
    )


def cli(args: argparse.Namespace) -> int:
    """``mlfc-mltcp marker attach|stats|detach``: the marker outlives ``attach`` (the filter holds it)."""
    if args.action == "attach":
        if args.rate is None or args.k is None or args.limit is None:
            raise KernelMltcpError("marker attach needs --rate, --k and --limit")
        m = attach(args.netns, args.dev, args.rate, args.k, args.limit, args.mode, kmax_bytes=args.kmax,
                   pmax=args.pmax)  # fmt: skip
        print(f"attached: {_describe(m)}")
        m.release()
        return 0
    found = find(args.netns, args.dev)
    if found is None:
        raise KernelMltcpError(f"no marker on {args.netns}/{args.dev}")
    try:
        if args.action == "detach":
            print(f"detached: {_describe(found)}")
            found.detach()
            return 0
        stats = found.stats()
        if args.json:
            print(
                json.dumps({"config": dataclasses.asdict(found.config()), "stats": dataclasses.asdict(stats)}, indent=2)
            )
            return 0
        print(_describe(found))
        print(
            f"  packets {stats.seen} ({stats.bytes} B), ECT {stats.ect}, marked CE {stats.marked}, "
            f"arrived CE {stats.ce}, over the limit {stats.overflow}; "
            f"queue {stats.vq_bytes:.0f} B at the last packet, max {stats.max_vq_bytes} B"
        )
        for src in sorted(stats.packets_by_source):
            print(f"  {src}: {stats.packets_by_source[src]} packets, {stats.marks_by_source.get(src, 0)} marked")
        return 0
    finally:
        if found.attached:
            found.release()


def add_cli(sub: argparse._SubParsersAction) -> None:
    """Register ``marker`` with ``mlfc-mltcp``'s subcommands."""
    p = sub.add_parser("marker", help="the phantom-queue ECN marker (tc/eBPF) on a shaped device: attach|stats|detach")
    p.add_argument("action", choices=("attach", "stats", "detach"))
    p.add_argument("--netns", default=namespaces.ROOT, help="an `ip netns` name, a namespace path, or 'root'")
    p.add_argument("--dev", required=True, help="the device whose egress shaper the marker models")
    p.add_argument("--rate", type=float, help="attach: the shaper's rate, bit/s")
    p.add_argument("--k", type=int, help="attach: mark CE above this many bytes queued (red: kmin)")
    p.add_argument("--limit", type=int, help="attach: the queue's byte limit (bfifo limit)")
    p.add_argument("--mode", choices=tuple(MODES), default="step")
    p.add_argument("--kmax", type=int, help="red: always mark above this many bytes")
    p.add_argument("--pmax", type=float, default=1.0, help="red: the mark probability at kmax")
    p.add_argument("--json", action="store_true", help="stats: as JSON")
    p.set_defaults(fn=cli)
