"""Congestion controllers (Reno, CUBIC, DCQCN, DCTCP), each with the optional MLTCP augmentation."""

from __future__ import annotations

from mlfc.hosts.cc.base import CongestionControl, Mltcp, RatioSource
from mlfc.hosts.cc.cubic import Cubic, CubicParams
from mlfc.hosts.cc.dcqcn import Dcqcn, DcqcnParams
from mlfc.hosts.cc.dctcp import Dctcp, DctcpParams
from mlfc.hosts.cc.reno import Reno, RenoParams

ALGORITHMS = ("reno", "cubic", "dcqcn", "dctcp")


def make_cc(
    name: str, mss: int, mltcp: Mltcp | None = None, *, line_rate: float | None = None, now: float = 0.0
) -> CongestionControl:
    """A controller by name with its default parameters (``line_rate`` in bits/s is for DCQCN)."""
    if name == "reno":
        return Reno(mss, mltcp)
    if name == "cubic":
        return Cubic(mss, mltcp)
    if name == "dcqcn":
        params = DcqcnParams() if line_rate is None else DcqcnParams(line_rate=line_rate)
        return Dcqcn(mss, mltcp, params, now=now)
    if name == "dctcp":
        return Dctcp(mss, mltcp)
    raise ValueError(f"unknown congestion control {name!r}; choose one of {', '.join(ALGORITHMS)}")


__all__ = [
    "ALGORITHMS",
    "CongestionControl",
    "Cubic",
    "CubicParams",
    "Dcqcn",
    "DcqcnParams",
    "Dctcp",
    "DctcpParams",
    "Mltcp",
    "RatioSource",
    "Reno",
    "RenoParams",
    "make_cc",
]
