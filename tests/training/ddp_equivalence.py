"""One rank of the DDP-hook equivalence check (test support, run by test_training_torch.py).

Trains two copies of the digits CNN from the same initial parameters for --steps steps: one with DDP's
default gloo allreduce, one with the mlfc comm hook (rank 0 hosts the aggregator). Rank 0 writes the
largest parameter difference between the two, and how far training moved the parameters, to --out.
"""

from __future__ import annotations

import argparse
import copy
import json

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from mlfc.hosts.training.ddp import mlfc_comm_hook, serve_aggregator
from mlfc.hosts.training.tasks import batches, digits, shard


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--gloo-port", type=int, required=True)
    ap.add_argument("--ps-port", type=int, required=True)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    agg = serve_aggregator(1, args.world, port=args.ps_port, timeout=60) if args.rank == 0 else None
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.gloo_port}", rank=args.rank,
                            world_size=args.world)  # fmt: skip
    task = digits()
    torch.manual_seed(0)
    base = task.make_model()
    initial = [p.detach().clone() for p in base.parameters()]
    ref = DistributedDataParallel(copy.deepcopy(base))  # gloo allreduce
    ours = DistributedDataParallel(copy.deepcopy(base))
    hook = mlfc_comm_hook(ours, job=1, rank=args.rank, ps=("127.0.0.1", args.ps_port))
    opts = [torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9) for m in (ref, ours)]
    data = batches(shard(task.train, args.rank, args.world), 32, seed=1 + args.rank)
    for _ in range(args.steps):
        x, y = next(data)
        for model, opt in zip((ref, ours), opts, strict=True):
            opt.zero_grad()
            task.loss(model(x), y).backward()
            opt.step()
    hook.close()
    if agg is not None:
        agg.join(timeout=60)
        diff = max(float((a - b).abs().max()) for a, b in zip(ref.parameters(), ours.parameters(), strict=True))
        moved = max(float((a - b).abs().max()) for a, b in zip(ref.parameters(), initial, strict=True))
        totals = agg.server.ledger.totals()
        with open(args.out, "w") as f:
            json.dump({"max_diff": diff, "moved": moved, **totals, "buckets": hook.iteration}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
