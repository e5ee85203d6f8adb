"""Fixtures for the controller tests: real simple_switch_grpc processes, always killed at teardown."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # controller_helpers, table_model

from mlfc.controller.bmv2 import Bmv2Process


@pytest.fixture
def bmv2_factory(tmp_path: Path) -> Iterator[Callable[..., Bmv2Process]]:
    """``bmv2_factory(device_id=1, interfaces={1: "veth0"})`` starts a switch; all are killed after the test."""
    started: list[Bmv2Process] = []

    def start(device_id: int = 1, **kwargs) -> Bmv2Process:
        sw = Bmv2Process(device_id=device_id, log_dir=tmp_path, **kwargs)
        started.append(sw)
        return sw.start()

    yield start
    for sw in started:
        sw.stop()
