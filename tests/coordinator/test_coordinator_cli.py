"""``mlfc-coordinator explain/status``: offline from the database and live over gRPC."""

from __future__ import annotations

import json
import math
import time

import pytest
from coord_helpers import MD, TOKEN, decided, register, report, stub_for, wait_until

from mlfc.coordinator import cli
from mlfc.coordinator.service import check_listen
from mlfc.policy import maif
from mlfc.proto import coordinator_pb2 as pb


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
    assert check_listen("0.0.0.0:50061", allow_remote=True)[0] == "0.0.0.0"
    with pytest.raises(ValueError, match="HOST:PORT"):
        check_listen("127.0.0.1")
