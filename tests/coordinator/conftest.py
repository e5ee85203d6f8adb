"""Fixtures of the coordinator tests: a fake controller and coordinators on temporary databases."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import pytest
from coord_helpers import TOKEN, FakeController, fast_config

from mlfc.coordinator.service import Coordinator


@pytest.fixture
def controller() -> Iterator[FakeController]:
    fake = FakeController().start()
    yield fake
    fake.stop()


@pytest.fixture
def make_coordinator(tmp_path) -> Iterator[Callable[..., Coordinator]]:  # type: ignore[no-untyped-def]
    started: list[Coordinator] = []

    def make(db: str = "coord.sqlite", **kw: object) -> Coordinator:
        kw.setdefault("token", TOKEN)
        kw.setdefault("config", fast_config())
        c = Coordinator(str(tmp_path / db), **kw).start()  # type: ignore[arg-type]
        started.append(c)
        return c

    yield make
    for c in started:
        with contextlib.suppress(Exception):
            c.stop(0)
