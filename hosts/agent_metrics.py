"""Prometheus /metrics of an agent (``mlfc-agent --metrics-listen``): what its job's iterations told it, per
worker, and how its reports reach the coordinator.

The transport's MLTCP state (bytes_ratio, F) and the withheld share live in the training worker, which runs
no exporter: its per-iteration record (hosts/training/loop.py) carries them, and the agent exports what the
records say. For a line that does not carry bytes_ratio the agent derives it as the transport does
(mlfc.hosts.progress.IterationProgress over the iteration's bytes on the wire), and F from it when given
MLTCP's parameters (``--mltcp-f``); without them F is exported only as the lines carry it.

Delivery counters are read from ``Agent.stats()`` when scraped (one source of truth, as the controller's and
the coordinator's collectors do).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from mlfc.policy.mltcp import MltcpParams, mltcp_factor
from mlfc.tls import check_metrics_listen

from .agent import Agent
from .progress import IterationProgress

LABELS = ("job", "worker")


@dataclass(frozen=True, slots=True)
class IterationSample:
    """One reported iteration of one worker, with what its line said beyond the report (None: not said)."""

    worker: int
    iteration: int
    bytes: int = 0  # the iteration's bytes (a push: every chunk, withheld ones included)
    sent_bytes: int | None = None  # of which put on the wire (less withheld chunks); None: all of them
    chunks: int | None = None  # gradient chunks of the push
    withheld_chunks: int | None = None  # of which withheld (approximate flow control, mlfc.policy.withhold)
    bytes_ratio: float | None = None  # the transport's at the iteration's end
    mltcp_f: float | None = None  # MLTCP's F at the iteration's end
    compute_s: float = 0.0
    comm_s: float = 0.0

    @property
    def wire_bytes(self) -> int:
        return self.bytes if self.sent_bytes is None else self.sent_bytes


class AgentCollector(Collector):
    """The agent's delivery counters, read from ``Agent.stats()`` at scrape time."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        st, job = self.agent.stats(), [str(self.agent.job_id)]
        for name, help_, value in (
            ("mlfc_agent_reports_committed", "Reports the coordinator committed", st.sent),
            ("mlfc_agent_reports_duplicate", "Re-sent reports the coordinator already had (ack lost)", st.duplicates),
            ("mlfc_agent_reports_dropped", "Oldest reports dropped because the buffer was full", st.dropped),
            ("mlfc_agent_reports_rejected", "Reports the coordinator refused as invalid", st.rejected),
            ("mlfc_agent_rpc_failures", "Failed calls to the coordinator (each followed by a backoff)", st.failures),
        ):
            counter = CounterMetricFamily(name, help_, labels=["job"])
            counter.add_metric(job, value)
            yield counter
        for name, help_, value in (
            ("mlfc_agent_reports_buffered", "Reports waiting to be sent", st.buffered),
            (
                "mlfc_agent_registered",
                "1 once the coordinator accepted the job (or it registers elsewhere)",
                st.registered,
            ),
            ("mlfc_agent_connected", "1 while the latest call to the coordinator succeeded", st.connected),
        ):
            gauge = GaugeMetricFamily(name, help_, labels=["job"])
            gauge.add_metric(job, int(value))
            yield gauge


class AgentMetrics:
    """The agent's metrics in ``registry``; ``observe`` every iteration the agent reported.

    ``bytes_per_iteration``: the job's declared bytes per iteration (0: unknown), ``mltcp``: MLTCP's
    parameters to derive F from bytes_ratio when a line carries no F (None: not derived)."""

    def __init__(
        self,
        agent: Agent,
        registry: CollectorRegistry,
        bytes_per_iteration: int = 0,
        mltcp: MltcpParams | None = None,
    ) -> None:
        self.job, self.registry = str(agent.job_id), registry
        self.bytes_per_iteration, self.mltcp = bytes_per_iteration, mltcp
        self._lock = threading.Lock()
        self._progress: dict[int, IterationProgress] = {}  # worker -> the transport's count, replayed
        r = registry
        self.reports = Counter("mlfc_agent_reports", "Iterations reported", LABELS, registry=r)
        self.iteration = Gauge("mlfc_agent_iteration", "Latest iteration reported", LABELS, registry=r)
        self.job_bytes = Counter("mlfc_agent_job_bytes", "Bytes of the reported iterations", LABELS, registry=r)
        self.sent_bytes = Counter(
            "mlfc_agent_job_sent_bytes", "Bytes the reported iterations put on the wire", LABELS, registry=r
        )
        self.withheld_bytes = Counter(
            "mlfc_agent_withheld_bytes", "Bytes withheld (approximate flow control)", LABELS, registry=r
        )
        self.chunks = Counter("mlfc_agent_chunks", "Gradient chunks pushed", LABELS, registry=r)
        self.withheld_chunks = Counter("mlfc_agent_withheld_chunks", "Gradient chunks withheld", LABELS, registry=r)
        self.withheld_share = Gauge(
            "mlfc_agent_withheld_share", "Share of the latest iteration's bytes withheld", LABELS, registry=r
        )
        self.bytes_ratio = Gauge(
            "mlfc_agent_bytes_ratio", "MLTCP bytes_ratio at the end of the latest iteration", LABELS, registry=r
        )
        self.mltcp_f = Gauge("mlfc_agent_mltcp_f", "MLTCP F at the end of the latest iteration", LABELS, registry=r)
        self.compute_s = Gauge("mlfc_agent_compute_seconds", "Latest iteration's compute time", LABELS, registry=r)
        self.comm_s = Gauge("mlfc_agent_comm_seconds", "Latest iteration's communication time", LABELS, registry=r)
        registry.register(AgentCollector(agent))

    def observe(self, sample: IterationSample) -> None:
        labels = (self.job, str(sample.worker))
        self.reports.labels(*labels).inc()
        self.iteration.labels(*labels).set(sample.iteration)
        self.job_bytes.labels(*labels).inc(sample.bytes)
        self.sent_bytes.labels(*labels).inc(sample.wire_bytes)
        withheld = max(0, sample.bytes - sample.wire_bytes)
        self.withheld_bytes.labels(*labels).inc(withheld)
        self.withheld_share.labels(*labels).set(withheld / sample.bytes if sample.bytes > 0 else 0.0)
        if sample.chunks is not None:
            self.chunks.labels(*labels).inc(sample.chunks)
        if sample.withheld_chunks is not None:
            self.withheld_chunks.labels(*labels).inc(sample.withheld_chunks)
        ratio = self._ratio(sample)
        self.bytes_ratio.labels(*labels).set(ratio)
        if sample.mltcp_f is not None:
            self.mltcp_f.labels(*labels).set(sample.mltcp_f)
        elif self.mltcp is not None:
            self.mltcp_f.labels(*labels).set(mltcp_factor(ratio, self.mltcp))
        self.compute_s.labels(*labels).set(sample.compute_s)
        self.comm_s.labels(*labels).set(sample.comm_s)

    def _ratio(self, sample: IterationSample) -> float:
        """The line's bytes_ratio, else the transport's count replayed: the iteration's bytes on the wire over
        the declared bytes per iteration (the job's, else the push's when the line tells its wire bytes apart,
        as the training worker declares it to its transport), else over an EWMA of earlier iterations."""
        with self._lock:
            progress = self._progress.setdefault(sample.worker, IterationProgress(idle_gap=None))
            declared = self.bytes_per_iteration or (
                sample.bytes if sample.sent_bytes is not None and sample.bytes > 0 else 0
            )
            progress.start_iteration(declared or None)
            progress.on_sent(sample.wire_bytes, 0.0)
            derived = progress.ratio
        return derived if sample.bytes_ratio is None else sample.bytes_ratio


def start_metrics_server(metrics: AgentMetrics, listen: str, allow_remote: bool = False) -> tuple[object, int]:
    """Serve ``metrics``' registry on ``listen`` (HOST:PORT, port 0 = any free port; loopback unless
    ``allow_remote``) in a daemon thread: (server, bound port)."""
    host, port = check_metrics_listen(listen, allow_remote)
    server, _thread = start_http_server(port, addr=host, registry=metrics.registry)
    return server, server.server_port
