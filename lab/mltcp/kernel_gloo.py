"""Lab check (``make kernel-mltcp-gloo``): unmodified PyTorch DDP over gloo picks up kernel MLTCP.

Two ranks of one DDP job (a small MLP on generated data, CPU) in two network namespaces joined by a
veth pair shaped with htb, both namespaces defaulting to ``mltcp_cubic`` (or ``--cc``): nothing in
the training script knows about MLTCP. While it trains, the congestion control's per-connection
records (``mlfc-mltcp status``) show what it learnt from gloo's sockets; the check compares the
iterations it detected with the training steps and its bytes per iteration with the gradient bytes a
rank sends per step (2-rank ring allreduce: the gradient size).

Lab code; needs root, torch (``torch==2.13.0``) and mltcp loaded or
loadable. Not a performance measurement: one job, no competing traffic.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import textwrap
import time

from mlfc.hosts.kernel import KernelMltcpError, loader, namespaces
from mlfc.testing.netns import NetnsLab

WORKER = textwrap.dedent(
    """
    import os, sys, time, torch, torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    rank, steps, width, compute = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    dist.init_process_group("gloo", init_method="tcp://10.82.1.1:29511", rank=rank, world_size=2)
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, width), torch.randint(0, 10, (64,))
    nbytes = sum(p.numel() * p.element_size() for p in model.parameters())
    for step in range(steps):
        time.sleep(compute)  # the rest of a real step (data loading, a bigger forward pass)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    dist.barrier()
    print(f"rank {rank}: {steps} steps, {nbytes} gradient bytes per step", flush=True)
    time.sleep(float(os.environ.get("MLFC_HOLD", "0")))  # keep the connections open for the reading
    dist.destroy_process_group()
    """
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cc", default="mltcp_cubic", choices=["mltcp_reno", "mltcp_cubic"])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--width", type=int, default=1024, help="MLP width: ~4 * width^2 gradient bytes")
    ap.add_argument("--compute", type=float, default=0.1, help="s of extra compute per step")
    ap.add_argument("--rate", type=float, default=200.0, help="Mbit/s of the shaped link")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("gloo-check: needs root", file=sys.stderr)
        return 1
    try:
        import torch  # noqa: F401
    except ImportError:
        print("gloo-check: torch is not installed (pip install torch==2.13.0)", file=sys.stderr)
        return 1
    alg = loader.algorithm(args.cc)
    loaded_here = not loader.registered(alg)
    try:
        if loaded_here:
            loader.load([alg])
        with NetnsLab("kgloo") as lab:
            a, b = lab.namespace("a"), lab.namespace("b")
            dev_a, dev_b = lab.link(a, "10.82.1.1", b, "10.82.1.2")
            rate = f"{int(args.rate * 1e6)}bit"
            for ns, dev in ((a, dev_a), (b, dev_b)):
                lab.tc(ns, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1")
                lab.tc(ns, "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", rate)
                namespaces.set_default_cc(namespaces.resolve(ns), args.cc)
            procs = [
                subprocess.Popen([*lab.exec_args(ns), sys.executable, "-c", WORKER, str(rank), str(args.steps),
                                  str(args.width), str(args.compute)], stdout=subprocess.PIPE, text=True,
                                 env=dict(os.environ, MLFC_HOLD="3", GLOO_SOCKET_IFNAME=dev))
                for rank, (ns, dev) in enumerate(((a, dev_a), (b, dev_b)))
            ]  # fmt: skip
            line = procs[0].stdout.readline().strip()  # printed after the last step, before the hold
            time.sleep(0.5)
            flows = [f for f in loader.flows(alg) if f.local.startswith("10.82.1.")]
            for p in procs:
                p.wait(timeout=60)
            if not line:
                raise KernelMltcpError("the DDP job failed (its output is above)")
            grad_bytes = int(line.split(",")[1].split()[0])
            print(line)
            print(f"connections using {args.cc}: {len(flows)}")
            for f in sorted(flows, key=lambda f: -f.bytes_per_iteration):
                share = f.bytes_per_iteration / grad_bytes
                print(
                    f"  {f.local} -> {f.peer}: {f.iterations} iterations detected for {args.steps} steps, "
                    f"{f.bytes_per_iteration} B per iteration ({share:.2f} x the gradient), last F {f.last_f:.2f}"
                )
    except KernelMltcpError as exc:
        print(f"gloo-check: {exc}", file=sys.stderr)
        return 1
    finally:
        if loaded_here:
            loader.unload([alg], log=lambda m: None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
