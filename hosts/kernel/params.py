"""The parameter map's value: ``struct mltcp_params`` of ``bpf/mltcp.h``, encoded from
:class:`MltcpParams` and :class:`IterationDetection` — the one definition of F and of iteration
detection — in the fixed point the BPF code computes with.

F itself travels as a table: :func:`f_table` samples :func:`mlfc.policy.mltcp.mltcp_factor` at
``F_KNOTS + 1`` evenly spaced bytes_ratio knots, and the BPF code (``mltcp_f_fp``) interpolates linearly
between the two knots around a connection's ratio. Every shape runs in the kernel that way, from the
same Python function the user-space transport calls. :func:`table_f_fp` is the interpolation in Python,
bit for bit, so a test can hold the kernel's F against it exactly. What the table changes, by shape:

* ``linear``: nothing but rounding (the line through the knots is the line);
* ``power``, ``sigmoid``: the chord between knots instead of the curve (largest for a power with a small
  exponent, in the first interval: 0.03 x slope for exponent 0.5 at ratio 1/256);
* ``step``: a ramp over the 1/F_KNOTS of the iteration just before the first knot at or past the knee
  (knee 0.2: F rises from intercept at ratio 12/64 = 0.1875 to intercept + slope at 13/64 = 0.203).

The kernel changes only the additive increase (the paper's rule ``increase``); :func:`encode` refuses
the ``bounded`` rules, which the user-space controllers implement. ``IterationDetection.group`` (job
grouping: one bytes_ratio per job) travels as the last word, ``group``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from mlfc.hosts.kernel import KernelMltcpError
from mlfc.policy.mltcp import SHAPES, IterationDetection, MltcpParams, format_params, mltcp_factor

FP_SHIFT = 16  # MLTCP_FP_SHIFT in bpf/mltcp.h
FP_ONE = 1 << FP_SHIFT
PARAMS_VERSION = 3  # MLTCP_PARAMS_VERSION in bpf/mltcp.h
F_KNOTS_SHIFT = 6  # MLTCP_F_KNOTS_SHIFT
F_KNOTS = 1 << F_KNOTS_SHIFT  # MLTCP_F_KNOTS: the table holds F at bytes_ratio i / F_KNOTS, i = 0..F_KNOTS
# version, ready, idle_rtts_fp, idle_min_us, ewma_fp, shape; slope, intercept, exponent, knee (doubles,
# for user space only); f_fp[F_KNOTS + 1]; group
HEAD = struct.Struct("<6I4d")
LAYOUT = struct.Struct(f"<6I4d{F_KNOTS + 1}II")
U32_MAX = 0xFFFFFFFF


def to_fp(name: str, value: float) -> int:
    fp = round(value * FP_ONE)
    if not 0 <= fp <= U32_MAX:
        raise KernelMltcpError(f"{name}={value} does not fit the kernel's fixed point (0 .. {U32_MAX / FP_ONE:.0f})")
    return fp


def from_fp(fp: int) -> float:
    return fp / FP_ONE


def f_table(params: MltcpParams) -> list[int]:
    """F at bytes_ratio i / F_KNOTS, i = 0..F_KNOTS, in fixed point: what the kernel interpolates."""
    out = []
    for i in range(F_KNOTS + 1):
        f = mltcp_factor(i / F_KNOTS, params)
        fp = round(f * FP_ONE)
        if not 0 <= fp <= U32_MAX:
            raise KernelMltcpError(
                f"F {format_params(params)} reaches {f:g} at bytes_ratio {i / F_KNOTS:g}: above the kernel's fixed "
                f"point (slope + intercept <= {U32_MAX / FP_ONE:.0f})"
            )
        out.append(fp)
    return out


def table_f_fp(table: list[int] | tuple[int, ...], ratio_fp: int) -> int:
    """``mltcp_f_fp`` of bpf/mltcp.h in Python, bit for bit: F in fixed point at ``ratio_fp``."""
    if ratio_fp >= FP_ONE:
        f = table[F_KNOTS]
    else:
        pos = ratio_fp << F_KNOTS_SHIFT
        i = (pos >> FP_SHIFT) & (F_KNOTS - 1)
        frac = pos & (FP_ONE - 1)
        lo, hi = table[i], table[i + 1]
        f = lo + (((hi - lo) * frac) >> FP_SHIFT) if hi >= lo else lo - (((lo - hi) * frac) >> FP_SHIFT)
    return f or 1


def encode(params: MltcpParams, detection: IterationDetection, *, ready: bool = True) -> bytes:
    if params.rule != "increase":
        raise KernelMltcpError(
            f"kernel MLTCP scales only the additive increase (rule 'increase'); {format_params(params)} has rule "
            f"{params.rule!r}, which only mlfc's user-space controllers implement"
        )
    idle_min_us = round(detection.idle_min * 1e6)
    return LAYOUT.pack(
        PARAMS_VERSION,
        1 if ready else 0,
        to_fp("idle_rtts", detection.idle_rtts),
        idle_min_us,
        to_fp("ewma_weight", detection.ewma_weight),
        SHAPES.index(params.shape),
        params.slope,
        params.intercept,
        params.exponent,
        params.knee,
        *f_table(params),
        1 if detection.group else 0,
    )


@dataclass(frozen=True)
class KernelParams:
    """What a parameter map holds, decoded."""

    version: int
    ready: bool
    # None when the map holds no valid values (not ready, zeroed, or another version's layout)
    params: MltcpParams | None
    detection: IterationDetection | None
    table: tuple[int, ...] = ()  # F at the knots, fixed point


def decode(raw: bytes) -> KernelParams:
    version, ready = struct.unpack_from("<2I", raw) if len(raw) >= 8 else (0, 0)
    if version != PARAMS_VERSION or len(raw) < LAYOUT.size:
        return KernelParams(version, bool(ready), None, None)
    _, _, idle_rtts, idle_min_us, ewma, shape, slope, intercept, exponent, knee, *table, group = LAYOUT.unpack(
        raw[: LAYOUT.size]
    )
    try:
        params = MltcpParams(slope, intercept, SHAPES[shape], exponent=exponent, knee=knee)
        detection = IterationDetection(from_fp(idle_rtts), idle_min_us / 1e6, from_fp(ewma), group=bool(group))
    except (ValueError, IndexError):  # PolicyError: e.g. the zeroed map of an instance whose loader never filled it
        params, detection = None, None
    return KernelParams(version, bool(ready), params, detection, tuple(table))
