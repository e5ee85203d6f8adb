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
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from mlfc.hosts.training.client import PushResult, WorkerClient
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


def make_parameter_server(task: Task, cfg: TrainConfig, server_cfg, *, emit=emit_json) -> TrainingServer:
    """A PS-mode ``TrainingServer`` holding a fresh model of ``task`` (seeded) and its SGD optimizer."""
    torch.set_num_threads(1)
    torch.manual_seed(cfg.seed)
    model = task.make_model()
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=cfg.lr or task.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)

    def apply(_iteration: int, means: list[np.ndarray]) -> None:
        for p, m in zip(params, means, strict=True):
            p.grad = torch.from_numpy(m).view_as(p)
        opt.step()

    info = {"iterations": cfg.iterations, "seed": cfg.seed, "task": task.name}
    srv = TrainingServer(server_cfg, parameters=parameter_views(model), apply=apply, emit=emit, info=info)
    srv.model = model  # type: ignore[attr-defined]  # for callers that evaluate the PS's copy
    return srv


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
    _load_flat(params, client.initial_parameters())
    data = batches(shard(task.train, rank, world, seed), cfg.batch_size or task.batch_size, seed + 1 + rank)
    xv, yv = tensors(task.val)
    evaluates = cfg.eval_all or rank == 0
    delay = start_at - time.time()
    if delay > 0:
        time.sleep(delay)
    t_begin = time.time()
    n = len(params)
    acc: float | None = None
    lost_total = retx_total = 0
    for it in range(iterations):
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
        zero_filled = 0
        with torch.no_grad():
            for t, p in enumerate(params):
                d = client.wait(it, t)
                zero_filled += len(d.loss.missing_chunks)
                p.copy_(torch.from_numpy(np.frombuffer(d.data, dtype=np.float32)).view_as(p))
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
            "lost_chunks": stats["lost_chunks"],
            "job_lost_chunks": stats["job_lost_chunks"],
            "lost_by_tensor": stats["lost_by_tensor"],
            "lost_elements": stats["lost_elements"],
        }
        lost_total += stats["lost_chunks"]
        retx_total += push.retransmits
        if evaluates and ((it + 1) % cfg.eval_every == 0 or it == iterations - 1):
            e0 = time.time()
            acc, val_loss = evaluate(model, task, xv, yv)
            record.update(accuracy=round(acc, 5), loss=round(val_loss, 5), eval_s=round(time.time() - e0, 5))
        if emit is not None:
            emit(record)
        if report is not None:
            report(record)
    return WorkerSummary(iterations, acc, lost_total, retx_total, time.time() - t_begin)
