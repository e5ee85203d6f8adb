"""Fixtures for the controller tests: real switch processes (simple_switch_grpc, mlfc-refswitch), always
killed at teardown."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # controller_helpers, table_model

from typing import Any

from controller_helpers import daemon_config

from mlfc.launch.daemons import ControllerProcess
from mlfc.launch.switches import SWITCHES, Bmv2Switch, SwitchProcess


@pytest.fixture
def bmv2_factory(tmp_path: Path) -> Iterator[Callable[..., Bmv2Switch]]:
    """``bmv2_factory(device_id=1, ports={1: "veth0"})`` starts a switch; all are killed after the test."""
    started: list[Bmv2Switch] = []

    def start(device_id: int = 1, **kwargs) -> Bmv2Switch:
        sw = Bmv2Switch(f"s{device_id}", device_id, log_file=tmp_path / f"bmv2-{device_id}.log", **kwargs)
        started.append(sw)
        return sw.start()

    yield start
    for sw in started:
        sw.kill()


@pytest.fixture(
    params=[
        pytest.param("bmv2", marks=pytest.mark.bmv2, id="bmv2"),
        pytest.param("ref", id="ref"),
    ]
)
def switch_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., SwitchProcess]]:
    """Each test using it runs twice, against BMv2 (``[bmv2]``, skipped where BMv2 is absent) and against
    mlfc's reference switch (``[ref]``). ``switch_factory(device_id=1, ports={1: "veth0"})`` starts a
    switch (``sw.target`` is its deployment ``target``); all are killed after the test."""
    cls = SWITCHES[request.param]
    started: list[SwitchProcess] = []

    def start(device_id: int = 1, **kwargs) -> SwitchProcess:
        sw = cls(f"s{device_id}", device_id, log_file=tmp_path / f"{request.param}-{device_id}.log", **kwargs)
        started.append(sw)
        return sw.start()

    yield start
    for sw in started:
        sw.kill()


@pytest.fixture
def controller_factory(tmp_path: Path) -> Iterator[Callable[..., ControllerProcess]]:
    started: list[ControllerProcess] = []

    def start(switches: list[SwitchProcess], **controller: Any) -> ControllerProcess:
        ctl = ControllerProcess(daemon_config(tmp_path, switches, **controller), tmp_path / "controller.log")
        started.append(ctl)
        return ctl.start(timeout=60)  # a liveness bound: start-up takes seconds on a loaded machine

    yield start
    for ctl in started:
        code = ctl.stop()
        assert code == 0, f"daemon did not stop cleanly ({code}): {ctl.tail()}"
