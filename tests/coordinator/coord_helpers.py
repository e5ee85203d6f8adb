"""Helpers of the coordinator tests: an in-process fake controller (an IntentService test double that
records what it receives), request builders, polling."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field

import grpc

from mlfc.coordinator.engine import EngineConfig
from mlfc.coordinator.service import TOKEN_HEADER
from mlfc.policy.maif import MaifParams
from mlfc.proto import coordinator_pb2 as pb
from mlfc.proto import coordinator_pb2_grpc, intent_pb2, intent_pb2_grpc

TOKEN = "s3cret-test-token"
MD = ((TOKEN_HEADER, TOKEN),)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(pred: Callable[[], object], timeout: float = 10.0, step: float = 0.01) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return bool(pred())


@dataclass
class FakeController(intent_pb2_grpc.IntentServiceServicer):
    """Records every Apply and holds the latest, as the controller does (Get); ``reject`` makes Apply answer
    INVALID_ARGUMENT; ``forget()`` is a restart without a state file (generation 0, no jobs)."""

    port: int = 0
    intents: list[tuple[float, intent_pb2.Intent]] = field(default_factory=list)
    reject: bool = False
    generation: int = 0
    held: intent_pb2.Intent = field(default_factory=intent_pb2.Intent)
    _server: grpc.Server | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def Apply(self, request, context):  # type: ignore[no-untyped-def]
        if self.reject:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "jobs[0].priority: rejected by test")
        with self._lock:
            self.intents.append((time.perf_counter(), request))
            self.generation += 1
            self.held = request
            return intent_pb2.ApplyReply(generation=self.generation, entries=len(request.jobs))

    def Get(self, request, context):  # type: ignore[no-untyped-def]
        with self._lock:
            return intent_pb2.GetReply(intent=self.held, generation=self.generation)

    def forget(self) -> None:
        with self._lock:
            self.generation, self.held = 0, intent_pb2.Intent()

    def start(self) -> FakeController:
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=[("grpc.so_reuseport", 0)])
        intent_pb2_grpc.add_IntentServiceServicer_to_server(self, self._server)
        self.port = self._server.add_insecure_port(f"127.0.0.1:{self.port}")
        self._server.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(0).wait()
            self._server = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def latest(self) -> intent_pb2.Intent | None:
        with self._lock:
            return self.intents[-1][1] if self.intents else None

    def classes(self) -> dict[int, int]:
        last = self.latest()
        return {j.job_id: j.priority for j in last.jobs} if last else {}


class FakeClock:
    """A monotonic clock the test moves (thread-safe)."""

    def __init__(self, start: float = 1000.0) -> None:
        self._t = start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._t

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._t += seconds


def fast_config(**params: object) -> EngineConfig:
    silence = params.pop("silence_s", 60.0)
    return EngineConfig(params=MaifParams(**params), silence_s=float(silence), tick_s=0.05)  # type: ignore[arg-type]


def evaluated(stub: coordinator_pb2_grpc.CoordinatorStub, points: dict[int, int]) -> pb.StatusReply | None:
    """The coordinator's status once its latest evaluation ranked every active job and fitted each job of
    ``points`` on exactly that many metric points (i.e. used every report sent so far); None before."""
    st = stub.Status(pb.StatusRequest(), metadata=MD, timeout=5)
    jobs = {j.job_id: j for j in st.jobs}
    if any(j.state == "active" and j.rank == 0 for j in st.jobs):
        return None  # registered after the latest evaluation
    if any(j not in jobs or jobs[j].fit.points != n for j, n in points.items()):
        return None
    return st


def decided(
    stub: coordinator_pb2_grpc.CoordinatorStub, controller: FakeController, points: dict[int, int]
) -> pb.StatusReply | None:
    """``evaluated``, and the controller holds the decision that evaluation implies: the latest decision is
    acknowledged and the classes the controller last received are the ones the explanations give."""
    st = evaluated(stub, points)
    if st is None or st.applied_decision != st.decision:
        return None
    want = {j.job_id: j.priority for j in st.jobs if j.state == "active"}
    return st if controller.classes() == want else None


def stub_for(address: str) -> coordinator_pb2_grpc.CoordinatorStub:
    return coordinator_pb2_grpc.CoordinatorStub(grpc.insecure_channel(address))


def spec(job_id: int, workers: int = 1, metric: int = pb.ACCURACY, **kw: object) -> pb.JobSpec:
    return pb.JobSpec(
        job_id=job_id,
        name=f"job{job_id}",
        metric=metric,
        workers=[pb.Worker(rank=r, address=f"10.0.0.{r + 1}") for r in range(workers)],
        bytes_per_iteration=1_000_000,
        **kw,
    )  # type: ignore[arg-type]


def register(
    stub: coordinator_pb2_grpc.CoordinatorStub, job_id: int, workers: int = 1, instance: str = "agent-a", **kw: object
) -> pb.RegisterReply:
    return stub.Register(pb.RegisterRequest(job=spec(job_id, workers, **kw), instance=instance), metadata=MD, timeout=5)


def report(
    job_id: int, iteration: int, metric: float | None = None, worker: int = 0, compute: float = 0.1, comm: float = 0.05
) -> pb.IterationReport:
    r = pb.IterationReport(
        job_id=job_id,
        worker=worker,
        iteration=iteration,
        compute_seconds=compute,
        comm_seconds=comm,
        bytes=1_000_000,
        timestamp=1.0 + iteration,
    )
    if metric is not None:
        r.metric = metric
    return r
