"""Synchronous parameter-server training of a torch model over the mlfc transport.

``run_parameter_server`` holds the model and an SGD optimizer; ``run_worker`` computes gradients on its
shard of the data, pushes them, pulls the updated parameters, evaluates now and then and emits one
record per iteration (the emulator's fields and more, see ``docs/training.md``):

    {"iteration": 12, "accuracy": 0.91, "loss": 0.31, "train_loss": 0.28, "compute_s": 0.004,
     "comm_s": 0.006, "bytes": 153128, "worker": 0, "job": 1, "start": ..., "comm_start": ...,
     "push_end": ..., "comm_end": ..., "end": ..., "retransmits": 0, "zero_filled": 0,
     "lost_chunks": 3, "job_lost_chunks": 5, "lost_by_tensor": {"4": 3}, ...}

``accuracy``/``loss`` (validation) appear on evaluating iterations only (rank 0, every ``eval_every``);
``compute_s`` includes ``pad_s``, the sleep that pads real compute (``compute_real_s``) up to
``compute_s`` when asked to. Evaluation runs after ``end``: ``eval_s`` is outside start..end.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from mlfc.hosts.training.client import PsRestarted, PushResult, WorkerClient, WorkerError
from mlfc.hosts.training.durable import remove_leftovers, write_atomic
from mlfc.hosts.training.pull_copies import apply_pull
from mlfc.hosts.training.server import TrainingServer
from mlfc.hosts.training.tasks import Task, batches, shard, tensors


@dataclass(frozen=True)
class TrainConfig:
    iterations: int = 0  # PS: iterations to serve; worker: 0 = as many as the PS says
    batch_size: int | None = None  # per worker; None: the task's
    lr: float | None = None  # PS; None: the task's
    momentum: float = 0.9  # PS
    weight_decay: float = 0.0  # PS
    eval_every: int = 5  # worker: evaluate every k iterations (and the last)
    eval_all: bool = False  # worker: every rank evaluates (default: rank 0 only; the others report timing)
    compute_s: float = 0.0  # worker: pad each iteration's compute to this many seconds (0: no padding)
    seed: int = 0  # PS: model init; workers follow the PS's seed for data order

    def __post_init__(self) -> None:
        if self.iterations < 0 or self.eval_every < 1 or self.compute_s < 0:
            raise ValueError("need iterations >= 0, eval_every >= 1, compute_s >= 0")


def emit_json(record: dict) -> None:
    print(json.dumps(record), flush=True)


def parameter_views(model: torch.nn.Module) -> list[np.ndarray]:
    """Flat float32 numpy views of the model's parameters (the optimizer updates them in place)."""
    views = []
    for name, p in model.named_parameters():
        if p.dtype != torch.float32 or not p.is_contiguous() or p.device.type != "cpu":
            raise ValueError(f"parameter {name}: the PS path needs contiguous float32 CPU tensors")
        views.append(p.data.view(-1).numpy())
    return views


def make_parameter_server(
    task: Task, cfg: TrainConfig, server_cfg, *, emit=emit_json, checkpoint: Checkpoint | None = None
) -> TrainingServer:
    """A PS-mode ``TrainingServer`` holding a fresh model of ``task`` (seeded) and its SGD optimizer.
    With ``checkpoint``: resumed from its file when there is one, and saved after every ``every``-th step."""
    torch.set_num_threads(1)
    torch.manual_seed(cfg.seed)
    model = task.make_model()
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=cfg.lr or task.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)

    def apply(_iteration: int, means: list[np.ndarray]) -> None:
        for p, m in zip(params, means, strict=True):
            p.grad = torch.from_numpy(m).view_as(p)
        opt.step()

    identity = {"job": server_cfg.job, "task": task.name, "workers": server_cfg.workers, "seed": cfg.seed}
    srv: TrainingServer

    def on_step(next_iteration: int) -> None:
        assert checkpoint is not None
        if next_iteration % checkpoint.every == 0 or next_iteration == cfg.iterations:
            checkpoint.save(
                {**identity, "iteration": next_iteration, "model": model.state_dict(), "optimizer": opt.state_dict(),
                 "roster": {str(r): list(rx) for r, rx in srv.roster().items()}}
            )  # fmt: skip

    info = {"iterations": cfg.iterations, "seed": cfg.seed, "task": task.name}
    srv = TrainingServer(server_cfg, parameters=parameter_views(model), apply=apply, emit=emit, info=info,
                         on_step=on_step if checkpoint is not None else None)  # fmt: skip
    srv.model = model  # type: ignore[attr-defined]  # for callers that evaluate the PS's copy
    state = checkpoint.load() if checkpoint is not None else None
    if state is not None:
        assert checkpoint is not None
        mine = {k: state.get(k) for k in identity}
        if mine != identity:
            srv.close()
            raise ValueError(f"checkpoint {checkpoint.path} is of another job ({mine}), this PS runs {identity}")
        with torch.no_grad():
            model.load_state_dict(state["model"])  # in place: the server's numpy views stay valid
        opt.load_state_dict(state["optimizer"])
        srv.resume(int(state["iteration"]), {int(r): (rx[0], int(rx[1])) for r, rx in state["roster"].items()})
        srv.resumed_from = int(state["iteration"])  # type: ignore[attr-defined]
    return srv


@dataclass(frozen=True)
class Checkpoint:
    """Where the PS keeps its state: the model, the optimizer (momentum) and the next iteration, written
    atomically and durably (``durable.write_atomic``: a temporary file beside it, fsynced, renamed over the
    old one, the directory fsynced), so a kill or a power cut at any moment leaves either the previous
    checkpoint or the new one, never a torn one."""

    path: Path
    every: int = 1  # save after every k-th optimizer step (and after the last)

    def __post_init__(self) -> None:
        if self.every < 1:
            raise ValueError(f"checkpoint every {self.every} iterations: must be >= 1")

    def save(self, state: dict) -> None:
        write_atomic(self.path, lambda f: torch.save(state, f))

    def load(self) -> dict | None:
        """The saved state, or None when there is no checkpoint yet. Temporary files of writes that a
        killed PS left behind are never read, and removed."""
        remove_leftovers(self.path)
        if not self.path.exists():
            return None
        try:
            return torch.load(self.path, weights_only=True)
        except Exception as exc:  # not a checkpoint of ours: say so instead of training from scratch silently
            raise ValueError(f"checkpoint {self.path} unreadable: {exc}") from None


def run_parameter_server(task: Task, cfg: TrainConfig, server_cfg, *, emit=emit_json) -> dict[str, int]:
    """Serve one job: accept the workers, run ``cfg.iterations`` iterations. Returns the loss totals."""
    if cfg.iterations < 1:
        raise ValueError("the PS needs iterations >= 1")
    with make_parameter_server(task, cfg, server_cfg, emit=emit) as srv:
        srv.accept()
        srv.run(cfg.iterations)
        return srv.ledger.totals()


@dataclass
class WorkerSummary:
    iterations: int
    accuracy: float | None
    lost_chunks: int
    retransmits: int
    seconds: float


def _load_flat(params: list[torch.Tensor], flat: np.ndarray) -> None:
    total = sum(p.numel() for p in params)
    if flat.size != total:
        raise ValueError(f"initial parameters: {flat.size} values for a model of {total}")
    off = 0
    with torch.no_grad():
        for p in params:
            p.copy_(torch.from_numpy(flat[off : off + p.numel()]).view_as(p))
            off += p.numel()


def evaluate(model: torch.nn.Module, task: Task, xv: torch.Tensor, yv: torch.Tensor) -> tuple[float, float]:
    """Validation (accuracy, loss) on the whole validation set."""
    model.eval()
    with torch.no_grad():
        out = model(xv)
        loss = float(task.loss(out, yv))
        acc = float((out.argmax(dim=1) == yv).float().mean())
    model.train()
    return acc, loss


def run_worker(
    task: Task,
    client: WorkerClient,
    cfg: TrainConfig,
    *,
    emit: Callable[[dict], None] | None = emit_json,
    report: Callable[[dict], None] | None = None,
    start_at: float = 0.0,
) -> WorkerSummary:
    """Connect to the PS and train. ``report(record)`` is called after ``emit`` (e.g. an mlfc Agent)."""
    torch.set_num_threads(1)
    rank = client.cfg.rank
    model = task.make_model()
    params = list(model.parameters())
    views_bytes = sum(4 * p.numel() for p in params)
    push_bytes = client.push_bytes([p.numel() for p in params])
    welcome = client.connect([p.numel() for p in params])
    if welcome.get("task") not in (None, task.name):
        raise ValueError(f"the PS trains task {welcome['task']!r}, this worker {task.name!r}")
    world, seed = int(welcome["workers"]), int(welcome.get("seed", 0))
    iterations = cfg.iterations or int(welcome.get("iterations", 0))
    if iterations < 1:
        raise ValueError("number of iterations unknown: give --iterations (the PS did not say)")
    start_it = int(welcome.get("iteration", 0))
    _load_flat(params, client.initial_parameters())
    batch_size = cfg.batch_size or task.batch_size
    my_shard = shard(task.train, rank, world, seed)

    def data_from(iteration: int):
        """The batches from ``iteration`` on: the same ones an uninterrupted worker would take there."""
        gen = batches(my_shard, batch_size, seed + 1 + rank)
        for _ in range(iteration):
            next(gen)
        return gen

    data = data_from(start_it)
    xv, yv = tensors(task.val)
    evaluates = cfg.eval_all or rank == 0
    delay = start_at - time.time()
    if delay > 0 and start_it == 0:
        time.sleep(delay)
    t_begin = time.time()
    acc: float | None = None
    lost_total = retx_total = 0
    it = start_it
    while it < iterations:
        try:
            record = _iteration(task, client, cfg, model, params, data, it, push_bytes, views_bytes)
        except (WorkerError, TimeoutError) as exc:  # the PS restarted or vanished: connect again (or give up)
            it, data = _rejoin(client, params, exc, data_from)
            continue
        lost_total += record["lost_chunks"]
        retx_total += record["retransmits"]
        if evaluates and ((it + 1) % cfg.eval_every == 0 or it == iterations - 1):
            e0 = time.time()
            acc, val_loss = evaluate(model, task, xv, yv)
            record.update(accuracy=round(acc, 5), loss=round(val_loss, 5), eval_s=round(time.time() - e0, 5))
        if emit is not None:
            emit(record)
        if report is not None:
            report(record)
        it += 1
    return WorkerSummary(iterations, acc, lost_total, retx_total, time.time() - t_begin)


def _rejoin(client: WorkerClient, params: list[torch.Tensor], exc: BaseException, data_from) -> tuple[int, object]:
    """Connect to the PS again (its restarted self, or the same one after an outage) and take its current
    parameters; returns the iteration to continue at and the batches from there. A PS that does not answer
    within the connect timeout ends the worker (WorkerError)."""
    t0 = time.time()
    rank = client.cfg.rank
    print(f"mlfc-train worker {rank}: lost the PS ({exc}); connecting again", file=sys.stderr, flush=True)
    while True:
        client.reconnect()
        try:
            welcome = client.connect([p.numel() for p in params])
            _load_flat(params, client.initial_parameters())
            break
        except PsRestarted:  # it restarted (again) while we knocked: knock at the new one
            continue
    it = int(welcome.get("iteration", 0))
    print(f"mlfc-train worker {rank}: re-joined at iteration {it} after {time.time() - t0:.2f} s",
          file=sys.stderr, flush=True)  # fmt: skip
    return it, data_from(it)


def _iteration(
    task: Task,
    client: WorkerClient,
    cfg: TrainConfig,
    model: torch.nn.Module,
    params: list[torch.Tensor],
    data,
    it: int,
    push_bytes: int,
    views_bytes: int,
) -> dict:
    """One synchronous iteration: compute, push every gradient, take the pulled parameters and STATS."""
    rank, n = client.cfg.rank, len(params)
    start = time.time()
    x, y = next(data)
    model.zero_grad(set_to_none=False)
    out = model(x)
    train_loss = task.loss(out, y)
    train_loss.backward()
    real = time.time() - start
    pad = max(0.0, cfg.compute_s - real)
    if pad:
        time.sleep(pad)
    comm_start = time.time()
    client.start_iteration(push_bytes)
    push = PushResult()
    for t, p in enumerate(params):
        g = p.grad if p.grad is not None else torch.zeros_like(p)
        client.push(it, t, g.detach().reshape(-1).numpy(), layer_index=t, num_layers=n, result=push)
    push_end = time.time()
    # MLTCP's state as the push left it: how far through the declared bytes its flow got, and F there
    bytes_ratio, mltcp_f = client.tx.progress.ratio, client.tx.cc.factor()
    zero_filled = 0
    with torch.no_grad():
        for t, p in enumerate(params):
            d = client.wait(it, t)
            zero_filled += len(d.loss.missing_chunks)
            # an approximate pull's missing chunks keep this worker's previous values (the PS knows which); a
            # pull below fp32 is the change since them (hosts/training/pull_copies.py)
            pulled = apply_pull(p.detach().reshape(-1).numpy(), d.data, d.loss.missing_chunks, d.loss.chunk_size)
            p.copy_(torch.from_numpy(pulled).view_as(p))
    stats = client.stats(it)
    end = time.time()
    record = {
        "iteration": it,
        "train_loss": round(float(train_loss.detach()), 5),
        "compute_s": round(comm_start - start, 5),
        "compute_real_s": round(real, 5),
        "pad_s": round(pad, 5),
        "comm_s": round(end - comm_start, 5),
        "bytes": push.bytes,
        "pull_bytes": views_bytes,
        "worker": rank,
        "job": client.cfg.job,
        "start": start,
        "comm_start": comm_start,
        "push_end": push_end,
        "comm_end": end,
        "end": end,
        "retransmits": push.retransmits,
        "zero_filled": zero_filled,
        "chunks": push.chunks,
        "protected_chunks": push.protected_chunks,
        "tolerated_chunks": push.tolerated_chunks,
        "held_elements": push.held_elements,
        "withheld_chunks": push.withheld_chunks,
        "fp16_chunks": push.precision_chunks["fp16"],  # sent at a lower precision (mlfc.policy.precision)
        "int8_chunks": push.precision_chunks["int8"],
        "sent_bytes": push.sent_bytes,
        "bytes_ratio": round(bytes_ratio, 5),
        "mltcp_f": round(mltcp_f, 5),
        "pull_sent_bytes": stats.get("pull_sent_bytes", views_bytes),
        "pull_stale_elements": stats.get("pull_stale_elements", 0),
        "lost_chunks": stats["lost_chunks"],
        "job_lost_chunks": stats["job_lost_chunks"],
        "lost_by_tensor": stats["lost_by_tensor"],
        "lost_elements": stats["lost_elements"],
    }
    return record
