"""A restarted aggregator (aggregate mode, the DDP hook's) cannot resume the job it lost: it keeps no
gradients and the ranks may be in different buckets of a step. With a roster file (``--checkpoint`` /
``roster_file``) it tells the lost job's ranks at once (their waits raise JobAborted with the reason, in
seconds rather than at their timeout) and admits restarted ranks as a new run; the file is gone once a job
ended. Without one the ranks fail at their bucket timeout. Real aggregator processes killed with SIGKILL,
loopback, numpy buckets (no torch)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from mlfc.hosts.training.client import ClientConfig, JobAborted, WorkerClient, WorkerError
from mlfc.hosts.transport import bind_shim_socket

JOB = 8


def _free_shim_port() -> int:
    s = bind_shim_socket("127.0.0.1", 0)
    port = s.getsockname()[1]
    s.close()
    return port


def _aggregator(port: int, roster: Path | None, log: Path) -> subprocess.Popen:
    """The aggregator as its own process (``mlfc-train ps --mode aggregate``), its stderr in ``log``."""
    argv = [sys.executable, "-m", "mlfc.hosts.training", "ps", "--mode", "aggregate", "--job", str(JOB),
            "--workers", "2", "--port", str(port), "--tx-port-base", "0", "--timeout", "20"]  # fmt: skip
    if roster is not None:
        argv += ["--checkpoint", str(roster)]
    with log.open("w") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
    # bound before anything else in this test takes a shim port (there are 256: a client could take its port)
    end = time.monotonic() + 30
    while "aggregating on" not in log.read_text():
        assert proc.poll() is None and time.monotonic() < end, log.read_text()
        time.sleep(0.05)
    return proc


def _ranks(port: int, timeout: float) -> list[WorkerClient]:
    clients = [WorkerClient(ClientConfig(job=JOB, rank=r, ps=("127.0.0.1", port), rx_port=0, tx_port=0,
                                         mode="aggregate", timeout=timeout, connect_timeout=20))
               for r in (0, 1)]  # fmt: skip
    threads = [threading.Thread(target=c.connect, args=([3],), daemon=True) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=40)
    assert all(c.welcome.get("workers") == 2 for c in clients), "the ranks were not admitted"
    return clients


def _step(clients: list[WorkerClient], it: int) -> None:
    """One DDP step of one bucket: each rank pushes, each gets the mean."""
    for r, c in enumerate(clients):
        c.push(it, 0, np.full(12, r + 1, np.float32), layer_index=0, num_layers=1)
    for c in clients:
        assert np.frombuffer(c.wait(it, 0).data, np.float32).tolist() == [1.5] * 12


def _kill_mid_step(agg: subprocess.Popen, clients: list[WorkerClient]) -> None:
    """Rank 0 pushed step 1's bucket, rank 1 not yet: the aggregator dies holding half a step."""
    clients[0].push(1, 0, np.full(12, 1, np.float32), layer_index=0, num_layers=1)
    agg.kill()
    agg.wait(timeout=10)


@pytest.mark.timeout(180)
def test_a_restarted_aggregator_tells_the_lost_ranks_at_once_and_admits_restarted_ones(tmp_path: Path) -> None:
    port, roster = _free_shim_port(), tmp_path / "aggregator.roster"
    agg = _aggregator(port, roster, tmp_path / "agg.1.err")
    agg2 = None
    try:
        clients = _ranks(port, timeout=30)
        _step(clients, 0)
        assert roster.exists(), "the admitted ranks were not written down"
        _kill_mid_step(agg, clients)
        agg2 = _aggregator(port, roster, tmp_path / "agg.2.err")
        t0 = time.monotonic()
        for c in clients:
            with pytest.raises(JobAborted, match=rf"aggregator of job {JOB} was restarted .* start the DDP ranks"):
                c.wait(1, 0)
        assert time.monotonic() - t0 < 10, "the ranks waited for their timeout"
        for c in clients:
            c.close()
        # torchrun restarts the ranks: the restarted aggregator runs them as a new job, which ends cleanly
        fresh = _ranks(port, timeout=30)
        _step(fresh, 0)
        for c in fresh:
            c.bye()
            c.close()
        assert agg2.wait(timeout=30) == 0, (tmp_path / "agg.2.err").read_text()
        assert not roster.exists(), "a job that ended left its roster: a restart would tell ranks that are gone"
    finally:
        for p in (agg, agg2):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    assert "telling the 2 rank(s) of the previous aggregator" in (tmp_path / "agg.2.err").read_text()


@pytest.mark.timeout(120)
def test_without_a_roster_the_lost_ranks_fail_at_their_bucket_timeout(tmp_path: Path) -> None:
    port = _free_shim_port()
    agg = _aggregator(port, None, tmp_path / "agg.1.err")
    agg2 = None
    try:
        clients = _ranks(port, timeout=3)
        _step(clients, 0)
        _kill_mid_step(agg, clients)
        agg2 = _aggregator(port, None, tmp_path / "agg.2.err")
        clients[1].push(1, 0, np.full(12, 2, np.float32), layer_index=0, num_layers=1)  # taken by the new one
        for c in clients:
            with pytest.raises(
                WorkerError, match="tensor 0 of iteration 1 not received from the aggregator within 3 s"
            ):
                c.wait(1, 0)
            c.close()
    finally:
        for p in (agg, agg2):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    assert "did not say HELLO to this aggregator" in (tmp_path / "agg.2.err").read_text()


def test_a_roster_of_another_job_is_refused(tmp_path: Path) -> None:
    from mlfc.hosts.training.server import ServerConfig, TrainingError, TrainingServer

    roster = tmp_path / "aggregator.roster"
    roster.write_text('{"job": 3, "workers": 2, "ranks": {}}')
    cfg = ServerConfig(job=JOB, workers=2, port=0, mode="aggregate", tx_port_base=None, roster_file=str(roster))
    with TrainingServer(cfg, emit=None) as srv, pytest.raises(TrainingError, match="is of job 3"):
        srv.accept()
    with pytest.raises(ValueError, match="aggregate mode"):
        ServerConfig(job=JOB, workers=2, roster_file=str(roster))
