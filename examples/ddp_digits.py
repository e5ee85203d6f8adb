"""Data-parallel training of the digits CNN with PyTorch DDP, gradients exchanged through mlfc.

Two commands (two terminals, or `&`), one per rank:

    python examples/ddp_digits.py --rank 0 --world-size 2
    python examples/ddp_digits.py --rank 1 --world-size 2

Rank 0 also runs the mlfc aggregator (the PS in aggregate mode) in a thread; `--ps HOST:PORT` with
`--no-aggregator` uses one started elsewhere (`mlfc-train ps --mode aggregate --workers 2 --job 1`).
Everything except the gradient buckets goes over gloo as in any DDP script. The only mlfc line is the
`mlfc_comm_hook(...)` call. Each rank prints one JSON line per iteration; rank 0 adds the validation
accuracy every --eval-every iterations and, at the end, the chunks the aggregator zero-filled.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from mlfc.hosts.training.ddp import mlfc_comm_hook, serve_aggregator
from mlfc.hosts.training.loop import evaluate
from mlfc.hosts.training.protocol import PS_PORT
from mlfc.hosts.training.tasks import batches, digits, shard, tensors


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--master", default="127.0.0.1:29500", help="gloo rendezvous HOST:PORT")
    ap.add_argument("--ps", default=f"127.0.0.1:{PS_PORT}", help="the mlfc aggregator HOST:PORT")
    ap.add_argument("--bind", default="127.0.0.1", help="this rank's address for mlfc traffic")
    ap.add_argument("--no-aggregator", action="store_true", help="rank 0 does not start the aggregator")
    ap.add_argument("--job", type=int, default=1)
    ap.add_argument("--iterations", type=int, default=110)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--loss-bound", type=float, default=0.0, help="share of a bucket the aggregator may zero-fill")
    ap.add_argument("--eval-every", type=int, default=10)
    args = ap.parse_args()

    torch.set_num_threads(1)
    ps_host, ps_port = args.ps.rsplit(":", 1)
    aggregator = None
    if args.rank == 0 and not args.no_aggregator:
        aggregator = serve_aggregator(args.job, args.world_size, bind=ps_host, port=int(ps_port))
    dist.init_process_group("gloo", init_method=f"tcp://{args.master}", rank=args.rank, world_size=args.world_size)

    task = digits()
    torch.manual_seed(0)
    model = DistributedDataParallel(task.make_model())  # parameters broadcast from rank 0 over gloo
    # rank comes from the process group, the aggregator as HOST:PORT, as the CLI writes it (docs/training.md)
    hook = mlfc_comm_hook(model, job=args.job, ps=args.ps, bind=args.bind, loss_bound=args.loss_bound)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    data = batches(shard(task.train, args.rank, args.world_size), task.batch_size, seed=1 + args.rank)
    xv, yv = tensors(task.val)
    acc = None
    for it in range(args.iterations):
        start = time.time()
        x, y = next(data)
        opt.zero_grad()
        loss = task.loss(model(x), y)
        loss.backward()  # the hook pushes each bucket as backward fills it; DDP waits for the means here
        opt.step()
        rec = {
            "iteration": it,
            "worker": args.rank,
            "train_loss": round(float(loss.detach()), 5),
            "iteration_s": round(time.time() - start, 5),
        }
        if args.rank == 0 and ((it + 1) % args.eval_every == 0 or it == args.iterations - 1):
            acc, val_loss = evaluate(model.module, task, xv, yv)
            rec.update(accuracy=round(acc, 5), loss=round(val_loss, 5))
        print(json.dumps(rec), flush=True)
    hook.close()
    summary = {
        "summary": True,
        "worker": args.rank,
        "iterations": args.iterations,
        "accuracy": acc,
        "retransmits": hook.push.retransmits,
        "tolerated_chunks": hook.push.tolerated_chunks,
    }
    if aggregator is not None:
        aggregator.join(timeout=60)
        summary.update(aggregator.server.ledger.totals())
    print(json.dumps(summary), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
