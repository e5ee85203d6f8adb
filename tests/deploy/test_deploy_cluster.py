"""``make deploy-test`` in CI: the cluster of docs/deploy.md in network namespaces, each daemon started from
its systemd unit and configuration file, agents reporting across hosts over mutual TLS, a job trained."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlfc.lab.deploy import run as deploy

pytestmark = [pytest.mark.root, pytest.mark.slow]


def test_cluster_trains_a_job_over_mutual_tls(tmp_path: Path) -> None:
    reason = deploy.missing()
    if reason:
        pytest.skip(reason)
    report = deploy.run(tmp_path / "deploy", timeout_s=400)
    assert set(report.job_exit_codes.values()) == {0}
    assert len(report.coordinator_workers) == 2 and min(report.coordinator_workers.values()) >= 1
    assert report.switch_entries > 0
    assert "certificate" in report.refused_without_certificate.lower()
