"""The PTF packet tests (ptf-tests/), one PTF run per module against a fresh BMv2."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlfc.topologies.ptf_runner import PTF_DIR, run_ptf

MODULES = sorted(p.stem for p in PTF_DIR.glob("test_*.py"))


@pytest.mark.bmv2
@pytest.mark.root
@pytest.mark.parametrize("module", MODULES)
def test_ptf_module(module: str, tmp_path: Path) -> None:
    rc = run_ptf([module], tmp_path)
    if rc != 0:
        log = (tmp_path / "ptf.log").read_text(errors="replace")[-6000:]
        pytest.fail(f"PTF {module} failed with status {rc}; end of ptf.log:\n{log}")
