"""A ``DistributedDataParallel`` communication hook that exchanges DDP's gradient buckets through an mlfc
aggregator (the PS in aggregate mode) instead of gloo's allreduce. One call in an existing DDP script:

    ddp = DistributedDataParallel(model)                  # gloo process group as usual
    hook = mlfc_comm_hook(ddp, job=1, ps=("10.0.0.100", PS_PORT), bind="10.0.0.1")  # rank: the group's
    ...train as before...
    hook.close()                                          # BYE to the aggregator

Each bucket is pushed as one tagged tensor (job, iteration = DDP step, tensor id = bucket index), its
chunks' importance from the real gradient magnitudes and the bucket's layer position (bucket 0 holds the
last layers: position (n-1-index)/(n-1)); the aggregator averages each bucket over the workers with the
bounded-loss rule (``mlfc.policy.aggregation``) and sends the mean back, losslessly, to every rank, so
the replicas stay identical. With nothing lost the result equals allreduce's average (float tolerance).

The hook returns at once: a pusher thread sends buckets in order while backward goes on, a resolver
thread completes each bucket's future when its mean arrives. The gloo group still does everything else
(parameter broadcast at construction, buffers).

``serve_aggregator`` runs the aggregator in a thread of this process (what examples/ddp_digits.py does
on rank 0); ``mlfc-train ps --mode aggregate`` runs it as its own process.
"""

# No ``from __future__ import annotations`` here: register_comm_hook checks the hook's annotations are
# the real dist.GradBucket / torch.futures.Future classes, not strings.

import atexit
import queue
import threading
import weakref
from dataclasses import replace

import numpy as np
import torch
import torch.distributed as dist

from mlfc.hosts.training import protocol as proto
from mlfc.hosts.training.client import ClientConfig, PushResult, WorkerClient, WorkerError
from mlfc.hosts.training.server import ServerConfig, TrainingServer

_STOP = object()
CONNECT_TIMEOUT = 5.0  # s to find the aggregator and be admitted (the ranks reach the hook together)


def _unwrap(fut: torch.futures.Future) -> torch.Tensor:
    # DDP's C++ side reads a future's value as a Tensor: an exception set on it directly reaches the user as
    # "Unable to cast <message> to Tensor". Raised in a ``then`` callback it becomes the chained future's
    # error, and backward raises it with mlfc's message.
    return fut.value()


class MlfcHookState:
    """The hook's state: the worker's client, the step counter, the two comm threads."""

    def __init__(self, client: WorkerClient) -> None:
        self.client = client
        self.iteration = 0
        self.num_buckets = 1
        self.push = PushResult()
        self._to_push: queue.Queue = queue.Queue()
        self._to_resolve: queue.Queue = queue.Queue()
        self._error: BaseException | None = None
        self._closed = False
        self._pusher = threading.Thread(target=self._push_loop, name="mlfc-ddp-push", daemon=True)
        self._resolver = threading.Thread(target=self._resolve_loop, name="mlfc-ddp-resolve", daemon=True)
        self._pusher.start()
        self._resolver.start()

    def _push_loop(self) -> None:
        while (item := self._to_push.get()) is not _STOP:
            it, index, n, data, fut = item
            try:
                if self._error is not None:
                    raise self._error
                self.client.push(it, index, data, layer_index=max(0, n - 1 - index), num_layers=n, result=self.push)
            except BaseException as exc:
                self._error = self._error or exc
                fut.set_exception(exc)
                continue
            self._to_resolve.put((it, index, fut))
        self._to_resolve.put(_STOP)

    def _resolve_loop(self) -> None:
        while (item := self._to_resolve.get()) is not _STOP:
            it, index, fut = item
            try:
                d = self.client.wait(it, index)
                fut.set_result(torch.from_numpy(np.frombuffer(d.data, dtype=np.float32)))
            except BaseException as exc:
                self._error = self._error or exc
                fut.set_exception(exc)

    def schedule(self, bucket: dist.GradBucket) -> torch.futures.Future:
        fut: torch.futures.Future = torch.futures.Future()
        index = bucket.index()
        if bucket.is_last():
            self.num_buckets = max(self.num_buckets, index + 1)
        n = max(self.num_buckets, index + 1)
        flat = bucket.buffer().detach().reshape(-1)
        # a copy: DDP may reuse the bucket's storage for the next step before our push has read it all
        data = flat.to(torch.float32).numpy().copy()
        it = self.iteration
        if bucket.is_last():
            self.iteration += 1
        self._to_push.put((it, index, n, data, fut))
        return fut.then(_unwrap)

    @property
    def error(self) -> BaseException | None:
        """What failed in the hook (its buckets' futures raised it in backward), or None."""
        return self._error

    def close(self, bye: bool = True) -> None:
        """Stop the hook's threads and say BYE (with the hook's error, if any: the aggregator then ends the
        job and tells the other ranks). Idempotent; also run at interpreter exit if the script does not."""
        if self._closed:
            return
        self._closed = True
        self._to_push.put(_STOP)
        self._pusher.join(timeout=30)
        self._resolver.join(timeout=30)
        if bye:
            error = None if self._error is None else str(self._error)
            self.client.bye(error=error, timeout=10.0 if error is None else 2.0)
        self.client.close()


def _close_at_exit(ref: weakref.ref) -> None:
    state = ref()
    if state is not None:
        state.close()


def mlfc_hook(state: MlfcHookState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """The function given to ``register_comm_hook``: mean of the bucket over all ranks, via the aggregator."""
    return state.schedule(bucket)


def _endpoint(ps: tuple[str, int] | str) -> tuple[str, int]:
    if isinstance(ps, str):  # "HOST[:PORT]", as the CLI's --ps
        host, _, port = ps.rpartition(":") if ":" in ps else (ps, "", "")
        return host, int(port) if port else proto.PS_PORT
    host, port = ps
    return host, int(port)


def mlfc_comm_hook(
    ddp: torch.nn.parallel.DistributedDataParallel,
    *,
    job: int,
    ps: tuple[str, int] | str,
    rank: int | None = None,
    bind: str = "127.0.0.1",
    rx_port: int = 0,
    tx_port: int = 0,
    loss_bound: float = 0.0,
    timeout: float = CONNECT_TIMEOUT,
    process_group: dist.ProcessGroup | None = None,
    client_config: ClientConfig | None = None,
    push_sock=None,
) -> MlfcHookState:
    """Connect this rank to the aggregator and register the hook on ``ddp``. Returns the state (close it).

    ``ps``: the aggregator, ``(host, port)`` or ``"HOST[:PORT]"`` (port 19728 by default); ports must be in
    the shim range 19712..19967. ``bind``: this rank's own address, where the aggregator sends the means
    (on several hosts the 127.0.0.1 default cannot be reached: give the host's address on the mlfc network).
    ``rank``: the process group's rank unless given. ``timeout``: s to find the aggregator and be admitted;
    bucket transfers wait ``client_config.timeout`` (60 s). Raises ``WorkerError`` on every rank, before any
    step, when the aggregator refuses this rank or serves another number of workers than the group has."""
    pg_rank = dist.get_rank(process_group) if dist.is_initialized() else None
    world = dist.get_world_size(process_group) if dist.is_initialized() else None
    if rank is None:
        if pg_rank is None:
            raise ValueError("rank=None needs an initialised process group (dist.init_process_group)")
        rank = pg_rank
    ps = _endpoint(ps)
    cfg = client_config or ClientConfig(job=job, rank=rank, ps=ps)
    cfg = replace(
        cfg,
        job=job,
        rank=rank,
        ps=ps,
        bind=bind,
        rx_port=rx_port,
        tx_port=tx_port,
        mode="aggregate",
        loss_bound=loss_bound,
        connect_timeout=timeout,
    )
    client = WorkerClient(cfg, push_sock=push_sock)
    try:
        try:
            welcome = client.connect([p.numel() for p in ddp.module.parameters()], welcome_timeout=timeout)
        except WorkerError as exc:
            if world is not None:
                raise WorkerError(f"{exc} (this rank is {rank} of a DDP group of {world})") from None
            raise
        workers = welcome.get("workers")
        if world is not None and workers != world:
            msg = (
                f"job {job} rank {rank}: the aggregator at {ps[0]}:{ps[1]} serves {workers} workers, the DDP "
                f"group has {world} ranks: start it with --workers {world} (serve_aggregator(job, {world}, ...))"
            )
            client.bye(error=msg, timeout=2.0)
            raise WorkerError(msg)
    except BaseException:
        client.close()
        raise
    state = MlfcHookState(client)
    ddp.register_comm_hook(state, mlfc_hook)
    atexit.register(_close_at_exit, weakref.ref(state))
    return state


class AggregatorThread:
    """An aggregate-mode ``TrainingServer`` run by a thread of this process (accept, then serve)."""

    def __init__(self, cfg: ServerConfig, emit=None) -> None:
        if cfg.mode != "aggregate":
            cfg = replace(cfg, mode="aggregate")
        self.server = TrainingServer(cfg, emit=emit)
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="mlfc-aggregator", daemon=True)
        self._thread.start()

    @property
    def address(self) -> tuple[str, int]:
        return self.server.address

    def _run(self) -> None:
        try:
            self.server.accept()
            self.server.serve()
        except BaseException as exc:
            self.error = exc

    def join(self, timeout: float | None = None) -> None:
        """Wait for every worker's BYE; re-raises what ended the aggregator early."""
        self._thread.join(timeout)
        try:
            if self._thread.is_alive():
                raise TimeoutError("the aggregator is still serving")
            if self.error is not None:
                raise self.error
        finally:
            self.server.close()


def serve_aggregator(
    job: int, workers: int, bind: str = "127.0.0.1", port: int = proto.PS_PORT, **cfg
) -> AggregatorThread:
    """Start an aggregator for ``workers`` DDP ranks in a background thread. ``roster_file=PATH`` keeps the
    admitted ranks there, so that a restarted aggregator tells them at once that it cannot resume them
    (docs/training.md, "When things fail")."""
    return AggregatorThread(
        ServerConfig(
            job=job,
            workers=workers,
            bind=bind,
            port=port,
            mode="aggregate",
            tx_port_base=cfg.pop("tx_port_base", None),
            **cfg,
        )
    )
