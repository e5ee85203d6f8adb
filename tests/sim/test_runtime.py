"""Without ns-3 the simulator says why and how to install it, without importing anything heavy."""

from __future__ import annotations

import importlib.util

import pytest

from mlfc.sim import runtime


def test_missing_ns3_names_the_install_step(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ns3" else real(name, *a))
    reason = runtime.missing()
    assert reason is not None and "make install-sim" in reason and runtime.NS3_REQUIREMENT in reason
    if runtime._loaded is None:  # load() refuses with the same reason (unless a test already loaded ns-3)
        with pytest.raises(RuntimeError, match="make install-sim"):
            runtime.load()


def test_cli_refuses_unknown_experiments(capsys: pytest.CaptureFixture[str]) -> None:
    from mlfc.sim.cli import main

    assert main(["nonsense"]) == 2
    assert "unknown experiment" in capsys.readouterr().err
