"""The coordinator's Prometheus metrics (coordinator/metrics.py) follow registrations, reports, decisions and
finishes of the real engine, and ``mlfc-coordinator run --metrics-listen`` serves them over HTTP."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from coord_helpers import MD, TOKEN, register, report, spec, stub_for, wait_until
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from mlfc.coordinator.engine import Engine
from mlfc.coordinator.metrics import CoordinatorMetrics, start_metrics_server
from mlfc.coordinator.store import Store
from mlfc.proto import coordinator_pb2 as pb


@pytest.fixture
def engine(tmp_path: Path):  # type: ignore[no-untyped-def]
    store = Store(tmp_path / "coord.sqlite", "NORMAL")
    yield Engine(store)
    store.close()


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """{(sample name, sorted labels): value} of a /metrics page on 127.0.0.1."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_follow_registrations_reports_and_decisions(engine: Engine) -> None:
    registry = CollectorRegistry()
    CoordinatorMetrics(engine, registry)

    def value(metric: str, **labels: str) -> float | None:
        return registry.get_sample_value(metric, labels)

    assert value("mlfc_coordinator_jobs", state="active") == 0
    assert value("mlfc_coordinator_decisions_total") == 0
    assert value("mlfc_coordinator_last_decision_timestamp_seconds") == 0
    for jid in (1, 2):
        engine.register(pb.RegisterRequest(job=spec(jid), instance="a"))
    assert value("mlfc_coordinator_jobs", state="active") == 2
    assert value("mlfc_coordinator_job_info", job="1", name="job1", state="active") == 1

    batch = [report(1, it, 0.1 + it / 100) for it in range(1, 6)] + [report(2, 1, 0.2)]
    engine.report(pb.ReportBatch(reports=batch))
    engine.report(pb.ReportBatch(reports=batch[:2]))  # re-sent after a lost ack: duplicates, nothing new
    assert value("mlfc_coordinator_reports_total", job="1") == 5
    assert value("mlfc_coordinator_reports_total", job="2") == 1
    assert value("mlfc_coordinator_duplicate_reports_total") == 2
    assert value("mlfc_coordinator_job_reported_bytes_total", job="1") == 5 * 1_000_000
    assert value("mlfc_coordinator_job_iteration", job="1") == 5

    assert engine.decide() == 1
    assert engine.decide() is None  # same intent: evaluated, no new decision
    assert value("mlfc_coordinator_decisions_total") == 1
    assert value("mlfc_coordinator_evaluation_seconds_count") == 2
    assert value("mlfc_coordinator_evaluation_seconds_sum") > 0
    assert value("mlfc_coordinator_last_decision_timestamp_seconds") == engine.latest_at > 0
    classes = {
        int(s.labels["job"]): s.value
        for f in registry.collect()
        if f.name == "mlfc_coordinator_job_priority"
        for s in f.samples
    }
    explained = {jid: engine.explain(jid).priority for jid in (1, 2)}
    assert classes == explained
    per_class = {p: sum(1 for c in explained.values() if c == p) for p in set(explained.values())}
    assert {p: value("mlfc_coordinator_class_jobs", priority=str(p)) for p in per_class} == per_class
    assert value("mlfc_coordinator_classes_applied", mode="maif") == 1
    assert value("mlfc_coordinator_classes_applied", mode="none") == 0
    assert value("mlfc_coordinator_applied_decision") == 0
    engine.on_applied(1, 7)
    assert value("mlfc_coordinator_applied_decision") == 1

    engine.finish(pb.FinishRequest(job_id=2))
    assert value("mlfc_coordinator_jobs", state="active") == 1
    assert value("mlfc_coordinator_jobs", state="finished") == 1


def test_a_restarted_coordinator_keeps_its_report_tally_and_latest_decision(tmp_path: Path) -> None:
    """The tallies come from the store: a restart does not reset the reports or decisions counters."""
    store = Store(tmp_path / "coord.sqlite", "NORMAL")
    first = Engine(store)
    first.register(pb.RegisterRequest(job=spec(1), instance="a"))
    first.report(pb.ReportBatch(reports=[report(1, it, 0.5) for it in range(3)]))
    first.decide()
    store.close()
    store = Store(tmp_path / "coord.sqlite", "NORMAL")
    try:
        registry = CollectorRegistry()
        CoordinatorMetrics(Engine(store), registry)
        assert registry.get_sample_value("mlfc_coordinator_reports_total", {"job": "1"}) == 3
        assert registry.get_sample_value("mlfc_coordinator_decisions_total") == 1
        assert registry.get_sample_value("mlfc_coordinator_last_decision_timestamp_seconds") == first.latest_at
    finally:
        store.close()


def test_metrics_server_serves_a_running_coordinator(make_coordinator) -> None:  # type: ignore[no-untyped-def]
    coord = make_coordinator()
    server, port = start_metrics_server(coord.engine, "127.0.0.1:0")
    try:
        stub = stub_for(coord.address)
        register(stub, 5)
        stub.Report(pb.ReportBatch(reports=[report(5, it, 0.3) for it in range(4)]), metadata=MD, timeout=5)
        assert wait_until(lambda: coord.engine.latest_seq >= 1)
        got = scrape(port)
        assert got[("mlfc_coordinator_reports_total", (("job", "5"),))] == 4
        assert got[("mlfc_coordinator_jobs", (("state", "active"),))] == 1
        assert got[("mlfc_coordinator_decisions_total", ())] >= 1
    finally:
        server.shutdown()  # type: ignore[attr-defined]


def test_metrics_listen_is_loopback_unless_allowed(engine: Engine) -> None:
    with pytest.raises(ValueError, match="not a loopback address"):
        start_metrics_server(engine, "0.0.0.0:0")


def test_cli_run_serves_metrics_on_metrics_listen(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN)
    cmd = [sys.executable, "-m", "mlfc.coordinator.cli", "run", "--db", str(tmp_path / "c.sqlite")]
    cmd += ["--listen", "127.0.0.1:0", "--token-file", str(token), "--metrics-listen", "127.0.0.1:0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        listening, metrics = proc.stdout.readline(), proc.stdout.readline()
        assert "listening on 127.0.0.1:" in listening, listening
        assert metrics.startswith("mlfc-coordinator: metrics on 127.0.0.1:"), metrics + proc.stderr.read()
        got = scrape(int(metrics.rsplit(":", 1)[1]))
        assert got[("mlfc_coordinator_jobs", (("state", "active"),))] == 0
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0
