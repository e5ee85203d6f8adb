"""Training tasks that need no download: a model, its data (train/validation split) and sane defaults.

* ``digits``: scikit-learn's bundled ``load_digits`` (1,797 8x8 grey images, 10 classes), split 80/20
  with a fixed seed; a small CNN (width 16: 38,282 parameters in 8 tensors).
* ``synthetic``: a generated 8-class problem (``make_classification``: 4,000 points, 32 features,
  16 informative, 2 clusters per class, 2 % label noise), split 80/20; an MLP (width 128: 13,000
  parameters in 6 tensors). A harder, noisier curve than digits, so a search has variety.

A user task is any ``Task``: ``make_model`` builds the ``torch.nn.Module`` (the PS and every worker call
it; the PS's initial parameters win), ``train``/``val`` are ``torch.utils.data.Dataset`` objects yielding
(input, label) pairs. ``mlfc-train --task package.module:function`` loads one (``function(seed, width)``
returns the Task).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset, Subset, TensorDataset


@dataclass(frozen=True)
class Task:
    name: str
    make_model: Callable[[], nn.Module]
    train: Dataset
    val: Dataset
    lr: float = 0.05  # PS SGD learning rate (momentum 0.9 by default)
    batch_size: int = 32  # per worker
    # training loss on (model output, labels); validation also reports accuracy = argmax(output) == label
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = nn.functional.cross_entropy


class DigitsCNN(nn.Module):
    def __init__(self, width: int = 16, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(width, 2 * width, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(2 * width * 16, 64), nn.ReLU(), nn.Linear(64, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def mlp(inputs: int, width: int, classes: int) -> nn.Module:
    return nn.Sequential(
        nn.Linear(inputs, width), nn.ReLU(), nn.Linear(width, width // 2), nn.ReLU(), nn.Linear(width // 2, classes)
    )


def _split(x: np.ndarray, y: np.ndarray, seed: int, val_fraction: float = 0.2) -> tuple[TensorDataset, TensorDataset]:
    order = np.random.default_rng(seed).permutation(len(x))
    n_val = round(val_fraction * len(x))
    xt, yt = torch.from_numpy(x.astype(np.float32)), torch.from_numpy(y.astype(np.int64))
    val, train = order[:n_val], order[n_val:]
    return TensorDataset(xt[train], yt[train]), TensorDataset(xt[val], yt[val])


def digits(seed: int = 0, width: int | None = None) -> Task:
    from sklearn.datasets import load_digits

    dataset = load_digits()
    x = (dataset.data / 16.0).reshape(-1, 1, 8, 8)
    train, val = _split(x, dataset.target, seed)
    layer_width = width or 16
    return Task("digits", lambda: DigitsCNN(layer_width), train, val, lr=0.05, batch_size=32)


def synthetic(seed: int = 0, width: int | None = None) -> Task:
    from sklearn.datasets import make_classification

    x, y = make_classification(
        n_samples=4000,
        n_features=32,
        n_informative=16,
        n_redundant=4,
        n_classes=8,
        n_clusters_per_class=2,
        class_sep=1.5,
        flip_y=0.02,
        random_state=seed,
    )
    x = (x - x.mean(axis=0)) / x.std(axis=0)
    train, val = _split(x, y, seed)
    layer_width = width or 128
    return Task("synthetic", lambda: mlp(32, layer_width, 8), train, val, lr=0.05, batch_size=32)


TASKS: dict[str, Callable[..., Task]] = {"digits": digits, "synthetic": synthetic}


def load_task(spec: str, seed: int = 0, width: int | None = None) -> Task:
    """A built-in task by name, or ``module:function`` returning a Task (called with seed and width)."""
    if spec in TASKS:
        return TASKS[spec](seed, width)
    module, sep, func = spec.partition(":")
    if not sep:
        raise ValueError(f"unknown task {spec!r}: choose {', '.join(TASKS)} or give module:function")
    try:
        factory = getattr(importlib.import_module(module), func)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"task {spec!r}: {exc}") from None
    task = factory(seed=seed, width=width)
    if not isinstance(task, Task):
        raise ValueError(f"task {spec!r} returned {type(task).__name__}, not mlfc.hosts.training.tasks.Task")
    return task


def shard(dataset: Dataset, rank: int, world: int, seed: int = 0) -> Subset:
    """Worker ``rank``'s disjoint share of ``dataset`` (a seeded permutation dealt round robin)."""
    if not 0 <= rank < world:
        raise ValueError(f"rank {rank} outside 0..{world - 1}")
    n = len(dataset)  # type: ignore[arg-type]
    order = np.random.default_rng(seed + 7919).permutation(n)
    return Subset(dataset, order[rank::world].tolist())


def batches(dataset: Dataset, batch_size: int, seed: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Endless shuffled mini-batches (reshuffled every epoch, seeded: reproducible runs)."""
    n = len(dataset)  # type: ignore[arg-type]
    if n == 0:
        raise ValueError("empty training shard")
    rng = np.random.default_rng(seed)
    while True:
        order = rng.permutation(n)
        for start in range(0, n - batch_size + 1 if n >= batch_size else 1, batch_size):
            items = [dataset[int(i)] for i in order[start : start + batch_size]]
            yield torch.stack([x for x, _ in items]), torch.stack([torch.as_tensor(y) for _, y in items])


def tensors(dataset: Dataset) -> tuple[torch.Tensor, torch.Tensor]:
    """The whole dataset as two stacked tensors (validation sets are small)."""
    items = [dataset[i] for i in range(len(dataset))]  # type: ignore[arg-type]
    return torch.stack([x for x, _ in items]), torch.stack([torch.as_tensor(y) for _, y in items])
