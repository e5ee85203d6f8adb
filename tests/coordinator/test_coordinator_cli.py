"""``mlfc-coordinator explain/status``: offline from the database and live over gRPC."""

from __future__ import annotations

import itertools
import json
import math
import time
from pathlib import Path

import grpc
import pytest
from coord_helpers import MD, TOKEN, decided, register, report, stub_for, wait_until

from mlfc.coordinator import cli
from mlfc.coordinator.client import CoordinatorClient
from mlfc.policy import maif
from mlfc.proto import coordinator_pb2 as pb
from mlfc.tls import TlsConfig, check_listen


def _populate(make_coordinator, controller, tmp_path):  # type: ignore[no-untyped-def]
    c = make_coordinator(controller=controller.address)
    stub = stub_for(c.address)
    register(stub, 1)
    register(stub, 2)
    register(stub, 3)
    stub.Report(
        pb.ReportBatch(reports=[report(1, i, 0.85 - 0.75 * math.exp(-0.08 * i)) for i in range(200)]), metadata=MD
    )
    stub.Report(pb.ReportBatch(reports=[report(2, i, 0.95 - 0.9 * (i + 1) ** -0.35) for i in range(200)]), metadata=MD)
    # Wait for the decision that used every report: one taken after job 1's reports and before job 2's were
    # fitted already gives these classes (job 2 then scores by the exploration prior, like job 3).
    assert wait_until(lambda: decided(stub, controller, {1: 200, 2: 200, 3: 0}))
    assert controller.classes() == {2: 6, 3: 5, 1: 2}
    token = tmp_path / "token"
    token.write_text(TOKEN)
    return c, token


@pytest.fixture
def populated(make_coordinator, controller, tmp_path):  # type: ignore[no-untyped-def]
    return _populate(make_coordinator, controller, tmp_path)


def test_explain_offline_from_db(populated, capsys) -> None:  # type: ignore[no-untyped-def]
    c, _ = populated
    assert cli.main(["explain", "1", "--db", c.store.path]) == 0
    out = capsys.readouterr().out
    assert "job 1 'job1': active, rank 3 of 3 -> class 2" in out
    assert "fit: exp q(t) = 0.8" in out  # asymptote ~0.85
    assert "predicted gain:" in out and "plateaued" in out
    assert cli.main(["explain", "3", "--db", c.store.path]) == 0
    assert "exploration prior" in capsys.readouterr().out


def test_explain_live_json_and_status(populated, capsys) -> None:  # type: ignore[no-untyped-def]
    c, token = populated
    assert cli.main(["explain", "2", "--coordinator", c.address, "--token-file", str(token), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["priority"] == 6 and data["rank"] == 1 and data["fit"]["model"] in ("power", "exp")
    assert cli.main(["status", "--coordinator", c.address, "--token-file", str(token)]) == 0
    out = capsys.readouterr().out
    assert out.count("-> class") == 3


def test_live_explanation_is_of_the_decision_that_used_the_reports(
    make_coordinator, controller, tmp_path, capsys, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """A loaded machine, made reproducible: fits of 200 points take 0.3 s, so the decision taken after job 1's
    reports and before job 2's were fitted stands a while, with the classes the fixture expects."""
    fit = maif.fit_arrays

    def slow_fit(t, q, min_points):  # type: ignore[no-untyped-def]
        if len(t) == 200:
            time.sleep(0.3)
        return fit(t, q, min_points)

    monkeypatch.setattr(maif, "fit_arrays", slow_fit)
    test_explain_live_json_and_status(_populate(make_coordinator, controller, tmp_path), capsys)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["explain", "77"], "NOT_FOUND: unknown job 77"),
        (["explain", "1", "--token-file", "/nonexistent"], "No such file"),
        (["explain", "1"], "give --db"),
    ],
)
def test_explain_errors(populated, capsys, args, needle) -> None:  # type: ignore[no-untyped-def]
    c, token = populated
    if "77" in args:
        args = [*args, "--coordinator", c.address, "--token-file", str(token)]
    elif "--token-file" in args:
        args = [*args, "--coordinator", c.address]
    assert cli.main(args) == 1
    assert needle in capsys.readouterr().err


def test_explain_unknown_job_offline(populated, capsys) -> None:  # type: ignore[no-untyped-def]
    c, _ = populated
    assert cli.main(["explain", "77", "--db", c.store.path]) == 1
    assert "unknown job 77" in capsys.readouterr().err
    assert cli.main(["explain", "1", "--db", "/nonexistent.sqlite"]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_listen_is_loopback_only_by_default() -> None:
    assert check_listen("127.0.0.1:50061") == ("127.0.0.1", 50061)
    assert check_listen("[::1]:1") == ("::1", 1)
    with pytest.raises(ValueError, match="not a loopback address"):
        check_listen("0.0.0.0:50061")
    with pytest.raises(ValueError, match="without TLS: --allow-remote needs --tls-cert"):
        check_listen("0.0.0.0:50061", allow_remote=True)
    tls = TlsConfig(cert=Path("c.crt"), key=Path("c.key"))
    assert check_listen("0.0.0.0:50061", allow_remote=True, tls=tls)[0] == "0.0.0.0"
    with pytest.raises(ValueError, match="HOST:PORT"):
        check_listen("127.0.0.1")


def test_client_lists_jobs_workers_and_decisions(populated, controller) -> None:  # type: ignore[no-untyped-def]
    c, token = populated
    stub = stub_for(c.address)
    stub.Report(pb.ReportBatch(reports=[report(3, 0, 0.2)]), metadata=MD)
    stub.Finish(pb.FinishRequest(job_id=3, reason="pruned"), metadata=MD)
    with CoordinatorClient(c.address, token_file=token) as client:
        assert client.wait_ready(5)
        jobs = {j.job_id: j for j in client.jobs()}
        assert [(j.state, j.reports, j.metric_points) for j in jobs.values()] == [
            ("active", 200, 200),
            ("active", 200, 200),
            ("finished", 1, 1),
        ]
        assert jobs[3].reason == "pruned" and jobs[3].changed_at >= jobs[3].registered_at > 0
        assert [(w.rank, w.last_iteration, w.reports) for w in jobs[1].workers] == [(0, 199, 200)]
        assert client.worker_progress() == {1: {0: 199}, 2: {0: 199}, 3: {0: 0}}
        assert wait_until(lambda: decided(stub, controller, {1: 200, 2: 200}))
        decisions = client.all_decisions()
        assert [d.seq for d in decisions] == list(range(1, len(decisions) + 1))
        assert all(a.created_at <= b.created_at for a, b in itertools.pairwise(decisions))
        last = decisions[-1]
        assert last.intent == controller.latest() and last.applied_at >= last.created_at and last.generation > 0
        assert [(j.job_id, j.rank, j.priority) for j in last.jobs] == [(2, 1, 6), (1, 2, 2)]  # job 3 has finished
        assert [d.seq for d in client.decisions(after=last.seq - 1)] == [last.seq]
        with pytest.raises(grpc.RpcError) as e:
            client.decisions(limit=10_001)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "limit=10001" in e.value.details()
    with CoordinatorClient(c.address, token="wrong") as bad, pytest.raises(grpc.RpcError) as e:
        bad.wait_ready(5)
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_cli_jobs_and_decisions_live_and_offline(populated, capsys) -> None:  # type: ignore[no-untyped-def]
    c, token = populated
    live = ["--coordinator", c.address, "--token-file", str(token)]
    for source in (live, ["--db", c.store.path]):
        assert cli.main(["jobs", *source]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[0] == "job 1 'job1': active; w0@199 (200 reports)" and out[2] == "job 3 'job3': active; no reports"
        assert cli.main(["decisions", *source, "--json"]) == 0
        assert '"seq": "1"' in capsys.readouterr().out
        assert cli.main(["decisions", *source, "--after", "1"]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines and all(line.startswith("decision ") for line in lines)
        assert "2->6 3->5 1->2 (plateau); applied as generation" in lines[-1]
