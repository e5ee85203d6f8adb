"""veth pairs for packet tests: one end for the switch, one for the test (PTF or a host socket).

IPv6 is disabled (router solicitations and MLD reports would show up as unexpected packets) and
offloads are off (veth TX checksum offload leaves checksums unfilled in what the switch sees).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass


class NetError(RuntimeError):
    pass


def run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run(list(cmd), capture_output=True, text=True)
    if check and res.returncode != 0:
        raise NetError(f"{' '.join(cmd)}: {res.stderr.strip() or res.stdout.strip()}")
    return res


def quiet_interface(iface: str, netns: str | None = None) -> None:
    """Disable IPv6 and offloads on an interface and bring it up."""
    prefix = ["ip", "netns", "exec", netns] if netns else []
    run(*prefix, "sysctl", "-qw", f"net.ipv6.conf.{iface}.disable_ipv6=1", check=False)
    if shutil.which("ethtool"):
        for feature in ("rx", "tx", "sg", "tso", "gso", "gro", "lro", "rxvlan", "txvlan"):
            run(*prefix, "ethtool", "-K", iface, feature, "off", check=False)
    run(*prefix, "ip", "link", "set", iface, "up")


@dataclass(frozen=True)
class VethPair:
    switch_side: str
    test_side: str


def unique_prefix(tag: str) -> str:
    """Interface-name prefix unique to this process: suites on one machine (another checkout's tests,
    a benchmark) create veths at the same time, and creating a pair first deletes any of that name."""
    return f"{tag}{os.getpid() % 10000}"


def create_pairs(count: int, prefix: str = "mlfc") -> list[VethPair]:
    pairs = []
    try:
        for i in range(count):
            pair = VethPair(f"{prefix}{i}s", f"{prefix}{i}t")
            run("ip", "link", "del", pair.switch_side, check=False)
            run("ip", "link", "add", pair.switch_side, "type", "veth", "peer", "name", pair.test_side)
            pairs.append(pair)
            for iface in (pair.switch_side, pair.test_side):
                quiet_interface(iface)
    except BaseException:
        delete_pairs(pairs)
        raise
    return pairs


def delete_pairs(pairs: list[VethPair]) -> None:
    for pair in pairs:
        run("ip", "link", "del", pair.switch_side, check=False)


@contextlib.contextmanager
def veth_pairs(count: int, prefix: str = "mlfc") -> Iterator[list[VethPair]]:
    pairs = create_pairs(count, prefix)
    try:
        yield pairs
    finally:
        delete_pairs(pairs)
