"""The PTF packet tests (ptf-tests/), one PTF run per module against a fresh BMv2."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlfc.lab.ptf_runner import PTF_DIR, failure_summary, run_ptf

MODULES = sorted(p.stem for p in PTF_DIR.glob("test_*.py"))


@pytest.mark.bmv2
@pytest.mark.root
@pytest.mark.parametrize("module", MODULES)
def test_ptf_module(module: str, tmp_path: Path) -> None:
    report = tmp_path / "ptf-report.txt"
    rc = run_ptf([module], tmp_path, report=report)
    if rc != 0:
        pytest.fail(f"PTF {module} failed with status {rc}.\n{failure_summary(tmp_path, report)}")
