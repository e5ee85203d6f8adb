"""A client of a running coordinator for operators and experiment runners (the training side uses
mlfc.hosts.agent): what it knows of jobs, workers and decisions, over its gRPC API.

    with CoordinatorClient("127.0.0.1:50061", token_file="token") as c:
        c.wait_ready(10)
        c.worker_progress()     # {job: {worker: highest iteration committed}}
        c.jobs()                # [JobInfo]: state, reason, per-worker iterations and report counts
        c.decisions(after=0)    # [DecisionRecord]: seq, created_at, applied_at, generation, intent, ranks
        c.status(); c.explain(7)

Calls raise grpc.RpcError (e.g. UNAVAILABLE while the coordinator is down, UNAUTHENTICATED for a wrong token).
"""

from __future__ import annotations

import time
from pathlib import Path

import grpc

from mlfc.proto import coordinator_pb2 as pb
from mlfc.proto import coordinator_pb2_grpc

from .api import DEFAULT_ADDRESS, TOKEN_HEADER, resolve_token


class CoordinatorClient:
    def __init__(
        self,
        address: str = DEFAULT_ADDRESS,
        *,
        token: str | None = None,
        token_file: str | Path | None = None,
        timeout_s: float = 5.0,
    ) -> None:
        token = resolve_token(token, token_file)
        self.address = address
        self.timeout_s = timeout_s
        self._metadata = ((TOKEN_HEADER, token),)
        self._channel = grpc.insecure_channel(address)
        self._stub = coordinator_pb2_grpc.CoordinatorStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> CoordinatorClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method, request):  # type: ignore[no-untyped-def]
        return method(request, metadata=self._metadata, timeout=self.timeout_s)

    def wait_ready(self, timeout_s: float = 10.0) -> bool:
        """True once the coordinator answers (with this token); False if it did not within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self._stub.Status(pb.StatusRequest(), metadata=self._metadata, timeout=1.0, wait_for_ready=True)
                return True
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.UNAUTHENTICATED:
                    raise
                if time.monotonic() > deadline:
                    return False
            time.sleep(0.05)

    def status(self) -> pb.StatusReply:
        return self._call(self._stub.Status, pb.StatusRequest())

    def explain(self, job_id: int) -> pb.JobExplanation:
        return self._call(self._stub.Explain, pb.ExplainRequest(job_id=job_id))

    def jobs(self) -> list[pb.JobInfo]:
        return list(self._call(self._stub.ListJobs, pb.ListJobsRequest()).jobs)

    def worker_progress(self) -> dict[int, dict[int, int]]:
        """{job: {worker: highest iteration committed}} of every registered job (workers without reports absent)."""
        return {j.job_id: {w.rank: w.last_iteration for w in j.workers} for j in self.jobs()}

    def decisions(self, after: int = 0, limit: int = 1000) -> list[pb.DecisionRecord]:
        """Decisions with ``seq > after``, oldest first, at most ``limit`` (the coordinator keeps the last 10,000)."""
        return list(self._call(self._stub.ListDecisions, pb.ListDecisionsRequest(after=after, limit=limit)).decisions)

    def all_decisions(self) -> list[pb.DecisionRecord]:
        """Every decision the coordinator keeps, oldest first (paged)."""
        out: list[pb.DecisionRecord] = []
        while page := self.decisions(after=out[-1].seq if out else 0, limit=1000):
            out += page
        return out
