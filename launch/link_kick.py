"""A BMv2 whose interface went down stands still until a frame arrives on that interface.

Measured here (docs/results.md, the chaos run's link fault): after the link between two BMv2 switches was
down for 1.6 s and up again, neither switch forwarded anything, on any port, for minutes, while
``show_ports`` said UP; p4lang/behavioral-model#1215 reports the same and that one frame arriving on the
interface wakes the switch. Between two switches nobody sends that frame: each waits for the other.

``LinkKick`` watches a switch's interfaces and, each time one comes back up, sends one frame into it from
its veth peer (when the peer is in this namespace; a host's end is not, and the host's own traffic does the
same job). The frame is an IEEE 802 local-experimental ethertype to the broadcast address: the pipeline
drops it (not IPv4), and neither mlfc nor a host takes it for traffic.
"""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import threading
from pathlib import Path

log = logging.getLogger("mlfc.launch.link_kick")

KICK_ETHERTYPE = 0x88B5  # IEEE 802 local experimental
POLL_S = 0.1


def operstate(iface: str) -> str:
    """The kernel's operational state of ``iface`` ("up", "down", ...; "" when it does not exist)."""
    try:
        return Path(f"/sys/class/net/{iface}/operstate").read_text().strip()
    except OSError:
        return ""


def veth_peer(iface: str) -> str | None:
    """The name of ``iface``'s veth peer when that peer is in this network namespace, else None."""
    res = subprocess.run(["ip", "-j", "-d", "link", "show", "dev", iface], capture_output=True, text=True)
    if res.returncode != 0:
        return None
    try:
        info = json.loads(res.stdout)[0]
    except (ValueError, IndexError):
        return None
    if info.get("linkinfo", {}).get("info_kind") != "veth" or "link_netnsid" in info:
        return None
    peer = info.get("link")
    return peer if isinstance(peer, str) and peer else None


def kick_frame(src_mac: bytes) -> bytes:
    payload = b"mlfc link kick".ljust(46, b"\0")  # the minimum Ethernet payload
    return b"\xff" * 6 + src_mac + KICK_ETHERTYPE.to_bytes(2, "big") + payload


def kick(iface: str) -> bool:
    """Send one frame into ``iface`` from its veth peer; False when there is no peer here to send from."""
    peer = veth_peer(iface)
    if peer is None:
        return False
    try:
        with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as sock:
            sock.bind((peer, 0))
            mac = sock.getsockname()[4][:6]
            sock.send(kick_frame(mac))
    except OSError as err:
        log.warning("%s: cannot send the wake-up frame from %s: %s", iface, peer, err)
        return False
    return True


class LinkKick:
    """A thread that kicks each of ``interfaces`` once every time it comes back up (module doc)."""

    def __init__(self, name: str, interfaces: list[str], poll_s: float = POLL_S) -> None:
        self.name, self.interfaces, self.poll_s = name, list(interfaces), poll_s
        self.kicks = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> LinkKick:
        if self._thread is None and self.interfaces:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name=f"{self.name}-link-kick", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None

    def _run(self) -> None:
        was_up = {i: operstate(i) == "up" for i in self.interfaces}
        while not self._stop.wait(self.poll_s):
            for iface in self.interfaces:
                up = operstate(iface) == "up"
                if up and not was_up[iface]:
                    try:
                        if kick(iface):
                            self.kicks += 1
                            log.info("%s: %s is up again; sent it a frame to wake BMv2", self.name, iface)
                    except Exception as err:  # a watcher must never take the switch down
                        log.warning("%s: kicking %s failed: %s", self.name, iface, err)
                was_up[iface] = up
