"""Every chunk the parameter server did not receive, counted per job, iteration, tensor and worker, and
exported: in each worker's per-iteration record (via the STATS message, ``PullStats``), the PS's own JSON
lines (``IterationRecord`` in PS mode, ``BucketRecord`` in aggregate mode) and, optionally, Prometheus
/metrics."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector


@dataclass
class IterationLoss:
    """Loss of one iteration's pushes, as the PS applied them."""

    iteration: int
    lost_chunks: Counter[tuple[int, int]] = field(default_factory=Counter)  # (rank, tensor) -> chunks
    chunks: Counter[int] = field(default_factory=Counter)  # rank -> chunks expected
    lost_elements: Counter[int] = field(default_factory=Counter)  # tensor -> elements no worker delivered

    def by_rank(self, rank: int) -> dict[int, int]:
        return {t: n for (r, t), n in sorted(self.lost_chunks.items()) if r == rank and n}

    def total(self, rank: int | None = None) -> int:
        return sum(n for (r, _), n in self.lost_chunks.items() if rank is None or r == rank)


class LossLedger:
    """Thread-safe totals since start, plus the per-iteration detail of the latest ``keep`` iterations."""

    def __init__(self, job: int, keep: int = 1024) -> None:
        self.job = job
        self._lock = threading.Lock()
        self._keep = keep
        self._iterations: dict[int, IterationLoss] = {}
        self.lost_chunks: Counter[tuple[int, int]] = Counter()  # (rank, tensor) -> chunks, all iterations
        self.chunks: Counter[int] = Counter()  # rank -> chunks expected
        self.lost_elements: Counter[int] = Counter()  # tensor -> elements set to 0
        self.tensors_with_loss = 0
        self.iteration = -1  # last iteration aggregated

    def record(self, iteration: int, rank: int, tensor: int, n_chunks: int, missing: int) -> None:
        with self._lock:
            it = self._iterations.get(iteration)
            if it is None:
                it = self._iterations[iteration] = IterationLoss(iteration)
                while len(self._iterations) > self._keep:
                    del self._iterations[min(self._iterations)]
            it.chunks[rank] += n_chunks
            self.chunks[rank] += n_chunks
            if missing:
                it.lost_chunks[(rank, tensor)] += missing
                self.lost_chunks[(rank, tensor)] += missing
                self.tensors_with_loss += 1

    def record_elements(self, iteration: int, tensor: int, lost_elements: int) -> None:
        if not lost_elements:
            return
        with self._lock:
            it = self._iterations.setdefault(iteration, IterationLoss(iteration))
            it.lost_elements[tensor] += lost_elements
            self.lost_elements[tensor] += lost_elements

    def finished(self, iteration: int) -> None:
        with self._lock:
            self.iteration = max(self.iteration, iteration)

    def of(self, iteration: int) -> IterationLoss:
        with self._lock:
            return self._iterations.get(iteration) or IterationLoss(iteration)

    def totals(self) -> dict[str, int]:
        with self._lock:
            return {
                "lost_chunks": sum(self.lost_chunks.values()),
                "chunks": sum(self.chunks.values()),
                "lost_elements": sum(self.lost_elements.values()),
                "tensors_with_loss": self.tensors_with_loss,
            }

    def snapshot(self) -> tuple[dict[tuple[int, int], int], dict[int, int], dict[int, int], int]:
        with self._lock:
            return dict(self.lost_chunks), dict(self.chunks), dict(self.lost_elements), self.iteration


class LossCollector(Collector):
    def __init__(self, ledger: LossLedger) -> None:
        self.ledger = ledger

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        lost, chunks, elements, iteration = self.ledger.snapshot()
        job = str(self.ledger.job)
        lost_f = CounterMetricFamily(
            "mlfc_training_lost_chunks", "Pushed gradient chunks the PS zero-filled", labels=["job", "worker", "tensor"]
        )
        for (rank, tensor), n in sorted(lost.items()):
            lost_f.add_metric([job, str(rank), str(tensor)], n)
        chunks_f = CounterMetricFamily(
            "mlfc_training_chunks", "Pushed gradient chunks expected", labels=["job", "worker"]
        )
        for rank, n in sorted(chunks.items()):
            chunks_f.add_metric([job, str(rank)], n)
        elements_f = CounterMetricFamily(
            "mlfc_training_lost_elements", "Gradient elements no worker delivered (set to 0)", labels=["job", "tensor"]
        )
        for tensor, n in sorted(elements.items()):
            elements_f.add_metric([job, str(tensor)], n)
        iteration_f = GaugeMetricFamily("mlfc_training_iteration", "Last iteration aggregated", labels=["job"])
        iteration_f.add_metric([job], iteration)
        yield from (lost_f, chunks_f, elements_f, iteration_f)


def start_metrics_server(ledger: LossLedger, addr: str) -> tuple[object, int]:
    """Serve /metrics on ``addr`` (host:port; port 0 = a free port) in a daemon thread."""
    host, sep, port = addr.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", addr
    registry = CollectorRegistry()
    registry.register(LossCollector(ledger))
    server, _thread = start_http_server(int(port), addr=host.strip("[]") or "127.0.0.1", registry=registry)
    return server, server.server_port


def lost_by_tensor(per_rank: dict[int, int]) -> dict[str, int]:
    """JSON-ready {tensor id: chunks} (string keys, as JSON needs)."""
    return {str(t): n for t, n in sorted(per_rank.items())}


class _Record:
    """A typed JSON record: ``to_dict`` gives its fields in declaration order, the order of the keys the
    records always had (the JSON lines and the STATS message stay byte-identical)."""

    __slots__ = ()

    def to_dict(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True, kw_only=True)
class IterationRecord(_Record):
    """The PS's JSON line of one iteration (PS mode): when each phase ended and what the pushes lost."""

    ps: bool = True
    job: int
    iteration: int
    start: float
    pushes_in: float  # every push of the iteration in
    wait_s: float
    aggregate_s: float
    step_s: float
    pull_s: float
    end: float
    lost_chunks: int
    chunks: int
    lost_by_worker: dict[str, int]
    lost_elements: int

    @classmethod
    def of(
        cls,
        job: int,
        iteration: int,
        loss: IterationLoss,
        ranks: Iterable[int],
        start: float,
        pushes_in: float,
        aggregated: float,
        stepped: float,
        end: float,
    ) -> IterationRecord:
        """From the iteration's loss, its workers' ranks and the times at which each phase ended."""
        return cls(
            job=job,
            iteration=iteration,
            start=start,
            pushes_in=pushes_in,
            wait_s=round(pushes_in - start, 5),
            aggregate_s=round(aggregated - pushes_in, 5),
            step_s=round(stepped - aggregated, 5),
            pull_s=round(end - stepped, 5),
            end=end,
            lost_chunks=loss.total(),
            chunks=sum(loss.chunks.values()),
            lost_by_worker={str(r): loss.total(r) for r in sorted(ranks)},
            lost_elements=sum(loss.lost_elements.values()),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class BucketRecord(_Record):
    """The aggregator's JSON line of one averaged DDP bucket (aggregate mode)."""

    ps: bool = True
    job: int
    iteration: int
    tensor: int
    aggregate_s: float
    lost_chunks: int

    @classmethod
    def of(cls, job: int, iteration: int, tensor: int, loss: IterationLoss, aggregate_s: float) -> BucketRecord:
        lost = sum(n for (_, t), n in loss.lost_chunks.items() if t == tensor)
        return cls(job=job, iteration=iteration, tensor=tensor, aggregate_s=aggregate_s, lost_chunks=lost)


@dataclass(frozen=True, slots=True, kw_only=True)
class PullStats(_Record):
    """The STATS message after a worker's pull (PS mode): what the pull sent and what the pushes lost."""

    pull_sent_bytes: int  # the parameters' bytes this pull handed to the network
    pull_withheld_chunks: int
    pull_stale_elements: int  # elements the worker now holds from an earlier pull
    lost_chunks: int  # of this worker's pushes
    job_lost_chunks: int
    lost_by_tensor: dict[str, int]
    chunks: int
    lost_elements: int

    @classmethod
    def of(
        cls, loss: IterationLoss, rank: int, *, sent_bytes: int, withheld_chunks: int, stale_elements: int
    ) -> PullStats:
        return cls(
            pull_sent_bytes=sent_bytes,
            pull_withheld_chunks=withheld_chunks,
            pull_stale_elements=stale_elements,
            lost_chunks=loss.total(rank),
            job_lost_chunks=loss.total(),
            lost_by_tensor=lost_by_tensor(loss.by_rank(rank)),
            chunks=loss.chunks[rank],
            lost_elements=sum(loss.lost_elements.values()),
        )
