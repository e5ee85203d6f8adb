"""The agent's Prometheus metrics (hosts/agent_metrics.py): per-worker bytes, withheld share, MLTCP bytes_ratio
and F from what the training lines say (or derived as the transport counts), delivery counters from a real agent
reporting to a real coordinator, and ``mlfc-agent --metrics-listen``."""

from __future__ import annotations

import json
import sys
import urllib.request

import pytest
from coord_helpers import TOKEN, free_port
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from mlfc.hosts import agent_cli
from mlfc.hosts.agent import Agent, Worker
from mlfc.hosts.agent_metrics import AgentMetrics, IterationSample, start_metrics_server
from mlfc.policy.mltcp import MltcpParams, mltcp_factor


def _agent(port: int, job_id: int = 3) -> Agent:
    return Agent(job_id, coordinator=f"127.0.0.1:{port}", token=TOKEN, workers=[Worker(0), Worker(1)])


def _value(metrics: AgentMetrics, name: str, worker: int | None = None) -> float | None:
    labels = {"job": metrics.job} if worker is None else {"job": metrics.job, "worker": str(worker)}
    return metrics.registry.get_sample_value(name, labels)


def test_withheld_share_bytes_ratio_and_f_from_the_iterations() -> None:
    agent = _agent(free_port())  # never started: observe needs no coordinator
    try:
        params = MltcpParams(2.0, 0.5)
        m = AgentMetrics(agent, CollectorRegistry(), bytes_per_iteration=0, mltcp=params)
        # a push of 1000 bytes of which 250 withheld: the transport's ratio is 750 / the declared 1000
        m.observe(IterationSample(0, 1, bytes=1000, sent_bytes=750, chunks=8, withheld_chunks=2, comm_s=0.25))
        assert _value(m, "mlfc_agent_job_bytes_total", 0) == 1000
        assert _value(m, "mlfc_agent_job_sent_bytes_total", 0) == 750
        assert _value(m, "mlfc_agent_withheld_bytes_total", 0) == 250
        assert _value(m, "mlfc_agent_withheld_share", 0) == 0.25
        assert (_value(m, "mlfc_agent_chunks_total", 0), _value(m, "mlfc_agent_withheld_chunks_total", 0)) == (8, 2)
        assert _value(m, "mlfc_agent_bytes_ratio", 0) == 0.75
        assert _value(m, "mlfc_agent_mltcp_f", 0) == mltcp_factor(0.75, params) == 2.0
        assert _value(m, "mlfc_agent_comm_seconds", 0) == 0.25
        # the line's own MLTCP state wins over the derivation
        m.observe(IterationSample(0, 2, bytes=1000, sent_bytes=1000, bytes_ratio=0.5, mltcp_f=16.5))
        assert (_value(m, "mlfc_agent_bytes_ratio", 0), _value(m, "mlfc_agent_mltcp_f", 0)) == (0.5, 16.5)
        assert _value(m, "mlfc_agent_withheld_share", 0) == 0
        assert _value(m, "mlfc_agent_reports_total", 0) == 2 and _value(m, "mlfc_agent_iteration", 0) == 2
        # another worker of the job, bytes only: no declared size, so the EWMA of earlier iterations (none yet: 0)
        m.observe(IterationSample(1, 1, bytes=400))
        assert _value(m, "mlfc_agent_bytes_ratio", 1) == 0
        m.observe(IterationSample(1, 2, bytes=200))
        assert _value(m, "mlfc_agent_bytes_ratio", 1) == 0.5
        assert _value(m, "mlfc_agent_withheld_bytes_total", 1) == 0
        assert _value(m, "mlfc_agent_job_bytes_total", 0) == 2000  # worker 0 untouched by worker 1
    finally:
        agent.close()


def test_no_f_without_mltcp_parameters_or_a_line_that_carries_it() -> None:
    agent = _agent(free_port())
    try:
        m = AgentMetrics(agent, CollectorRegistry(), bytes_per_iteration=2000)
        m.observe(IterationSample(0, 1, bytes=500))
        assert _value(m, "mlfc_agent_bytes_ratio", 0) == 0.25  # the job's declared bytes per iteration
        assert _value(m, "mlfc_agent_mltcp_f", 0) is None
    finally:
        agent.close()


def test_delivery_counters_follow_a_real_agent_and_are_served(make_coordinator) -> None:  # type: ignore[no-untyped-def]
    coord = make_coordinator()
    agent = Agent(4, coordinator=coord.address, token=TOKEN, workers=[Worker(0)]).start()
    metrics = AgentMetrics(agent, CollectorRegistry())
    server, port = start_metrics_server(metrics, "127.0.0.1:0")
    try:
        assert _value(metrics, "mlfc_agent_reports_committed_total") == 0
        for it in range(6):
            agent.report(it, 0.1, bytes=100)
            metrics.observe(IterationSample(0, it, bytes=100))
        assert agent.flush(timeout=10)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            families = {f.name: f for f in text_string_to_metric_families(reply.read().decode())}
        committed = families["mlfc_agent_reports_committed"].samples
        assert [(s.labels, s.value) for s in committed] == [({"job": "4"}, 6.0)]
        assert families["mlfc_agent_registered"].samples[0].value == 1
        assert families["mlfc_agent_reports_buffered"].samples[0].value == 0
        sent = [s for s in families["mlfc_agent_job_sent_bytes"].samples if s.name.endswith("_total")]
        assert [(s.labels, s.value) for s in sent] == [({"job": "4", "worker": "0"}, 600.0)]
    finally:
        server.shutdown()  # type: ignore[attr-defined]
        agent.finish()


def test_metrics_listen_is_loopback_unless_allowed() -> None:
    agent = _agent(free_port())
    try:
        with pytest.raises(ValueError, match="not a loopback address"):
            start_metrics_server(AgentMetrics(agent, CollectorRegistry()), "10.1.2.3:0")
    finally:
        agent.close()


def test_agent_cli_exports_what_the_training_lines_say(make_coordinator, tmp_path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A training worker's JSON records through mlfc-agent --metrics-listen: the metrics the agent serves."""
    coord = make_coordinator()
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    started: list[AgentMetrics] = []
    real_start = agent_cli._start_metrics

    def keep(agent, args):  # type: ignore[no-untyped-def]
        metrics, server = real_start(agent, args)
        started.append(metrics)
        return metrics, server

    monkeypatch.setattr(agent_cli, "_start_metrics", keep)
    records = [
        {"iteration": 1, "accuracy": 0.2, "bytes": 4000, "sent_bytes": 3000, "chunks": 4, "withheld_chunks": 1,
         "bytes_ratio": 0.75, "mltcp_f": 12.5, "compute_s": 0.1, "comm_s": 0.2, "worker": 1},
        {"iteration": 2, "accuracy": 0.3, "bytes": 4000, "sent_bytes": 4000, "chunks": 4, "withheld_chunks": 0,
         "bytes_ratio": 1.0, "mltcp_f": "nan", "compute_s": 0.1, "comm_s": 0.2, "worker": 1},
    ]  # fmt: skip
    script = tmp_path / "train.py"
    script.write_text("".join(f"print({json.dumps(json.dumps(r))})\n" for r in records))
    rc = agent_cli.main(
        ["--job", "6", "--coordinator", coord.address, "--token-file", str(token_file), "--worker", "0=10.0.0.1",
         "--worker", "1=10.0.0.2", "--metrics-listen", "127.0.0.1:0", "--", sys.executable, str(script)]
    )  # fmt: skip
    assert rc == 0
    assert "mlfc-agent: metrics on 127.0.0.1:" in capsys.readouterr().err
    (m,) = started
    assert _value(m, "mlfc_agent_reports_total", 1) == 2
    assert _value(m, "mlfc_agent_withheld_bytes_total", 1) == 1000
    assert _value(m, "mlfc_agent_withheld_chunks_total", 1) == 1
    assert _value(m, "mlfc_agent_bytes_ratio", 1) == 1.0
    assert _value(m, "mlfc_agent_mltcp_f", 1) == 12.5  # the second line's NaN F is left out, not exported
    assert _value(m, "mlfc_agent_reports_committed_total") == 2


def test_line_parser_keeps_a_report_whose_extras_do_not_parse() -> None:
    line = "iter=3 acc=0.5 bytes=100 sent_bytes=x chunks=2 bytes_ratio=-1 mltcp_f=inf"
    assert agent_cli.parse_line(line, "accuracy") == {"iteration": 3, "metric": 0.5, "bytes": 100, "chunks": 2}
