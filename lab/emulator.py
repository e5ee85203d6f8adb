"""A training-job emulator: iterations of compute then communication over the mlfc transport.

Parameter-server data parallelism: each worker computes (sleeps for the profile's compute time),
pushes its gradients to the job's parameter server, and waits for the updated model (pull). The
PS pulls to every worker once all pushes of the iteration are in. Workers print one JSON line per
iteration — what `mlfc-agent` reports to the coordinator, and what the experiment runner records:

    {"iteration": 3, "accuracy": 0.41, "compute_s": 0.5, "comm_s": 0.31, "bytes": 2000000,
     "worker": 0, "start": ..., "comm_start": ..., "comm_end": ..., "end": ...}

    python -m mlfc.lab.emulator ps --job 1 --bind 10.0.1.101 --workers 2 --iterations 20 ...
    python -m mlfc.lab.emulator worker --job 1 --rank 0 --bind 10.0.1.1 --ps 10.0.1.101 ...

Times are wall-clock (all emulated hosts share one clock). Accuracy follows a synthetic learning
curve acc(i) = acc_max * (1 - exp(-(i + 1) / tau)) so the coordinator has something to rank.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from dataclasses import dataclass

import numpy as np

# The same port layout as real training jobs, so a scenario can swap one for the other.
from mlfc.hosts.cc import ALGORITHMS
from mlfc.hosts.training.protocol import PS_PORT, PS_TX_PORT_BASE, WORKER_RX_PORT, WORKER_TX_PORT
from mlfc.hosts.transport import Receiver, ReceiverConfig, Sender, SenderConfig
from mlfc.hosts.transport.recovery import TOLERATED_LOSS_REACTIONS
from mlfc.policy.mltcp import F_HELP, f_argument, format_params, resolve_params
from mlfc.policy.mltcp_tuning import TuningParams


@dataclass(frozen=True)
class JobProfile:
    """Per-iteration work of one worker. Real models scaled so that BMv2 carries them."""

    name: str
    push_bytes: int
    pull_bytes: int
    compute_s: float


# Gradient sizes in proportion to the real models (VGG16 528 MB, BERT-base 420 MB, ResNet-50 98 MB of
# float32 parameters), scaled down ~400x so that an iteration takes about a second on a BMv2 bottleneck.
PROFILES = {
    "vgg16": JobProfile("vgg16", 1_300_000, 1_300_000, 1.2),
    "bert": JobProfile("bert", 1_050_000, 1_050_000, 1.0),
    "resnet50": JobProfile("resnet50", 250_000, 250_000, 0.5),
    "tiny": JobProfile("tiny", 60_000, 60_000, 0.1),
}


def synthetic_accuracy(iteration: int, acc_max: float, tau: float) -> float:
    return acc_max * (1.0 - math.exp(-(iteration + 1) / tau))


def slowdown(iteration: int, straggle: float, straggle_from: int, randomly: bool, rng: random.Random) -> float:
    """The compute-time multiplier of a straggler's iteration: ``straggle`` from ``straggle_from`` on, or with
    ``randomly`` a draw from [1, straggle] per iteration (one draw per iteration from then, so the sequence
    depends only on the seed)."""
    if iteration < straggle_from:
        return 1.0
    return 1.0 + (straggle - 1.0) * rng.random() if randomly else straggle


def _sender_config(args: argparse.Namespace) -> SenderConfig:
    mltcp = resolve_params(args.f, args.cc) if args.mltcp else None
    tune = TuningParams() if args.mltcp and args.mltcp_tune else None
    return SenderConfig(
        cc=args.cc, mltcp=mltcp, mltcp_tune=tune, line_rate=args.line_rate, peer_timeout=args.peer_timeout,
        idle_gap=None, tolerated_loss=args.tolerated_loss,
    )  # fmt: skip


def _receiver_config(args: argparse.Namespace) -> ReceiverConfig:
    return ReceiverConfig(jobs=frozenset({args.job}), ack_delay=args.ack_delay)


def gradients(nbytes: int, seed: int) -> bytes:
    """float32 values with a heavy-tailed magnitude, so the transport's magnitude-based importance
    classes spread as they would for real gradients (an all-zero buffer would be one class)."""
    rng = np.random.default_rng(seed)
    n = max(1, nbytes // 4)
    return (rng.standard_t(3, n).astype(np.float32) * 1e-3).tobytes()[:nbytes].ljust(nbytes, b"\0")


def run_worker(args: argparse.Namespace) -> int:
    push = gradients(args.push_bytes, seed=args.job * 1000 + args.rank)
    with (
        Receiver((args.bind, WORKER_RX_PORT), _receiver_config(args)) as rx,
        Sender((args.ps, PS_PORT), (args.bind, WORKER_TX_PORT), _sender_config(args)) as tx,
    ):
        # All jobs of a run start together at --start-at (wall clock): the worst case, every first
        # communication phase collides.
        begin = (args.start_at or time.time()) + args.start_delay
        time.sleep(max(0.0, begin - time.time()))
        # A random straggler draws its slowdown per iteration, uniform in [1, --straggle], from a generator seeded
        # by job and rank: every treatment of a mix sees the same sequence.
        slow = random.Random(args.job * 1000 + args.rank)
        for it in range(args.iterations):
            start = time.time()
            time.sleep(args.compute_s * slowdown(it, args.straggle, args.straggle_from, args.straggle_random, slow))
            comm_start = time.time()
            tx.start_iteration(len(push))
            res = tx.send_tensor(
                args.job,
                it,
                args.rank,
                push,
                importance=args.importance,
                loss_bound=args.loss_bound,
                timeout=args.timeout,
            )
            push_end = time.time()  # every pushed chunk acknowledged: the pull direction takes over
            f = tx.mltcp_params  # what this push ran with (it moves under --mltcp-tune)
            pulled = rx.recv(timeout=args.timeout)
            while pulled.iteration != it:  # a late duplicate of an earlier pull
                pulled = rx.recv(timeout=args.timeout)
            end = time.time()
            print(
                json.dumps(
                    {
                        "iteration": it,
                        "accuracy": round(synthetic_accuracy(it, args.acc_max, args.tau), 5),
                        "compute_s": round(comm_start - start, 4),
                        "comm_s": round(end - comm_start, 4),
                        "bytes": len(push),
                        "worker": args.rank,
                        "job": args.job,
                        "start": start,
                        "comm_start": comm_start,
                        "push_end": push_end,
                        "comm_end": end,
                        "end": end,
                        "retransmits": res.retransmits,
                        "zero_filled": len(pulled.loss.missing_chunks),
                        "mltcp_f": "" if f is None else format_params(f),
                    }
                ),
                flush=True,
            )
        stats = tx.stats
        print(
            json.dumps(
                {
                    "summary": True,
                    "job": args.job,
                    "worker": args.rank,
                    "retransmits": stats.retransmits,
                    "ece_acks": stats.ece_acks,
                    "cnps": stats.cnps,
                    "timeouts": stats.timeouts,
                }
            ),
            flush=True,
        )
    return 0


def run_ps(args: argparse.Namespace) -> int:
    pull = gradients(args.pull_bytes, seed=args.job)
    workers = [w for w in args.worker_ips.split(",") if w]
    if len(workers) != args.workers:
        print(f"--worker-ips names {len(workers)} workers, --workers says {args.workers}", file=sys.stderr)
        return 2
    cfg = _sender_config(args)
    senders = [Sender((ip, WORKER_RX_PORT), (args.bind, PS_TX_PORT_BASE + r), cfg) for r, ip in enumerate(workers)]
    try:
        with Receiver((args.bind, PS_PORT), _receiver_config(args)) as rx:
            for it in range(args.iterations):
                have: set[int] = set()
                while len(have) < args.workers:
                    got = rx.recv(timeout=args.timeout)
                    if got.iteration == it:
                        have.add(got.tensor_id)
                for r, tx in enumerate(senders):
                    tx.start_iteration(len(pull))
                    tx.send_tensor(
                        args.job,
                        it,
                        r,
                        pull,
                        importance=args.importance,
                        loss_bound=args.loss_bound,
                        timeout=args.timeout,
                    )
    finally:
        for tx in senders:
            tx.close()
    return 0


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m mlfc.lab.emulator",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = ap.add_subparsers(dest="role", required=True)
    for role in ("worker", "ps"):
        p = sub.add_parser(role)
        p.add_argument("--job", type=int, required=True)
        p.add_argument("--bind", required=True, help="this host's IP address")
        p.add_argument("--iterations", type=int, default=20)
        p.add_argument("--cc", default="reno", choices=ALGORITHMS)
        p.add_argument("--mltcp", action="store_true", help="MLTCP augmentation on")
        p.add_argument("--f", type=f_argument, default=None, metavar="F", help=F_HELP)
        p.add_argument("--mltcp-tune", action="store_true", help="tune slope/intercept online (starting from F)")
        p.add_argument("--line-rate", type=float, default=100e6, help="host NIC rate, bits/s (DCQCN start rate)")
        p.add_argument("--importance", type=int, default=None, help="one class for every chunk (default: by magnitude)")
        p.add_argument("--loss-bound", type=float, default=0.0)
        p.add_argument(
            "--tolerated-loss",
            choices=TOLERATED_LOSS_REACTIONS,
            default=SenderConfig().tolerated_loss,
            help="the window's reaction to a loss left within the loss bound: loss, ecn (one mark), none",
        )
        p.add_argument(
            "--ack-delay", type=float, default=ReceiverConfig.ack_delay, help="s an ACK may wait for more chunks"
        )
        p.add_argument("--timeout", type=float, default=60.0)
        p.add_argument("--peer-timeout", type=float, default=10.0)
        p.add_argument("--push-bytes", type=int, default=PROFILES["resnet50"].push_bytes)
        p.add_argument("--pull-bytes", type=int, default=PROFILES["resnet50"].pull_bytes)
        if role == "worker":
            p.add_argument("--rank", type=int, default=0)
            p.add_argument("--ps", required=True, help="the parameter server's IP address")
            p.add_argument("--compute-s", type=float, default=PROFILES["resnet50"].compute_s)
            p.add_argument("--start-delay", type=float, default=0.0, help="seconds after --start-at")
            p.add_argument("--start-at", type=float, default=0.0, help="wall-clock start (default: now)")
            p.add_argument("--straggle", type=float, default=1.0, help="compute-time multiplier of a straggler")
            p.add_argument("--straggle-from", type=int, default=0)
            p.add_argument(
                "--straggle-random", action="store_true", help="slowdown drawn per iteration from [1, --straggle]"
            )
            p.add_argument("--acc-max", type=float, default=0.9)
            p.add_argument("--tau", type=float, default=10.0)
        else:
            p.add_argument("--workers", type=int, default=1)
            p.add_argument("--worker-ips", required=True, help="comma-separated worker IPs, rank order")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return run_worker(args) if args.role == "worker" else run_ps(args)
    except (TimeoutError, OSError) as exc:
        print(f"emulator {args.role} job {args.job}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
