"""The training agent: a training loop registers its job with the coordinator and reports every iteration.

    from mlfc.hosts.agent import Agent, Worker, Flow

    with Agent(7, token_file="token", workers=[Worker(0, "10.0.0.1"), Worker(1, "10.0.0.2")],
               bytes_per_iteration=25_000_000, metric="accuracy") as agent:
        for it in range(1, 1001):
            ...
            agent.report(it, accuracy, compute_s=0.12, comm_s=0.05, bytes=25_000_000)

``report`` never blocks and never talks to the network: it validates the values (ValueError on NaN/inf,
an iteration that does not increase, ...) and appends to a bounded in-memory buffer. A background thread
registers the job, sends the buffer in batches and, while the coordinator is unreachable, keeps the
reports and retries with exponential backoff (with jitter) up to ``backoff_max_s``. When the buffer is
full the *oldest* report is dropped and counted in ``stats().dropped``: the newest points shape the
learning-curve fit most, and a gap in old history only thins it. ``buffer_size`` reports of about 60
bytes each bound the memory (10,000 by default: well over a minute at 100 iterations per second).

Leaving the ``with`` block (or ``finish()``) flushes for at most ``finish_timeout_s`` and tells the
coordinator the job finished; reports still buffered after that are lost.
"""

from __future__ import annotations

import itertools
import logging
import math
import random
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc

from mlfc import contract
from mlfc.coordinator.api import DEFAULT_ADDRESS, MAX_ITERATION_JUMP, MAX_REASON, MAX_REPORT_ITERATION, resolve_token
from mlfc.coordinator.client import CoordinatorClient
from mlfc.proto import coordinator_pb2 as pb
from mlfc.proto import intent_pb2
from mlfc.tls import TlsConfig

log = logging.getLogger(__name__)

DEFAULT_COORDINATOR = DEFAULT_ADDRESS
_TRANSIENT = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.ABORTED,
}
_REJECTED = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.OUT_OF_RANGE}


class RegistrationRefused(RuntimeError):
    """The coordinator refused the job's registration (not a transient failure): the message says why."""


@dataclass(frozen=True, slots=True)
class Flow:
    """An untagged flow of a worker (empty/zero fields are wildcards), see intent.proto."""

    src: str = ""
    dst: str = ""
    protocol: int = 0
    src_port: int = 0
    dst_port: int = 0


@dataclass(frozen=True, slots=True)
class Worker:
    rank: int
    address: str = ""
    host: str = ""
    flows: Sequence[Flow] = ()


@dataclass(frozen=True, slots=True)
class AgentStats:
    buffered: int  # reports waiting to be sent
    sent: int  # reports the coordinator committed
    duplicates: int  # re-sent reports the coordinator already had (ack lost)
    dropped: int  # oldest reports dropped because the buffer was full
    rejected: int  # reports the coordinator refused (invalid) and were dropped
    registered: bool
    connected: bool
    failures: int  # failed RPCs (each followed by a backoff)
    last_error: str


class Agent:
    def __init__(
        self,
        job_id: int,
        *,
        coordinator: str = DEFAULT_COORDINATOR,
        token: str | None = None,
        token_file: str | Path | None = None,
        name: str = "",
        metric: str = "accuracy",
        workers: Sequence[Worker] = (),
        bytes_per_iteration: int = 0,
        final_iteration: int = 0,
        register: bool = True,
        replace: bool = False,
        worker: int = 0,
        buffer_size: int = 10_000,
        batch_size: int = 512,
        rpc_timeout_s: float = 2.0,
        backoff_initial_s: float = 0.05,
        backoff_max_s: float = 5.0,
        finish_timeout_s: float = 5.0,
        on_ack: Callable[[list[pb.IterationReport], bool], None] | None = None,
        tls: TlsConfig | None = None,
    ) -> None:
        """``tls``: the coordinator serves TLS (docs/tls.md). ``register=False`` for per-host agents of a job
        that another agent registers: they only report.
        ``worker`` is the default worker rank of ``report``. ``on_ack(reports, committed)`` is called (on the
        background thread) with every batch the coordinator answered: committed (it holds them now, in its
        durable store) or rejected (invalid, dropped)."""
        if not 1 <= job_id <= contract.MAX_JOB_ID:
            raise ValueError(f"job_id={job_id} out of range 1..{contract.MAX_JOB_ID}")
        if metric not in ("accuracy", "loss"):
            raise ValueError(f"metric={metric!r} must be 'accuracy' or 'loss'")
        if buffer_size < 1 or batch_size < 1:
            raise ValueError("buffer_size and batch_size must be >= 1")
        token = resolve_token(token, token_file)
        self.job_id = job_id
        self.metric = metric
        self.instance = uuid.uuid4().hex
        self._spec = pb.JobSpec(
            job_id=job_id,
            name=name,
            metric=pb.LOSS if metric == "loss" else pb.ACCURACY,
            bytes_per_iteration=bytes_per_iteration,
            final_iteration=final_iteration,
            workers=[
                pb.Worker(
                    rank=w.rank,
                    address=w.address,
                    host=w.host,
                    flows=[
                        intent_pb2.Flow(
                            src=f.src, dst=f.dst, protocol=f.protocol, src_port=f.src_port, dst_port=f.dst_port
                        )
                        for f in w.flows
                    ],
                )
                for w in workers
            ],
        )
        self._register, self._replace, self._worker = register, replace, worker
        self._on_ack = on_ack
        self._ranks = {w.rank for w in workers}
        self._batch, self._timeout = batch_size, rpc_timeout_s
        self._b0, self._bmax, self._finish_timeout = backoff_initial_s, backoff_max_s, finish_timeout_s
        # The channel reconnects as fast as our own backoff, not gRPC's default (up to 2 minutes).
        self._client = CoordinatorClient(
            coordinator,
            token=token,
            timeout_s=rpc_timeout_s,
            tls=tls,
            reconnect_backoff_s=(backoff_initial_s, backoff_max_s),
        )
        self._cv = threading.Condition()
        self._buf: deque[tuple[int, pb.IterationReport]] = deque(maxlen=buffer_size)
        self._seq = itertools.count(1)
        self._last_iter: dict[int, int] = {}
        self._closing = False
        self._registered = not register
        self._connected = False
        self._sent = self._dups = self._dropped = self._rejected = self._failures = 0
        self._last_error = ""
        self._refusal = ""  # why the coordinator refused the registration ("" unless it did)
        self._thread = threading.Thread(target=self._run, name=f"mlfc-agent-{job_id}", daemon=True)
        self._started = False

    # -- training-loop API ----------------------------------------------------------------------
    def start(self) -> Agent:
        if not self._started:
            self._started = True
            self._thread.start()
        return self

    def report(
        self,
        iteration: int,
        metric: float | None = None,
        *,
        worker: int | None = None,
        compute_s: float = 0.0,
        comm_s: float = 0.0,
        bytes: int = 0,
        timestamp: float | None = None,
    ) -> None:
        """Queue one completed iteration of one worker. Never blocks; raises ValueError on bad values."""
        w = self._worker if worker is None else worker
        if isinstance(iteration, bool) or not isinstance(iteration, int) or not 0 <= iteration <= MAX_REPORT_ITERATION:
            raise ValueError(f"iteration={iteration!r} must be an integer in 0..{MAX_REPORT_ITERATION}")
        final = self._spec.final_iteration
        if final and iteration > final:
            raise ValueError(f"iteration={iteration} is past the job's final_iteration {final}")
        if self._ranks and w not in self._ranks:
            raise ValueError(f"worker={w} is not one of the registered workers {sorted(self._ranks)}")
        if metric is not None:
            metric = float(metric)
            if not math.isfinite(metric):
                raise ValueError(f"metric={metric} must be a finite number")
            if self.metric == "accuracy" and not 0.0 <= metric <= 1.0:
                raise ValueError(f"accuracy={metric} outside [0, 1] (report a fraction, not a percentage)")
        for label, v in (("compute_s", compute_s), ("comm_s", comm_s)):
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{label}={v} must be a finite number >= 0")
        if bytes < 0:
            raise ValueError(f"bytes={bytes} must be >= 0")
        r = pb.IterationReport(
            job_id=self.job_id,
            worker=w,
            iteration=iteration,
            compute_seconds=compute_s,
            comm_seconds=comm_s,
            bytes=bytes,
            timestamp=time.time() if timestamp is None else timestamp,
        )
        if metric is not None:
            r.metric = metric
        with self._cv:
            last = self._last_iter.get(w, -1)
            if iteration <= last:
                raise ValueError(f"iteration {iteration} of worker {w} does not increase (last {last})")
            if last >= 0 and iteration - last > MAX_ITERATION_JUMP:
                raise ValueError(
                    f"iteration {iteration} of worker {w} jumps {iteration - last} ahead of its last ({last}); "
                    f"at most {MAX_ITERATION_JUMP}"
                )
            self._last_iter[w] = iteration
            if len(self._buf) == self._buf.maxlen:
                self._dropped += 1
            self._buf.append((next(self._seq), r))
            self._cv.notify_all()
        if not self._started:
            self.start()

    def wait_registered(self, timeout: float | None = None) -> bool:
        """Start and wait until the coordinator accepted the registration: True; False on timeout (e.g. it is
        unreachable: the agent keeps trying). RegistrationRefused if the coordinator refused it (e.g. the job id
        is another agent's): the agent keeps retrying in the background, so the caller decides whether to stop."""
        self.start()
        with self._cv:
            self._cv.wait_for(lambda: self._registered or bool(self._refusal) or self._closing, timeout)
            if not self._registered and self._refusal:
                raise RegistrationRefused(f"job {self.job_id}: registration refused: {self._refusal}")
            return self._registered

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued report is committed (or dropped); False on timeout."""
        self.start()
        with self._cv:
            return self._cv.wait_for(lambda: not self._buf, timeout)

    def finish(self, reason: str = "", timeout: float | None = None) -> bool:
        """Flush, tell the coordinator the job finished (if this agent registered it), stop. True if all
        reports were delivered and the coordinator acknowledged the finish."""
        timeout = self._finish_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        ok = self.flush(timeout) if self._started else True
        if ok and self._register and self._started:
            with self._cv:  # a job that ends before its registration went through must still be finished
                left = max(0.0, deadline - time.monotonic())
                ok = self._cv.wait_for(lambda: self._registered or bool(self._refusal), left) and self._registered
        if ok and self._register and self._registered:
            try:
                remaining = max(0.1, deadline - time.monotonic())
                self._client.finish(pb.FinishRequest(job_id=self.job_id, reason=reason), timeout_s=remaining)
            except grpc.RpcError as e:
                self._note_error(e)
                ok = False
        self.close()
        return ok

    def close(self) -> None:
        """Stop the background thread without flushing."""
        with self._cv:
            self._closing = True
            self._cv.notify_all()
        if self._started:
            self._thread.join(timeout=self._timeout + 1)
        self._client.close()

    def stats(self) -> AgentStats:
        with self._cv:
            return AgentStats(
                len(self._buf),
                self._sent,
                self._dups,
                self._dropped,
                self._rejected,
                self._registered,
                self._connected,
                self._failures,
                self._last_error,
            )

    def __enter__(self) -> Agent:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        # An exception's text can be long; the coordinator refuses a reason over MAX_REASON characters.
        self.finish(f"failed: {exc_type.__name__}: {exc}"[:MAX_REASON] if exc_type else "")

    # -- background sender ----------------------------------------------------------------------
    def _note_error(self, e: grpc.RpcError) -> grpc.StatusCode | None:
        code = e.code() if hasattr(e, "code") else None
        details = e.details() if hasattr(e, "details") else str(e)
        with self._cv:
            self._last_error = f"{getattr(code, 'name', code)}: {details}"
            self._failures += 1
            if code in _TRANSIENT:
                self._connected = False
        return code

    def _sleep(self, seconds: float) -> None:
        with self._cv:
            self._cv.wait_for(lambda: self._closing, seconds * random.uniform(0.8, 1.2))

    def _do_register(self) -> bool:
        try:
            self._client.register(pb.RegisterRequest(job=self._spec, instance=self.instance, replace=self._replace))
        except grpc.RpcError as e:
            code = self._note_error(e)
            if code not in _TRANSIENT:
                log.error("job %d: registration refused: %s", self.job_id, self._last_error)
                with self._cv:
                    self._refusal = self._last_error
                    self._cv.notify_all()
            return False
        with self._cv:
            self._registered = self._connected = True
            self._refusal = ""
            self._cv.notify_all()
        return True

    def _run(self) -> None:
        backoff = self._b0
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._closing or bool(self._buf) or not self._registered)
                if self._closing:
                    return
            if not self._registered:
                if self._do_register():
                    backoff = self._b0
                else:
                    self._sleep(backoff)
                    backoff = min(backoff * 2, self._bmax)
                continue
            with self._cv:
                batch = list(itertools.islice(self._buf, self._batch))
            if not batch:
                continue
            code = self._send(batch)
            if code is None:
                backoff = self._b0
                continue
            if code == grpc.StatusCode.NOT_FOUND and self._register:
                with self._cv:
                    self._registered = False  # e.g. a coordinator started on a fresh database
            self._sleep(backoff)
            backoff = min(backoff * 2, self._bmax)

    def _send(self, batch: list[tuple[int, pb.IterationReport]]) -> grpc.StatusCode | None:
        """Send one batch; on a validation error retry its reports one by one and drop only the bad ones."""
        try:
            ack = self._client.report(pb.ReportBatch(reports=[r for _, r in batch]))
        except grpc.RpcError as e:
            code = self._note_error(e)
            if code not in _REJECTED:
                return code
            if len(batch) == 1:
                log.warning("job %d: coordinator rejected a report: %s", self.job_id, self._last_error)
                self._ack(batch[0][0], rejected=1)
                return None
            for item in batch:
                code = self._send([item])
                if code is not None:
                    return code
            return None
        self._ack(batch[-1][0], ack.accepted, ack.duplicates)
        return None

    def _ack(self, seq: int, accepted: int = 0, duplicates: int = 0, rejected: int = 0) -> None:
        done: list[pb.IterationReport] = []
        with self._cv:
            while self._buf and self._buf[0][0] <= seq:
                done.append(self._buf.popleft()[1])
            self._sent += accepted
            self._dups += duplicates
            self._rejected += rejected
            self._connected = True
            self._cv.notify_all()
        if self._on_ack is not None and done:
            try:
                self._on_ack(done, rejected == 0)
            except Exception:  # an audit hook must not stop the reporting
                log.exception("job %d: on_ack failed", self.job_id)
