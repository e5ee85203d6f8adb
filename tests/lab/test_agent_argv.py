"""lab.jobs.agent_argv, the one mlfc-agent command line of the lab's jobs: what the agent's parser reads."""

from __future__ import annotations

from pathlib import Path

from mlfc.hosts.agent_cli import build_parser
from mlfc.lab.jobs import agent_argv


def _parsed(argv: list[str]):
    assert argv[-1] == "--", "the wrapped command follows"
    return build_parser().parse_args([*argv[1:], "python", "train.py"])


def test_rank_0_registers_the_job_with_every_worker() -> None:
    argv = agent_argv(7, "127.0.0.1:1", Path("/t"), 0, ["10.0.0.1", "10.0.0.2"], 99, bytes_per_iteration=5000)
    a = _parsed(argv)
    assert argv[0].endswith("mlfc-agent")
    assert (a.job, a.coordinator, a.token_file, a.final_iteration, a.report_worker) == (7, "127.0.0.1:1", "/t", 99, 0)
    assert a.worker == [(0, "10.0.0.1"), (1, "10.0.0.2")]
    assert a.bytes_per_iteration == 5000
    assert not a.no_register and not a.replace and a.ack_log is None
    assert a.command == ["--", "python", "train.py"]


def test_other_ranks_only_report_and_replace_is_rank_0s() -> None:
    a = _parsed(agent_argv(1, "c:2", Path("/t"), 1, ["a", "b"], 9, ack_log=Path("/acks"), replace=True))
    assert a.no_register and not a.replace and a.worker == []
    assert (a.report_worker, a.ack_log, a.bytes_per_iteration) == (1, "/acks", 0)
    r0 = _parsed(agent_argv(1, "c:2", Path("/t"), 0, ["a", "b"], 9, replace=True))
    assert r0.replace and not r0.no_register
