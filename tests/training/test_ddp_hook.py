"""The DDP hook's failure modes as a user meets them (issue 29 item 1): needs torch; skips without it."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mlfc.hosts.transport import SenderConfig, bind_shim_socket

if importlib.util.find_spec("torch") is None:
    pytest.skip("torch==2.13.0 not installed: `make install` brings the train extra", allow_module_level=True)

HERE = Path(__file__).resolve().parent


def _free_port() -> int:
    s = bind_shim_socket("127.0.0.1")  # a free port (the shim range is just a free range for gloo's TCP)
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture
def group():
    """A one-rank gloo group in this process, and a DDP model on it."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)
    try:
        torch.manual_seed(0)
        yield DistributedDataParallel(torch.nn.Linear(8, 2))
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_three_ranks_against_an_aggregator_for_two_fail_on_every_rank_before_any_step(tmp_path: Path):
    """The late-extra-rank race: ranks 0 and 1 reach the aggregator first (it admits them), rank 2 a second later."""
    out = tmp_path / "rank"
    cmd = [sys.executable, str(HERE / "ddp_ranks.py"), "--world", "3", "--workers", "2", "--gloo-port",
           str(_free_port()), "--ps-port", str(_free_port()), "--late", "1.0", "--out", str(out)]  # fmt: skip
    procs = [subprocess.Popen([*cmd, "--rank", str(r)], stderr=subprocess.PIPE, text=True) for r in range(3)]
    errs = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errs
    recs = [json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in range(3)]
    print(recs)
    assert [r["steps"] for r in recs] == [0, 0, 0], "a step was taken on a mean over 2 of 3 ranks"
    for r in recs[:2]:
        assert "serves 2 workers, the DDP group has 3 ranks" in r["error"], r
        assert r["seconds"] < 10, r
    # Rank 2 arrives either while the aggregator still runs (refused by rank) or after ranks 0 and 1 ended
    # it (its HELLO is never admitted): both are clear errors naming the group, before any step.
    late = recs[2]["error"]
    assert "refused worker 2: rank 2 outside 0..1" in late or "did not admit this worker" in late, recs[2]
    assert "DDP group of 3" in late, recs[2]
    assert recs[2]["seconds"] < 10, recs[2]
    assert "the DDP group has 3 ranks" in recs[0]["aggregator_error"]
    assert recs[0]["aggregated_chunks"] == 0


def test_no_aggregator_listening_fails_within_the_hooks_timeout(group):
    from mlfc.hosts.training.client import WorkerError
    from mlfc.hosts.training.ddp import mlfc_comm_hook

    t0 = time.monotonic()
    # The port stays bound (by a socket that never answers) so no other test's aggregator can take it meanwhile:
    # a port freed first was taken once in a full run, and an aggregator answered there.
    silent = bind_shim_socket("127.0.0.1")
    try:
        with pytest.raises(WorkerError, match=r"no aggregator answering at 127\.0\.0\.1:\d+ within 1 s"):
            mlfc_comm_hook(group, job=1, ps=("127.0.0.1", silent.getsockname()[1]), timeout=1.0)
    finally:
        silent.close()
    assert time.monotonic() - t0 < 4


def test_the_default_connect_timeout_is_seconds_not_a_minute():
    import inspect

    from mlfc.hosts.training.ddp import mlfc_comm_hook

    default = inspect.signature(mlfc_comm_hook).parameters["timeout"].default
    assert 1 <= default <= 10


def test_rank_comes_from_the_process_group_and_ps_may_be_host_port(group):
    import torch

    from mlfc.hosts.training.ddp import mlfc_comm_hook, serve_aggregator

    port = _free_port()
    agg = serve_aggregator(1, 1, port=port, timeout=20)
    hook = mlfc_comm_hook(group, job=1, ps=f"127.0.0.1:{port}")
    assert hook.client.cfg.rank == 0
    group(torch.ones(2, 8)).sum().backward()
    hook.close()
    agg.join(timeout=20)
    assert hook.iteration == 1


def test_an_error_in_the_hook_reaches_the_user_with_mlfcs_message(group):
    import torch

    from mlfc.hosts.training.client import ClientConfig
    from mlfc.hosts.training.ddp import mlfc_comm_hook, serve_aggregator

    port = _free_port()
    agg = serve_aggregator(1, 1, port=port, timeout=20)
    cfg = ClientConfig(job=1, rank=0, ps=("127.0.0.1", port), timeout=2, sender=SenderConfig(peer_timeout=1.0))
    hook = mlfc_comm_hook(group, job=1, ps=("127.0.0.1", port), client_config=cfg)
    group(torch.ones(2, 8)).sum().backward()  # one good step
    agg.server.rx.close()  # the aggregator vanishes
    with pytest.raises(RuntimeError) as err:
        group(torch.ones(2, 8)).sum().backward()
    assert "Unable to cast" not in str(err.value)
    assert "no feedback from 127.0.0.1" in str(err.value) or "not received from the aggregator" in str(err.value)
    assert hook.error is not None
    hook.close()
    with pytest.raises(Exception):  # noqa: B017 - whatever ended it: the thread is done
        agg.join(timeout=20)
