"""Prometheus /metrics of the coordinator: jobs by state, classes, decisions and the reports agents send.

Job states, report tallies, classes and decisions are read from the engine when scraped (a custom collector,
as the controller's metrics are: one source of truth, nothing to keep in step). What the engine does not keep,
the bytes the reports carry and re-sent duplicates, is counted as the engine commits reports (its
``on_reports`` hook), and every evaluation's duration as it ends (``on_evaluated``); those counters restart
from 0 with the process, which rate() treats as a reset.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from mlfc.policy import fallback as fb
from mlfc.tls import check_metrics_listen

from .engine import Engine
from .jobs import ACTIVE, FINISHED, SILENT, ReportPlan

STATES = (ACTIVE, FINISHED, SILENT)
# Evaluations take from well under a millisecond (a few jobs, fits cached) to seconds (many jobs refitted).
EVALUATION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class EngineCollector(Collector):
    """What the engine holds, read at scrape time."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        engine = self.engine
        jobs = GaugeMetricFamily("mlfc_coordinator_jobs", "Registered jobs by state", labels=["state"])
        info = GaugeMetricFamily(
            "mlfc_coordinator_job_info",
            "A registered job (always 1), its name and state",
            labels=["job", "name", "state"],
        )
        reports = CounterMetricFamily(
            "mlfc_coordinator_reports", "Iteration reports committed (the store's tally)", labels=["job"]
        )
        iteration = GaugeMetricFamily(
            "mlfc_coordinator_job_iteration", "Latest iteration reported by the job's furthest worker", labels=["job"]
        )
        counts = dict.fromkeys(STATES, 0)
        for job in engine.jobs():
            jid = str(job.job_id)
            counts[job.state] = counts.get(job.state, 0) + 1
            info.add_metric([jid, job.name, job.state], 1)
            reports.add_metric([jid], job.reports)
            if job.workers:
                iteration.add_metric([jid], max(w.last_iteration for w in job.workers))
        for state, n in sorted(counts.items()):
            jobs.add_metric([state], n)
        yield from (jobs, info, reports, iteration)
        yield from self._classes(engine)
        decisions = CounterMetricFamily(
            "mlfc_coordinator_decisions", "Decisions made (a changed intent), the store's sequence number"
        )
        decisions.add_metric([], engine.latest_seq)
        applied = GaugeMetricFamily(
            "mlfc_coordinator_applied_decision", "Sequence number of the latest decision the controller applied"
        )
        applied.add_metric([], engine.applied_seq)
        last = GaugeMetricFamily(
            "mlfc_coordinator_last_decision_timestamp_seconds", "Unix time of the latest decision (0: none yet)"
        )
        last.add_metric([], engine.latest_at)
        error = GaugeMetricFamily(
            "mlfc_coordinator_controller_error", "1 while the latest send to the controller failed, else 0"
        )
        error.add_metric([], int(bool(engine.controller_error())))
        yield from (decisions, applied, last, error)

    @staticmethod
    def _classes(engine: Engine) -> Iterator[GaugeMetricFamily]:
        by_class = GaugeMetricFamily(
            "mlfc_coordinator_class_jobs", "Active jobs the latest evaluation ranked into a class", labels=["priority"]
        )
        priority = GaugeMetricFamily(
            "mlfc_coordinator_job_priority", "The class the latest evaluation ranked a job into", labels=["job"]
        )
        mode = GaugeMetricFamily(
            "mlfc_coordinator_classes_applied",
            "What the intent carries (1 for the current one): maif (the classes), interleave or none (MLTCP alone)",
            labels=["mode"],
        )
        decision = engine.latest_evaluation()
        counts: dict[int, int] = {}
        if decision is not None:
            for jid, d in decision.jobs.items():
                priority.add_metric([str(jid)], d.priority)
                counts[d.priority] = counts.get(d.priority, 0) + 1
        for prio, n in sorted(counts.items()):
            by_class.add_metric([str(prio)], n)
        current = decision.applies if decision is not None else None
        for applied in fb.Applied:
            mode.add_metric([applied.value], int(applied is current))
        yield from (by_class, priority, mode)


class CoordinatorMetrics:
    """The coordinator's metrics in ``registry``; hooks itself into the engine's observers."""

    def __init__(self, engine: Engine, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.duplicates = Counter(
            "mlfc_coordinator_duplicate_reports", "Re-sent reports already committed (a lost ack)", registry=registry
        )
        self.reported_bytes = Counter(
            "mlfc_coordinator_job_reported_bytes",
            "Bytes the committed reports say the job's workers sent",
            labelnames=["job"],
            registry=registry,
        )
        self.evaluations = Histogram(
            "mlfc_coordinator_evaluation_seconds",
            "Duration of a MAIF evaluation (silence check, fits, ranking, persisting a new decision)",
            buckets=EVALUATION_BUCKETS,
            registry=registry,
        )
        registry.register(EngineCollector(engine))
        engine.on_reports = self.observe_reports
        engine.on_evaluated = self.observe_evaluation

    def observe_reports(self, plan: ReportPlan) -> None:
        if plan.duplicates:
            self.duplicates.inc(plan.duplicates)
        for row in plan.rows:
            if row.bytes:
                self.reported_bytes.labels(str(row.job_id)).inc(row.bytes)

    def observe_evaluation(self, seconds: float, changed: bool) -> None:
        self.evaluations.observe(seconds)


def start_metrics_server(engine: Engine, listen: str, allow_remote: bool = False) -> tuple[object, int]:
    """Serve the engine's metrics on ``listen`` (HOST:PORT, port 0 = any free port; loopback unless
    ``allow_remote``) in a daemon thread: (server, bound port)."""
    host, port = check_metrics_listen(listen, allow_remote)
    registry = CollectorRegistry()
    CoordinatorMetrics(engine, registry)
    server, _thread = start_http_server(port, addr=host, registry=registry)
    return server, server.server_port
