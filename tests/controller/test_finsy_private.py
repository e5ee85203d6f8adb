"""finsy's private members that controller/finsy_private.py relies on are still there and shaped as
expected; a finsy upgrade that changes them fails here, loudly, before any switch is touched."""

from __future__ import annotations

from importlib.metadata import version

import pytest

from mlfc.controller import finsy_private


def test_installed_finsy_is_the_tested_one() -> None:
    assert version("finsy") == finsy_private.TESTED_VERSION, (
        "finsy changed: re-run the controller tests, then update finsy_private.TESTED_VERSION and the pin"
    )


def test_private_members_still_match() -> None:
    finsy_private.check()


def test_a_missing_member_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import finsy as fy

    monkeypatch.delattr(fy.Switch, "_set_pipeline_config_request")
    with pytest.raises(finsy_private.FinsyChanged, match=r"Switch\._set_pipeline_config_request is gone"):
        finsy_private.check()
