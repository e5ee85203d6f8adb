"""Saves PS checkpoints in a loop until killed (test support, run by test_checkpoint_durable.py).

Checkpoint ``--start``, ``--start`` + 1, ...: each one's tensor is filled with its own iteration number
(so a loaded checkpoint shows whether it is whole), "saved K" printed after each save returned.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from mlfc.hosts.training.loop import Checkpoint

ELEMENTS = 1 << 20  # 4 MB: a write takes long enough for a kill to land inside it


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("path", type=Path)
    ap.add_argument("--start", type=int, default=0)
    args = ap.parse_args()
    ckpt = Checkpoint(args.path)
    k = args.start
    while True:
        ckpt.save({"iteration": k, "weights": torch.full((ELEMENTS,), float(k))})
        print(f"saved {k}", flush=True)
        k += 1


if __name__ == "__main__":
    main()
