"""The client of a running coordinator's gRPC API: the one place that builds its channel, stub and token
metadata (tests/unit/test_one_client_per_api.py keeps it so). Operators and experiment runners ask it what
the coordinator knows of jobs, workers and decisions; the training agent (mlfc.hosts.agent) and the bench send
Register/Report/Finish through it.

    with CoordinatorClient("127.0.0.1:50061", token_file="token") as c:
        c.wait_ready(10)
        c.worker_progress()     # {job: {worker: highest iteration committed}}
        c.jobs()                # [JobInfo]: state, reason, per-worker iterations and report counts
        c.decisions(after=0)    # [DecisionRecord]: seq, created_at, applied_at, generation, intent, ranks
        c.status(); c.explain(7)

Calls raise grpc.RpcError (e.g. UNAVAILABLE while the coordinator is down, UNAUTHENTICATED for a wrong token;
mlfc.tls.TlsHandshakeError, an UNAVAILABLE one, naming why a TLS connection failed).
"""

from __future__ import annotations

import time
from pathlib import Path

import grpc

from mlfc.grpc_client import GrpcClient
from mlfc.proto import coordinator_pb2 as pb
from mlfc.proto import coordinator_pb2_grpc
from mlfc.tls import TlsConfig, TlsHandshakeError

from .api import DEFAULT_ADDRESS, TOKEN_HEADER, resolve_token


class CoordinatorClient(GrpcClient):
    def __init__(
        self,
        address: str = DEFAULT_ADDRESS,
        *,
        token: str | None = None,
        token_file: str | Path | None = None,
        timeout_s: float = 5.0,
        tls: TlsConfig | None = None,
        reconnect_backoff_s: tuple[float, float] | None = None,
    ) -> None:
        """``timeout_s`` is every call's deadline unless the call names its own. ``reconnect_backoff_s`` =
        (initial, max) bounds gRPC's own reconnect backoff, which would otherwise grow to minutes while the
        coordinator is down. ``tls``: the coordinator serves TLS (the token then travels inside it)."""
        token = resolve_token(token, token_file)
        metadata = ((TOKEN_HEADER, token),)
        super().__init__(
            address, timeout_s=timeout_s, tls=tls, metadata=metadata, reconnect_backoff_s=reconnect_backoff_s
        )
        self._stub = coordinator_pb2_grpc.CoordinatorStub(self._channel)

    # -- the training side (mlfc.hosts.agent, bench/coordinator_bench.py) -------------------------------
    def register(self, request: pb.RegisterRequest, timeout_s: float | None = None) -> pb.RegisterReply:
        return self._call(self._stub.Register, request, timeout_s)

    def report(self, batch: pb.ReportBatch, timeout_s: float | None = None) -> pb.ReportAck:
        return self._call(self._stub.Report, batch, timeout_s)

    def finish(self, request: pb.FinishRequest, timeout_s: float | None = None) -> pb.FinishReply:
        return self._call(self._stub.Finish, request, timeout_s)

    # -- what the coordinator knows ----------------------------------------------------------------------

    def wait_ready(self, timeout_s: float = 10.0) -> bool:
        """True once the coordinator answers (with this token); False if it did not within ``timeout_s``.
        Raises UNAUTHENTICATED at once, a TLS client's TlsHandshakeError at once (certificates do not change
        by waiting), and a plain-text client's (the server may serve TLS) if it lasted to the end."""
        deadline = time.monotonic() + timeout_s
        while True:
            last: TlsHandshakeError | None = None
            try:
                # fail fast, not wait_for_ready: a failed connection then says why (a TLS handshake)
                self._call(self._stub.Status, pb.StatusRequest(), 1.0)
                return True
            except TlsHandshakeError as e:
                if self.tls is not None:
                    raise
                last = e
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.UNAUTHENTICATED:
                    raise
            if time.monotonic() > deadline:
                if last is not None:
                    raise last
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
