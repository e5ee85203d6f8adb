"""``make shell`` on a switch the controller manages joins as a read-only backup (issue 16, item 5): it used
to push a pipeline and fail with "PERMISSION_DENIED: Not primary". Runs p4runtime-shell for real, with
commands on stdin, against a reference switch whose primary is the controller; needs the shell's own venv
(``make shell-venv``, which CI builds)."""

from __future__ import annotations

import subprocess

import pytest
from controller_helpers import INTENT_A, needs_artifacts

from mlfc import contract

SHELL_PY = contract.REPO_ROOT / ".venv-shell" / "bin" / "python"

pytestmark = [
    needs_artifacts,
    pytest.mark.skipif(not SHELL_PY.exists(), reason="p4runtime-shell's venv missing: run `make shell-venv`"),
    pytest.mark.timeout(180),
]


def test_make_shell_joins_a_managed_switch_as_backup(switch_factory, controller_factory) -> None:
    s1 = switch_factory(device_id=1)
    ctl = controller_factory([s1])
    ctl.client.wait_synced(ctl.client.apply(INTENT_A).generation)
    res = subprocess.run(
        ["make", "--no-print-directory", "shell", f"GRPC_ADDR={s1.grpc_addr}"],
        cwd=contract.REPO_ROOT,
        input=f'print("ROUTES", len(list(table_entry["{contract.ROUTES_V4}"].read())))\n',
        capture_output=True,
        text=True,
        timeout=150,
    )
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    assert "joining as a read-only backup" in out
    assert "not the primary client" in out, out  # p4runtime-shell's own words
    assert "ROUTES 2" in out, out  # it reads the controller's entries
    assert "PERMISSION_DENIED" not in out
    status = ctl.client.status().switches[0]
    assert status.primary and status.applied_generation == 1, "the controller kept the switch"
