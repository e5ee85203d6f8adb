"""One rank of a DDP job whose group may not match its aggregator (test support, run by test_ddp_hook.py).

Rank 0 hosts an aggregator for --workers ranks; the group has --world. The last rank calls the hook --late
seconds after the others. Each rank takes --steps steps if the hook connects and writes what happened to
--out-<rank>.json (rank 0 adds the aggregator's error and how many chunks it aggregated).
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from mlfc.hosts.training.ddp import mlfc_comm_hook, serve_aggregator


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--workers", type=int, required=True)
    ap.add_argument("--gloo-port", type=int, required=True)
    ap.add_argument("--ps-port", type=int, required=True)
    ap.add_argument("--late", type=float, default=0.0)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    agg = serve_aggregator(1, args.workers, port=args.ps_port, timeout=30) if args.rank == 0 else None
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.gloo_port}", rank=args.rank,
                            world_size=args.world)  # fmt: skip
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(8, 2))
    if args.rank == args.world - 1:
        time.sleep(args.late)
    t0 = time.monotonic()
    rec: dict = {"rank": args.rank, "steps": 0, "error": None}
    try:
        hook = mlfc_comm_hook(model, job=1, ps=f"127.0.0.1:{args.ps_port}")  # rank: the process group's
    except Exception as exc:
        rec["error"] = f"{type(exc).__name__}: {exc}"
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(args.steps):
            opt.zero_grad()
            model(torch.ones(4, 8) * (args.rank + 1)).sum().backward()
            opt.step()
            rec["steps"] += 1
        hook.close()
    rec["seconds"] = round(time.monotonic() - t0, 2)
    if agg is not None:
        try:
            agg.join(timeout=30)
        except Exception as exc:
            rec["aggregator_error"] = f"{type(exc).__name__}: {exc}"
        rec["aggregated_chunks"] = agg.server.ledger.totals()["chunks"]
    with open(f"{args.out}-{args.rank}.json", "w") as f:
        json.dump(rec, f)


if __name__ == "__main__":
    main()
