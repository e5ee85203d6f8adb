"""Parsing and deparsing of the headers mlfc.p4 knows (Ethernet, IPv4, TCP, UDP, shim).

The parser follows MlfcParser state by state: it works on the frame's bytes (not on IPv4/UDP length
fields), L4 is parsed only for option-less IPv4 at fragment offset 0, and a packet addressed to a shim
port is decoded by ``mlfc.wire.unpack_shim`` (the single definition of the shim). Headers are
contiguous and the switch only rewrites fields in place, so deparsing is an in-place edit of the frame.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from mlfc.wire import SHIM_LEN, Shim, ShimError, TruncatedShim, is_shim_port, unpack_shim

ETH_LEN = 14
IPV4_LEN = 20
TCP_LEN = 20
UDP_LEN = 8
ETHERTYPE_IPV4 = 0x0800
PROTO_TCP = 6
PROTO_UDP = 17

IP_OFF = ETH_LEN
L4_OFF = ETH_LEN + IPV4_LEN
SHIM_OFF = L4_OFF + UDP_LEN

# shim_status values (p4src/shared/define.p4)
SHIM_NONE = 0
SHIM_OK = 1
SHIM_BAD_HEADER = 2
SHIM_TRUNCATED = 3

_IPV4 = struct.Struct("!BBHHHBBH4s4s")
_PORTS = struct.Struct("!HH")


@dataclass(slots=True)
class Parsed:
    """What the parser extracted. Fields of invalid headers are 0."""

    frame: bytes
    ipv4_valid: bool = False
    ihl: int = 0
    dscp_ecn: int = 0
    ttl: int = 0
    protocol: int = 0
    src_addr: int = 0
    dst_addr: int = 0
    l4_src_port: int = 0
    l4_dst_port: int = 0
    shim_status: int = SHIM_NONE
    shim: Shim | None = None

    @property
    def ecn(self) -> int:
        return self.dscp_ecn & 3


def parse(frame: bytes) -> Parsed:
    p = Parsed(frame)
    n = len(frame)
    if n < ETH_LEN or frame[12] != 0x08 or frame[13] != 0x00:
        return p  # short frame (parser error) or not IPv4: ethernet only
    if n < L4_OFF:
        return p  # PacketTooShort extracting ipv4: ipv4 stays invalid
    ver_ihl, tos, _tlen, _ident, flags_frag, ttl, proto, _csum, src, dst = _IPV4.unpack_from(frame, IP_OFF)
    p.ipv4_valid = True
    p.ihl = ver_ihl & 0x0F
    p.dscp_ecn = tos
    p.ttl = ttl
    p.protocol = proto
    p.src_addr = int.from_bytes(src, "big")
    p.dst_addr = int.from_bytes(dst, "big")
    if p.ihl != 5 or flags_frag & 0x1FFF:
        return p
    if proto == PROTO_TCP:
        if n >= L4_OFF + TCP_LEN:
            p.l4_src_port, p.l4_dst_port = _PORTS.unpack_from(frame, L4_OFF)
        return p
    if proto != PROTO_UDP or n < L4_OFF + UDP_LEN:
        return p
    p.l4_src_port, p.l4_dst_port = _PORTS.unpack_from(frame, L4_OFF)
    if is_shim_port(p.l4_dst_port):
        try:
            p.shim = unpack_shim(memoryview(frame)[SHIM_OFF:SHIM_OFF + SHIM_LEN])
            p.shim_status = SHIM_OK
        except TruncatedShim:
            p.shim_status = SHIM_TRUNCATED
        except ShimError:
            p.shim_status = SHIM_BAD_HEADER
    return p


def ipv4_header_len(p: Parsed) -> int:
    """Bytes the IPv4 checksum covers: the whole header with its options (RFC 791)."""
    hlen = p.ihl * 4
    if hlen < IPV4_LEN or IP_OFF + hlen > len(p.frame):
        return IPV4_LEN
    return hlen


def ones_complement_sum(data: bytes | bytearray | memoryview) -> int:
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def ipv4_checksum_ok(p: Parsed) -> bool:
    hdr = memoryview(p.frame)[IP_OFF:IP_OFF + ipv4_header_len(p)]
    return ones_complement_sum(hdr) == 0xFFFF


def rewrite(p: Parsed, src_mac: int, dst_mac: int, ttl: int, dscp_ecn: int) -> bytes:
    """The deparsed frame: MACs, TTL and TOS replaced, IPv4 checksum recomputed, the rest unchanged."""
    out = bytearray(p.frame)
    out[0:6] = dst_mac.to_bytes(6, "big")
    out[6:12] = src_mac.to_bytes(6, "big")
    out[IP_OFF + 1] = dscp_ecn
    out[IP_OFF + 8] = ttl
    out[IP_OFF + 10:IP_OFF + 12] = b"\x00\x00"
    csum = 0xFFFF ^ ones_complement_sum(memoryview(out)[IP_OFF:IP_OFF + ipv4_header_len(p)])
    out[IP_OFF + 10:IP_OFF + 12] = csum.to_bytes(2, "big")
    return bytes(out)
