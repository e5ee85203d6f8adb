"""Waiting for a state instead of sleeping for a time: tests assert what they waited for."""

from __future__ import annotations

import time
from collections.abc import Callable


def eventually(check: Callable[[], object], timeout_s: float = 15.0, what: str = "", step_s: float = 0.02) -> None:
    """Return once ``check()`` is true; AssertionError naming ``what`` if it is not within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what or check}")
        time.sleep(step_s)
