"""Parsing and deparsing of the headers mlfc.p4 knows (Ethernet, IPv4, TCP, UDP, shim).

The parser follows MlfcParser state by state: it extracts from the frame's bytes (a header cut short by
the end of the frame is a parser error), L4 is parsed only for option-less IPv4 at fragment offset 0,
and a packet addressed to a shim port is checked like check_shim (first byte, then the 20 bytes) and
decoded by ``mlfc.wire.unpack_shim`` (the single definition of the shim). The Classifier's truncation
verdict (parser error, or UDP length < 28) is ``shim_verdict``. Headers are contiguous and the switch
only rewrites fields in place, so deparsing is an in-place edit of the frame (``write_telemetry`` for the
shim's queue telemetry, with the UDP checksum's incremental update).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from mlfc import contract
from mlfc.wire import SHIM, SHIM_LEN, SHIM_VERSION, MsgType, Shim, is_shim_port, unpack_shim

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
UDP_SHIM_MIN_LEN = UDP_LEN + SHIM_LEN  # define.p4: a shorter UDP datagram is a truncated shim
# check_shim's select on the first byte: v1 DATA/ACK/CNP go on to extract the shim, anything else is bad.
_SHIM_FIRST_BYTES = frozenset((SHIM_VERSION << 4) | t for t in (MsgType.DATA, MsgType.ACK, MsgType.CNP))


# The shim's telemetry: the byte of rate_class and the 4 bytes of queue_bytes, at their offsets in the shim
# (from the field table); the 16-bit words holding them are what the UDP checksum update covers.
RATE_CLASS_OFF = SHIM_OFF + SHIM.byte_offset("rate_class")
QUEUE_BYTES_OFF = SHIM_OFF + SHIM.byte_offset("queue_bytes")
UDP_CHECKSUM_OFF = L4_OFF + 6

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
    udp_valid: bool = False
    udp_len: int = 0  # hdr.udp.len
    too_short: bool = False  # the parser stopped with PacketTooShort
    shim_status: int = contract.SHIM_NONE
    shim: Shim | None = None

    @property
    def ecn(self) -> int:
        return self.dscp_ecn & 3


def parse(frame: bytes) -> Parsed:
    """MlfcParser: headers and shim_status as the parser leaves them (before the Classifier's verdict)."""
    p = Parsed(frame)
    n = len(frame)
    if n < ETH_LEN:
        p.too_short = True
        return p
    if frame[12] != 0x08 or frame[13] != 0x00:
        return p  # not IPv4: ethernet only
    if n < L4_OFF:
        p.too_short = True  # extracting ipv4: ipv4 stays invalid
        return p
    ver_ihl, tos, _tlen, _ident, flags_frag, ttl, proto, _csum, src, dst = _IPV4.unpack_from(frame, IP_OFF)
    p.ipv4_valid = True
    p.ihl = ver_ihl & 0x0F
    p.dscp_ecn = tos
    p.ttl = ttl
    p.protocol = proto
    p.src_addr = int.from_bytes(src, "big")
    p.dst_addr = int.from_bytes(dst, "big")
    if p.ihl != 5 or flags_frag & 0x1FFF or proto not in (PROTO_TCP, PROTO_UDP):
        return p
    if n < L4_OFF + (TCP_LEN if proto == PROTO_TCP else UDP_LEN):
        p.too_short = True  # the L4 header stays invalid, the ports 0
        return p
    p.l4_src_port, p.l4_dst_port = _PORTS.unpack_from(frame, L4_OFF)
    if proto == PROTO_TCP:
        return p
    p.udp_valid = True
    p.udp_len = int.from_bytes(frame[L4_OFF + 4 : L4_OFF + 6], "big")
    if is_shim_port(p.l4_dst_port):
        # check_shim: lookahead on the first byte, then extract the shim; a bad first byte stops there.
        if n <= SHIM_OFF:
            p.too_short = True
            p.shim_status = contract.SHIM_TRUNCATED
        elif frame[SHIM_OFF] not in _SHIM_FIRST_BYTES:
            p.shim_status = contract.SHIM_BAD_HEADER
        elif n < SHIM_OFF + SHIM_LEN:
            p.too_short = True
            p.shim_status = contract.SHIM_TRUNCATED
        else:
            p.shim = unpack_shim(memoryview(frame)[SHIM_OFF : SHIM_OFF + SHIM_LEN])
            p.shim_status = contract.SHIM_OK
    return p


def shim_verdict(p: Parsed) -> int:
    """The Classifier's shim_status: a shim-port UDP datagram is truncated when the parser ran out of
    bytes or its UDP length leaves fewer than SHIM_LEN bytes for the shim (judged by the length field, so a
    short frame padded to 60 bytes is still truncated); truncation wins over a bad version or type."""
    if p.udp_valid and is_shim_port(p.l4_dst_port) and (p.too_short or p.udp_len < UDP_SHIM_MIN_LEN):
        return contract.SHIM_TRUNCATED
    return p.shim_status


def ones_complement_sum(data: bytes | bytearray | memoryview) -> int:
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def ipv4_checksum_ok(p: Parsed) -> bool:
    """MlfcVerifyChecksum: csum16 over the 20-byte base header (options are not covered)."""
    return ones_complement_sum(memoryview(p.frame)[IP_OFF:L4_OFF]) == 0xFFFF


def rewrite(p: Parsed, src_mac: int, dst_mac: int, ttl: int, dscp_ecn: int) -> bytes:
    """The deparsed frame: MACs, TTL and TOS replaced, IPv4 checksum recomputed over the 20-byte base
    header (MlfcComputeChecksum), the rest unchanged."""
    out = bytearray(p.frame)
    out[0:6] = dst_mac.to_bytes(6, "big")
    out[6:12] = src_mac.to_bytes(6, "big")
    out[IP_OFF + 1] = dscp_ecn
    out[IP_OFF + 8] = ttl
    out[IP_OFF + 10 : IP_OFF + 12] = b"\x00\x00"
    csum = 0xFFFF ^ ones_complement_sum(memoryview(out)[IP_OFF:L4_OFF])
    out[IP_OFF + 10 : IP_OFF + 12] = csum.to_bytes(2, "big")
    return bytes(out)


def _words(data: bytes | bytearray, start: int, end: int) -> list[int]:
    """The 16-bit words (UDP's checksum words: even offsets from the UDP header) covering [start, end)."""
    lo, hi = start - (start - L4_OFF) % 2, end + (end - L4_OFF) % 2
    return list(struct.unpack(f"!{(hi - lo) // 2}H", data[lo:hi]))


def write_telemetry(out: bytearray, rate_class: int, queue_bytes: int) -> None:
    """Telemetry's deparse: the shim's rate_class and queue_bytes replaced in ``out`` (a parsed shim's frame)
    and a non-zero UDP checksum updated incrementally over the words that changed (RFC 1624: HC' = HC + m - m'
    in ones' complement), in the P4 program's two csum16 steps over plain words: partial = ~(HC + m), then
    HC' = ~(partial + m'); 0 (no checksum, IPv4) stays 0. Like the switches' checksum units, a result of 0 is
    written as 0, not RFC 768's 0xFFFF: one datagram in 65,536 goes on without a checksum, which receivers
    accept."""
    spans = ((RATE_CLASS_OFF, RATE_CLASS_OFF + 1), (QUEUE_BYTES_OFF, QUEUE_BYTES_OFF + 4))
    old = [w for s, e in spans for w in _words(out, s, e)]
    out[RATE_CLASS_OFF] = rate_class
    out[QUEUE_BYTES_OFF : QUEUE_BYTES_OFF + 4] = queue_bytes.to_bytes(4, "big")
    checksum = int.from_bytes(out[UDP_CHECKSUM_OFF : UDP_CHECKSUM_OFF + 2], "big")
    if checksum == 0:
        return
    new = [w for s, e in spans for w in _words(out, s, e)]
    partial = _csum16([checksum, *old])
    checksum = _csum16([partial, *new])
    out[UDP_CHECKSUM_OFF : UDP_CHECKSUM_OFF + 2] = checksum.to_bytes(2, "big")


def _csum16(words: list[int]) -> int:
    """csum16 of 16-bit words, as a switch's checksum unit computes it: the complement of their ones'
    complement sum (0xFFFF for words that are all 0)."""
    return 0xFFFF ^ ones_complement_sum(struct.pack(f"!{len(words)}H", *words))
