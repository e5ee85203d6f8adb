"""The Tofino pipeline's artifacts (bf-p4c's outputs) and the ``p4_device_config`` bytes the Tofino
P4Runtime servers expect (docs/tofino.md):

* ``stratum-bfrt`` — Stratum's BfRt node: a serialized ``stratum.hal.barefoot.BfPipelineConfig``
  protobuf (stratum/hal/lib/barefoot/bf.proto): ``p4_name`` (1), ``bfruntime_info`` = bfrt.json (2),
  ``profiles`` (3) of ``{profile_name (1), context (2) = context.json, binary (3) = tofino.bin,
  pipe_scope (4)}``; an empty ``pipe_scope`` loads the profile on every pipe.
* ``pi`` — PI-based servers (``bf_switchd --p4rt-server``, Stratum's legacy PI node): the program
  name, tofino.bin and context.json, each preceded by its length as a little-endian uint32. That
  format carries no bfrt.json.

The message is encoded here by hand (four fields) rather than from a generated module, so mlfc needs
no Stratum protos; tests decode it with a descriptor built from bf.proto's field numbers.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from mlfc import contract

FORMATS = ("stratum-bfrt", "pi")
DEFAULT_FORMAT = "stratum-bfrt"
PIPE = "pipe"  # the Pipeline instance name in p4src/tna/mlfc.p4: bf-p4c's profile folder


@dataclass(frozen=True, slots=True)
class TofinoArtifacts:
    p4info: Path = contract.TOFINO_P4INFO
    bfrt: Path = contract.TOFINO_BFRT
    context: Path = contract.TOFINO_CONTEXT
    binary: Path = contract.TOFINO_BINARY
    device_config_format: str = DEFAULT_FORMAT
    program: str = contract.PKG_NAME

    def missing(self) -> list[str]:
        """The artifacts the chosen format needs that are not on disk."""
        needed = [self.p4info, self.context, self.binary] + ([self.bfrt] if self.device_config_format != "pi" else [])
        return [str(p) for p in needed if not p.is_file()]

    def device_config(self) -> bytes:
        if self.device_config_format == "pi":
            return pack_pi(self.program, self.binary.read_bytes(), self.context.read_bytes())
        if self.device_config_format == "stratum-bfrt":
            return pack_stratum_bfrt(self.program, self.bfrt.read_bytes(), self.context.read_bytes(),
                                     self.binary.read_bytes())  # fmt: skip
        raise ValueError(f"device_config_format {self.device_config_format!r} is not one of {', '.join(FORMATS)}")


def pack_pi(program: str, binary: bytes, context: bytes) -> bytes:
    out = b""
    for part in (program.encode(), binary, context):
        out += struct.pack("<I", len(part)) + part
    return out


def pack_stratum_bfrt(
    program: str, bfrt: bytes, context: bytes, binary: bytes, profile: str = PIPE, pipe_scope: tuple[int, ...] = ()
) -> bytes:
    prof = _bytes_field(1, profile.encode()) + _bytes_field(2, context) + _bytes_field(3, binary)
    if pipe_scope:
        prof += _bytes_field(4, b"".join(_varint(p) for p in pipe_scope))  # packed repeated uint32
    return _bytes_field(1, program.encode()) + _bytes_field(2, bfrt) + _bytes_field(3, prof)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _bytes_field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload
