"""The PTF packet tests (ptf-tests/) against the reference switch: one PTF run per module, each against a
fresh refswitch process on veths. Needs root but not BMv2 (tests/bmv2/test_ptf.py runs them on BMv2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlfc.lab.ptf_runner import PTF_DIR, failure_summary, ptf_missing, run_ptf

MODULES = sorted(p.stem for p in PTF_DIR.glob("test_*.py"))


@pytest.mark.root
@pytest.mark.parametrize("module", MODULES)
def test_ptf_module_on_refswitch(module: str, tmp_path: Path) -> None:
    missing = ptf_missing("ref")
    if missing:
        pytest.skip(missing)
    report = tmp_path / "ptf-report.txt"
    rc = run_ptf([module], tmp_path, dataplane="ref", report=report)
    if rc != 0:
        switch_log = tmp_path / "refswitch.log"
        tail = switch_log.read_text(errors="replace")[-2000:] if switch_log.is_file() else "(none)"
        pytest.fail(
            f"PTF {module} on the refswitch failed with status {rc}.\n{failure_summary(tmp_path, report)}\n"
            f"end of refswitch.log:\n{tail}"
        )
