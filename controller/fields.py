"""Field parsers for the deployment file and intents: each error names the field (``switches[1].port``)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from typing import Any, TypeVar

from mlfc.controller.errors import ValidationError, join
from mlfc.policy.priority import PolicyError

_T = TypeVar("_T")


def parse_prefix(value: Any, path: str) -> ipaddress.IPv4Network:
    """An IPv4 address or prefix; host bits must be zero (``10.0.1.5/24`` is a typo, not a route)."""
    if not isinstance(value, str) or not value:
        raise ValidationError(path, f"expected an IPv4 prefix like 10.0.1.0/24, got {value!r}")
    try:
        return ipaddress.IPv4Network(value, strict=True)
    except ValueError as exc:
        raise ValidationError(path, f"{value!r} is not an IPv4 prefix: {exc}") from None


def parse_mac(value: Any, path: str) -> int:
    if isinstance(value, str) and re.fullmatch(r"([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}", value):
        return int(value.replace(":", "").replace("-", ""), 16)
    raise ValidationError(path, f"expected a MAC address like 00:00:00:00:00:01, got {value!r}")


def as_address(value: Any, path: str, allow_port_zero: bool = False) -> str:
    if not isinstance(value, str):
        raise ValidationError(path, f"expected host:port, got {value!r}")
    m = re.fullmatch(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})", value)
    lowest = 0 if allow_port_zero else 1
    if not m or not lowest <= int(m.group(2)) <= 65535:
        raise ValidationError(path, f"expected host:port, got {value!r}")
    return value


def as_mapping(value: Any, path: str, allowed: set[str]) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValidationError(path or "(document)", f"expected a mapping, got {type(value).__name__}")
    unknown = sorted(str(k) for k in value if k not in allowed)
    if unknown:
        raise ValidationError(join(path, unknown[0]), f"unknown field (expected one of {', '.join(sorted(allowed))})")
    return value


def as_list(value: Any, path: str, min_len: int = 0) -> list[Any]:
    if value is None:
        value = []
    if not isinstance(value, list):
        raise ValidationError(path, f"expected a list, got {type(value).__name__}")
    if len(value) < min_len:
        raise ValidationError(path, f"needs at least {min_len} item(s)")
    return value


def as_str(value: Any, path: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValidationError(path, f"expected a non-empty string, got {value!r}")
    return value


def as_int(value: Any, path: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(path, f"expected an integer, got {value!r}")
    if not lo <= value <= hi:
        raise ValidationError(path, f"{value} out of range {lo}..{hi}")
    return value


def as_float(value: Any, path: str, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(path, f"expected a number, got {value!r}")
    if not lo <= value <= hi:
        raise ValidationError(path, f"{value} out of range {lo}..{hi}")
    return float(value)


def as_bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(path, f"expected true or false, got {value!r}")
    return value


def check_unique(items: Any, path: str, key: Callable[[Any], Any], what: str) -> None:
    """Items whose key is None are not compared."""
    seen: dict[Any, int] = {}
    for i, item in enumerate(items):
        k = key(item)
        if k is None:
            continue
        if k in seen:
            raise ValidationError(join(join(path, i), what), f"duplicate of {join(path, seen[k])}.{what} ({k})")
        seen[k] = i


def as_policy(build: Callable[[], _T], path: str) -> _T:
    """A policy object ``build`` makes: its own check (PolicyError) or a wrong keyword (TypeError) named at
    ``path``."""
    try:
        return build()
    except PolicyError as exc:
        raise ValidationError(path, str(exc)) from None
    except TypeError as exc:
        raise ValidationError(path, str(exc)) from None
