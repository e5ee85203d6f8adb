"""Network namespaces joined by veth pairs, for transport tests and the benchmark (root only).

``NetnsLab`` creates namespaces with a unique prefix and deletes them on exit, whatever happened
(deleting a namespace destroys the veth ends inside it, so nothing is left in the root namespace).
Veth pairs are created directly inside their namespaces. ``in_netns`` runs a function (e.g. one that
opens a socket) on a thread that has entered a namespace: a socket keeps the namespace it was
created in, so one process can drive endpoints in several namespaces.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from mlfc.testing.veth import NetError, run

CLONE_NEWNET = 0x40000000
T = TypeVar("T")
NetnsError = NetError  # a failed ip/tc command (the command helper is testing.veth's)


def in_netns(name: str, fn: Callable[[], T]) -> T:
    """Run ``fn`` on a helper thread inside namespace ``name`` and return its result."""
    libc = ctypes.CDLL(None, use_errno=True)
    box: dict[str, object] = {}

    def target() -> None:
        try:
            fd = os.open(f"/var/run/netns/{name}", os.O_RDONLY)
            try:
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"setns({name}): {os.strerror(err)}")
            finally:
                os.close(fd)
            box["result"] = fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, name=f"netns-{name}")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["result"]  # type: ignore[return-value]


@dataclass
class NetnsLab:
    """``with NetnsLab("t") as lab: a = lab.namespace("a"); lab.link(a, "10.77.1.1", b, "10.77.1.2")``."""

    tag: str = "lab"
    namespaces: list[str] = field(default_factory=list)
    _links: int = 0

    def __post_init__(self) -> None:
        self.prefix = f"mlfc-{self.tag}-{os.getpid()}-"

    def namespace(self, short: str) -> str:
        name = self.prefix + short
        run("ip", "netns", "add", name)
        self.namespaces.append(name)
        run("ip", "-n", name, "link", "set", "lo", "up")
        return name

    def link(
        self, ns_a: str, addr_a: str, ns_b: str, addr_b: str, *, prefix_len: int = 24, mtu: int = 1500
    ) -> tuple[str, str]:
        """A veth pair between two namespaces with one IPv4 address on each end; returns the device names."""
        self._links += 1
        dev_a, dev_b = f"v{self._links}a", f"v{self._links}b"
        run("ip", "link", "add", dev_a, "netns", ns_a, "mtu", str(mtu), "type", "veth",
            "peer", "name", dev_b, "netns", ns_b, "mtu", str(mtu))  # fmt: skip
        for ns, dev, addr in ((ns_a, dev_a, addr_a), (ns_b, dev_b, addr_b)):
            run("ip", "netns", "exec", ns, "sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1", check=False)
            run("ip", "-n", ns, "addr", "add", f"{addr}/{prefix_len}", "dev", dev)
            run("ip", "-n", ns, "link", "set", dev, "up")
        return dev_a, dev_b

    def exec_args(self, ns: str) -> list[str]:
        return ["ip", "netns", "exec", ns]

    def tc(self, ns: str, *args: str) -> None:
        run("ip", "netns", "exec", ns, "tc", *args)

    def run_in(self, ns: str, *cmd: str) -> subprocess.CompletedProcess:
        """A command inside namespace ``ns`` (raises NetnsError when it fails)."""
        return run("ip", "netns", "exec", ns, *cmd)

    def close(self) -> None:
        for name in reversed(self.namespaces):
            run("ip", "netns", "del", name, check=False)
        self.namespaces.clear()

    def __enter__(self) -> NetnsLab:
        atexit.register(self.close)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        atexit.unregister(self.close)
