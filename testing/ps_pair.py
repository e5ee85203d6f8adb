"""Two workers and a parameter server on loopback with tiny chunks, for tests of the PS path: the server
applies plain SGD (lr 1), so a worker's parameters after iteration k are minus the sum of the means."""

from __future__ import annotations

import threading

import numpy as np

from mlfc.hosts.training.client import ClientConfig, WorkerClient
from mlfc.hosts.training.server import ServerConfig, TrainingServer
from mlfc.hosts.transport import SenderConfig, bind_shim_socket
from mlfc.testing.lossy import LossySocket

CHUNK = 16  # bytes: 4 float32 per chunk, so a 40-element tensor is 10 chunks
SMALL = SenderConfig(chunk_size=CHUNK)


def small_server(params: list[np.ndarray], workers: int = 2) -> TrainingServer:
    def apply(_it: int, means: list[np.ndarray]) -> None:  # plain SGD, lr 1
        for p, m in zip(params, means, strict=True):
            p -= m

    cfg = ServerConfig(job=5, workers=workers, port=0, tx_port_base=None, deadline=0.005, timeout=20, sender=SMALL)
    return TrainingServer(cfg, parameters=params, apply=apply, emit=None)


def small_client(srv: TrainingServer, rank: int, push_sock=None, **kw) -> WorkerClient:  # type: ignore[no-untyped-def]
    cfg = ClientConfig(job=5, rank=rank, ps=srv.address, rx_port=0, tx_port=0, deadline=0.005, timeout=20,
                       connect_timeout=20, sender=SMALL, **kw)  # fmt: skip
    return WorkerClient(cfg, push_sock=push_sock)


def first_push_lossy() -> LossySocket:
    """A push socket that loses the first transmission of every chunk of iteration 0's tensor 0."""
    return LossySocket(bind_shim_socket("127.0.0.1"), lambda h, attempt: h.iteration == 0 and h.tensor_id == 0
                       and attempt == 0)  # fmt: skip


def push_twice(srv: TrainingServer, grads: list[np.ndarray], socks: list, **client_kw) -> dict[int, dict]:  # type: ignore[type-arg]
    """Each rank pushes its gradient (one tensor) for iterations 0 and 1 through ``socks[rank]`` (None: a
    plain socket); per rank: push{i} (PushResult), params{i} (after iteration i), stats{i} (its STATS)."""
    ps = threading.Thread(target=lambda: (srv.accept(), srv.run(2)), daemon=True)
    ps.start()
    results: dict[int, dict] = {}

    def worker(rank: int) -> None:
        g = grads[rank]
        with small_client(srv, rank, socks[rank], **client_kw) as c:
            c.connect([g.size])
            assert c.initial_parameters().tolist() == [0.0] * g.size
            out = {}
            for it in range(2):
                c.start_iteration(g.nbytes)
                out[f"push{it}"] = c.push(it, 0, g, layer_index=0, num_layers=1)
                out[f"params{it}"] = np.frombuffer(c.wait(it, 0).data, np.float32).copy()
                out[f"stats{it}"] = c.stats(it)
            results[rank] = out

    threads = [threading.Thread(target=worker, args=(rank,)) for rank in range(len(grads))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    ps.join(timeout=30)
    assert set(results) == set(range(len(grads))), "a worker did not finish"
    return results
