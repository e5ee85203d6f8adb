"""A*, the converged accuracy a hyper-parameter search's targets are fractions of (issue 26 item 4).

A* comes from runs trained to a plateau, not from the search's own short runs (which stop while the best
configuration still climbs, so 0.95 "A*" was a moving target). Each configuration is trained in process,
without the network, by the same synchronous data-parallel SGD the PS path runs (hosts/training/loop.py):
the PS's seeded model, every worker's shard and batch order (``shard``, ``batches(seed + 1 + rank)``), the
mean of the workers' gradients, SGD with momentum 0.9. With nothing lost the PS path computes exactly
this, so the curve is the one a real job would follow, only without waiting for a network.

Training stops at a plateau (``plateau_at``: the smoothed accuracy, the mean of the last ``window``
evaluations, has not risen by more than ``min_delta`` above its best for ``patience`` evaluations) or at
``max_iterations`` (then ``plateaued`` is False and the output says so). The result is cached as JSON under
the cache folder, keyed by task, configuration, seed and workers; a cached file made with other settings
is not reused.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mlfc.lab.tta import AccuracyPoint, smoothed

METHOD = (
    "in process: the PS path's synchronous SGD (seeded model, per-worker shards and batch order, mean of the "
    "workers' gradients, momentum 0.9), evaluated every {eval_every} iterations, stopped when the mean of "
    "{window} consecutive evaluations had not risen by > {min_delta:g} for {patience} evaluations "
    "(not before {min_iterations} iterations, cap {max_iterations})"
)


@dataclass(frozen=True)
class Plateau:
    min_delta: float = 0.002
    patience: int = 20  # evaluations
    window: int = 3  # evaluations averaged (lab/tta.py smoothed, as the search's targets are crossed)
    eval_every: int = 2  # iterations (the search's --eval-every: the same smoothing)
    max_iterations: int = 3000
    # No plateau before this: a slow learning rate sits at chance level for tens of iterations before it
    # starts (digits w4 lr0.01 did for 40), which is a stall, not convergence.
    min_iterations: int = 300

    def __post_init__(self) -> None:
        if self.patience < 1 or self.window < 1 or self.eval_every < 1 or self.max_iterations < 1:
            raise ValueError("patience, window, eval_every and max_iterations must be >= 1")
        if not 0 <= self.min_iterations <= self.max_iterations:
            raise ValueError("min_iterations must be within 0..max_iterations")

    def describe(self) -> str:
        return METHOD.format(**asdict(self))


def smooth(accuracies: Sequence[float], window: int) -> list[float]:
    pts = [AccuracyPoint(float(i), i, a) for i, a in enumerate(accuracies)]
    return [p.accuracy for p in smoothed(pts, window)]


def plateau_at(accuracies: Sequence[float], plateau: Plateau) -> int | None:
    """The index of the evaluation at which training has plateaued: ``patience`` evaluations after the last
    one whose smoothed accuracy exceeded the best before it by more than ``min_delta``, and not before
    ``min_iterations`` (evaluation i is after iteration (i + 1) * eval_every); None: not yet."""
    first = max(0, -(-plateau.min_iterations // plateau.eval_every) - 1)
    best_i, best = 0, None
    for i, s in enumerate(smooth(accuracies, plateau.window)):
        if best is None or s > best + plateau.min_delta:
            best_i, best = i, s
        elif i - best_i >= plateau.patience and i >= first:
            return i
    return None


@dataclass
class Reference:
    """One configuration trained to a plateau (or the cap)."""

    key: dict  # task, width, lr, seed, workers, batch_size and the Plateau settings
    iterations: list[int]
    accuracies: list[float]
    plateaued: bool
    seconds: float
    made: str = ""  # when (UTC)
    method: str = ""
    path: str = ""  # the cache file (not stored in it)
    cached: bool = field(default=False)  # reused from the cache rather than trained now

    @property
    def a_star(self) -> float:
        """The converged accuracy: the best smoothed accuracy of the run (the plateau's level)."""
        return max(smooth(self.accuracies, self.key["window"]))

    def iteration_reaching(self, target: float) -> int | None:
        """The first iteration at which the smoothed curve reached ``target`` (None: never)."""
        for it, s in zip(self.iterations, smooth(self.accuracies, self.key["window"]), strict=True):
            if s >= target:
                return it
        return None

    def describe(self) -> dict:
        """What the run's outputs record about it."""
        return {
            "task": self.key["task"],
            "configuration": f"{self.key['width']}:{self.key['lr']:g}",
            "seed": self.key["seed"],
            "workers": self.key["workers"],
            "a_star": round(self.a_star, 5),
            "iterations": self.iterations[-1] if self.iterations else 0,
            "plateaued": self.plateaued,
            "cached": self.cached,
            "made": self.made,
            "method": self.method,
            "cache_file": self.path,
        }


def cache_path(cache: Path, key: dict) -> Path:
    return cache / f"{key['task']}-w{key['width']}-lr{key['lr']:g}-s{key['seed']}-k{key['workers']}.json"


def make_key(task: str, width: int, lr: float, seed: int, workers: int, batch_size: int | None, p: Plateau) -> dict:
    return {"task": task, "width": width, "lr": lr, "seed": seed, "workers": workers, "batch_size": batch_size,
            **asdict(p)}  # fmt: skip


def load_cached(path: Path, key: dict) -> Reference | None:
    """The cached reference at ``path`` if it was made with exactly ``key``; None otherwise."""
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(data, dict) or data.get("key") != key:
        return None
    fields_ = {k: data[k] for k in ("key", "iterations", "accuracies", "plateaued", "seconds", "made", "method")}
    return Reference(**fields_, path=str(path), cached=True)


def save(ref: Reference, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {k: v for k, v in asdict(ref).items() if k not in ("path", "cached")}
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.replace(path)


def train_to_plateau(key: dict, plateau: Plateau) -> Reference:
    """Train one configuration in process until ``plateau_at`` says it has converged (or the cap)."""
    import torch

    from mlfc.hosts.training.loop import evaluate
    from mlfc.hosts.training.tasks import batches, load_task, shard, tensors

    t0 = time.monotonic()
    torch.set_num_threads(1)
    task = load_task(key["task"], key["seed"], key["width"])
    torch.manual_seed(key["seed"])  # the PS's model init (make_parameter_server)
    model = task.make_model()
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=key["lr"] or task.lr, momentum=0.9)
    world, bs = key["workers"], key["batch_size"] or task.batch_size
    data = [batches(shard(task.train, r, world, key["seed"]), bs, key["seed"] + 1 + r) for r in range(world)]
    xv, yv = tensors(task.val)
    its: list[int] = []
    accs: list[float] = []
    plateaued = False
    for it in range(plateau.max_iterations):
        total = [torch.zeros_like(p) for p in params]
        for gen in data:
            x, y = next(gen)
            model.zero_grad(set_to_none=False)
            task.loss(model(x), y).backward()
            for s, p in zip(total, params, strict=True):
                s += p.grad
        for s, p in zip(total, params, strict=True):
            p.grad = s / world
        opt.step()
        if (it + 1) % plateau.eval_every == 0:
            its.append(it + 1)
            accs.append(round(evaluate(model, task, xv, yv)[0], 5))
            if plateau_at(accs, plateau) is not None:
                plateaued = True
                break
    return Reference(key, its, accs, plateaued, round(time.monotonic() - t0, 2),
                     time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), plateau.describe())  # fmt: skip


def reference(
    cache: Path, task: str, width: int, lr: float, seed: int, workers: int, batch_size: int | None = None,
    plateau: Plateau | None = None,
) -> Reference:  # fmt: skip
    """The configuration's converged run: from the cache when one made with these settings is there,
    otherwise trained now and cached."""
    p = plateau or Plateau()
    key = make_key(task, width, lr, seed, workers, batch_size, p)
    path = cache_path(cache, key)
    ref = load_cached(path, key)
    if ref is None:
        ref = train_to_plateau(key, p)
        save(ref, path)
        ref.path = str(path)
    return ref
