"""The switch-test setup's hosts and the packets they send, shared by the PTF tests (ptf-tests/) and
the reference switch's tests (tests/refswitch/): host ``n`` sits behind switch port ``n``."""

from __future__ import annotations

from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether

from mlfc.wire import SHIM_PORT_BASE, SHIM_VERSION, MlfcShim, MsgType

PORTS = (0, 1, 2)
HOST_MAC = {0: "00:00:00:00:00:10", 1: "00:00:00:00:00:11", 2: "00:00:00:00:00:12"}
HOST_IP = {0: "10.0.0.10", 1: "10.0.0.11", 2: "10.0.0.12"}
SWITCH_MAC = "00:aa:bb:00:00:01"


def shim_packet(
    src: int = 0,
    dst: int = 1,
    *,
    job: int = 1,
    iteration: int = 0,
    importance: int = 0,
    progress: int = 0,
    msg_type: int = MsgType.DATA,
    seq: int = 0,
    ecn: int = 2,
    version: int = SHIM_VERSION,
    payload: bytes = b"",
    size: int = 200,
    udp_dport: int = SHIM_PORT_BASE + 1,
    udp_checksum: bool = False,
    rate_class: int = 0,
    queue_bytes: int = 0,
) -> Ether:
    """A tagged packet from host ``src`` to host ``dst``, as that host would send it (ECT(0) by default; no
    UDP checksum unless ``udp_checksum``). ``rate_class``/``queue_bytes``: telemetry already on board, as
    an earlier hop would have left it."""
    pkt = (
        Ether(src=HOST_MAC[src], dst=SWITCH_MAC)
        / IP(src=HOST_IP[src], dst=HOST_IP[dst], ttl=64, tos=ecn)
        / UDP(sport=SHIM_PORT_BASE + 2, dport=udp_dport, chksum=None if udp_checksum else 0)
        / MlfcShim(
            version=version,
            msg_type=msg_type,
            job_id=job,
            iteration=iteration,
            importance=importance,
            progress=progress,
            chunk_seq=seq,
            rate_class=rate_class,
            queue_bytes=queue_bytes,
        )
        / payload
    )
    pad = size - len(pkt)
    return pkt / (b"\x00" * pad) if pad > 0 else pkt


def tcp_packet(src: int, dst: int, sport: int, dport: int, size: int = 200, ecn: int = 0) -> Ether:
    """An untagged TCP segment (classified by 5-tuple, if at all)."""
    pkt = (
        Ether(src=HOST_MAC[src], dst=SWITCH_MAC)
        / IP(src=HOST_IP[src], dst=HOST_IP[dst], ttl=64, tos=ecn)
        / TCP(sport=sport, dport=dport, flags="A")
    )
    return pkt / (b"\x00" * max(0, size - len(pkt)))


def truncated_shim(src: int, dst: int, length: int, first: int = SHIM_VERSION << 4) -> Ether:
    """A UDP packet to the shim port range carrying only ``length`` (< SHIM_LEN) bytes of shim (by default
    a DATA shim of this version's first byte)."""
    return (
        Ether(src=HOST_MAC[src], dst=SWITCH_MAC)
        / IP(src=HOST_IP[src], dst=HOST_IP[dst])
        / UDP(sport=1000, dport=SHIM_PORT_BASE + 3, chksum=0)
        / (bytes([first]) + b"\x10" * (length - 1) if length else b"")
    )


def forwarded(pkt: Ether, out_port: int, *, ce: bool = False, telemetry: tuple[int, int] | None = None) -> Ether:
    """What the switch emits for ``pkt`` routed to host ``out_port``: MACs rewritten, TTL - 1,
    optionally CE-marked, checksum recomputed (by scapy). ``telemetry``: the (rate_class, queue_bytes) the
    switch writes into a DATA shim, the UDP checksum recomputed if there was one (None: the shim as sent)."""
    out = pkt.copy()
    out[Ether].src = SWITCH_MAC
    out[Ether].dst = HOST_MAC[out_port]
    out[IP].ttl -= 1
    if ce:
        out[IP].tos = (out[IP].tos & 0xFC) | 3
    del out[IP].chksum
    if telemetry is not None:
        out[MlfcShim].rate_class, out[MlfcShim].queue_bytes = telemetry
        if out[UDP].chksum:
            del out[UDP].chksum
    return Ether(bytes(out))
