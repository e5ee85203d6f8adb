"""The parameter map's value: ``struct mltcp_params`` of ``bpf/mltcp.h`` (8 little-endian u32),
encoded from :class:`MltcpParams` and :class:`IterationDetection` — the one definition of F and of
iteration detection — in the same fixed point the BPF code computes with."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from mlfc.hosts.kernel import KernelMltcpError
from mlfc.policy.mltcp import IterationDetection, MltcpParams, format_params

FP_SHIFT = 16  # MLTCP_FP_SHIFT in bpf/mltcp.h
FP_ONE = 1 << FP_SHIFT
PARAMS_VERSION = 1  # MLTCP_PARAMS_VERSION in bpf/mltcp.h
LAYOUT = struct.Struct("<8I")  # version, ready, slope, intercept, idle_rtts, idle_min_us, ewma, pad
U32_MAX = 0xFFFFFFFF


def to_fp(name: str, value: float) -> int:
    fp = round(value * FP_ONE)
    if not 0 <= fp <= U32_MAX:
        raise KernelMltcpError(f"{name}={value} does not fit the kernel's fixed point (0 .. {U32_MAX / FP_ONE:.0f})")
    return fp


def from_fp(fp: int) -> float:
    return fp / FP_ONE


def encode(params: MltcpParams, detection: IterationDetection, *, ready: bool = True) -> bytes:
    if not params.linear:  # the eBPF programs compute slope * ratio + intercept
        raise KernelMltcpError(f"kernel MLTCP has a linear F (slope, intercept), not {format_params(params)}")
    idle_min_us = round(detection.idle_min * 1e6)
    return LAYOUT.pack(
        PARAMS_VERSION,
        1 if ready else 0,
        to_fp("slope", params.slope),
        to_fp("intercept", params.intercept),
        to_fp("idle_rtts", detection.idle_rtts),
        idle_min_us,
        to_fp("ewma_weight", detection.ewma_weight),
        0,
    )


@dataclass(frozen=True)
class KernelParams:
    """What a parameter map holds, decoded."""

    version: int
    ready: bool
    params: MltcpParams | None  # None when the map holds no valid values (not ready, zero intercept)
    detection: IterationDetection | None


def decode(raw: bytes) -> KernelParams:
    version, ready, slope, intercept, idle_rtts, idle_min_us, ewma, _ = LAYOUT.unpack(raw[: LAYOUT.size])
    try:
        params = MltcpParams(from_fp(slope), from_fp(intercept))
        detection = IterationDetection(from_fp(idle_rtts), idle_min_us / 1e6, from_fp(ewma))
    except ValueError:  # PolicyError: e.g. the zeroed map of an instance whose loader never filled it
        params, detection = None, None
    return KernelParams(version, bool(ready), params, detection)
