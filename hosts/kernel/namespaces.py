"""Network namespaces: their default congestion control and the TCP sockets in them.

A namespace is named as ``ip netns`` does (a name under /var/run/netns), by a path to a namespace
file (``/proc/PID/ns/net``, a container's), or ``root`` for the host's. Everything runs through
``nsenter --net=PATH`` (util-linux), so one mechanism reaches named, container and root namespaces.
``net.ipv4.tcp_congestion_control`` is per namespace (Linux >= 4.15); a socket takes the default of
the namespace it is created in, or what the application sets with ``TCP_CONGESTION``.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from mlfc.hosts.kernel import KernelMltcpError

NETNS_DIR = Path("/var/run/netns")
ROOT = "root"
# The namespace mlfc-mltcp runs in stands for the host's ("root"): /proc/1 may be out of reach in a sandbox.
HOST_NS = "/proc/self/ns/net"
AVAILABLE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
# Which congestion controls a namespace other than the root one may default to, and an unprivileged
# process may select: set in the root namespace only. mltcp_* mark themselves allowed when registered.
ALLOWED = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")


@dataclass(frozen=True)
class Namespace:
    label: str  # "root", an `ip netns` name, or "pid N"
    path: str
    inode: int


def resolve(spec: str) -> Namespace:
    """``root``, an ``ip netns`` name, or a path to a network namespace file."""
    if spec in (ROOT, "host"):
        path = HOST_NS
        label = ROOT
    elif "/" in spec:
        path, label = spec, spec
    else:
        path, label = str(NETNS_DIR / spec), spec
    try:
        inode = os.stat(path).st_ino
    except FileNotFoundError:
        known = ", ".join(sorted(p.name for p in NETNS_DIR.glob("*"))) or "none"
        raise KernelMltcpError(f"no network namespace {spec!r} (named ones: {known}; or 'root', or a path)") from None
    except PermissionError:
        raise KernelMltcpError(f"cannot open {path}: run as root") from None
    return Namespace(label, path, inode)


def all_namespaces(include_processes: bool = True) -> list[Namespace]:
    """The root namespace, every named one, and (``include_processes``) those only processes hold,
    such as containers'; one entry per namespace."""
    seen: dict[int, Namespace] = {}
    candidates = [(ROOT, HOST_NS)]
    candidates += [(p.name, str(p)) for p in sorted(NETNS_DIR.glob("*"))]
    if include_processes:
        for path in sorted(glob.glob("/proc/[0-9]*/ns/net"), key=lambda p: int(p.split("/")[2])):
            candidates.append((f"pid {path.split('/')[2]}", path))
    for label, path in candidates:
        try:
            inode = os.stat(path).st_ino
        except OSError:
            continue
        seen.setdefault(inode, Namespace(label, path, inode))
    return list(seen.values())


def _nsenter(ns: Namespace, *cmd: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["nsenter", f"--net={ns.path}", *cmd], capture_output=True, text=True, timeout=10)
    except FileNotFoundError:
        raise KernelMltcpError("nsenter not found: apt-get install util-linux") from None


def available() -> list[str]:
    return AVAILABLE.read_text().split()


def allowed() -> list[str]:
    return ALLOWED.read_text().split()


def set_allowed(ccs: list[str]) -> None:
    """Replace the root namespace's allowed list (``net.ipv4.tcp_allowed_congestion_control``)."""
    ALLOWED.write_text(" ".join(ccs) + "\n")


def get_default_cc(ns: Namespace) -> str:
    res = _nsenter(ns, "sysctl", "-n", "net.ipv4.tcp_congestion_control")
    if res.returncode != 0:
        raise KernelMltcpError(f"reading the congestion control of {ns.label}: {res.stderr.strip()}")
    return res.stdout.strip()


def set_default_cc(ns: Namespace, cc: str) -> None:
    if cc not in available():
        raise KernelMltcpError(
            f"congestion control {cc!r} is not available (have: {' '.join(available())}); "
            "for mltcp_* run `mlfc-mltcp load` first"
        )
    if ns.inode != os.stat(HOST_NS).st_ino and cc not in allowed():
        # Checked here because the kernel's refusal (EPERM) leaks a reference to the congestion control
        # (tcp_set_default_congestion_control, up to at least 6.18): a BPF one could then never be freed.
        raise KernelMltcpError(
            f"{cc} is not in net.ipv4.tcp_allowed_congestion_control ({' '.join(allowed())}), so only the root "
            f"namespace may default to it: add it there first (sysctl -w in the root namespace)"
        )
    res = _nsenter(ns, "sysctl", "-qw", f"net.ipv4.tcp_congestion_control={cc}")
    if res.returncode != 0:
        raise KernelMltcpError(f"setting {cc} in {ns.label}: {res.stderr.strip()}")


@dataclass(frozen=True)
class TcpSocket:
    namespace: str
    state: str
    local: str
    peer: str
    cc: str
    cwnd: int | None
    rtt_ms: float | None


_CWND = re.compile(r"\bcwnd:(\d+)")
_RTT = re.compile(r"\brtt:([\d.]+)/")


def sockets(ns: Namespace, ccs: set[str] | None = None) -> list[TcpSocket]:
    """TCP sockets of a namespace (``ss -tin``), with the congestion control each uses; only those
    using one of ``ccs`` when given."""
    res = _nsenter(ns, "ss", "-tinH")
    if res.returncode != 0:
        raise KernelMltcpError(f"ss in {ns.label}: {res.stderr.strip() or 'failed'} (apt-get install iproute2)")
    out, head = [], None
    for line in res.stdout.splitlines():
        if not line.startswith((" ", "\t")):
            head = line.split()
            continue
        if head is None or len(head) < 5:
            continue
        info = line.split()
        cc = info[0] if info and ":" not in info[0] else ""
        if ccs is None or cc in ccs:
            cwnd, rtt = _CWND.search(line), _RTT.search(line)
            out.append(TcpSocket(ns.label, head[0], head[3], head[4], cc, int(cwnd.group(1)) if cwnd else None,
                                 float(rtt.group(1)) if rtt else None))  # fmt: skip
        head = None
    return out
