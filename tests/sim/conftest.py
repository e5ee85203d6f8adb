"""One ns-3 session for every simulator test: loading ns-3 and JIT-compiling mlfc's C++ costs
10-40 s, paid once."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from mlfc.sim import runtime


@pytest.fixture(scope="session")
def sim_env() -> SimpleNamespace:
    reason = runtime.missing()
    if reason:
        pytest.skip(f"[ns3] {reason}")
    return runtime.load()
