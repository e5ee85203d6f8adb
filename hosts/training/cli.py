"""``mlfc-train``: real data-parallel training over the mlfc transport (parameter server + workers).

    mlfc-train ps     --job 1 --workers 2 --task digits --iterations 110 [--bind 127.0.0.1] [--port P]
    mlfc-train worker --job 1 --rank 0 --ps 127.0.0.1 --task digits [--bind 127.0.0.1] [--rx-port 0]

The PS prints one JSON line per iteration ({"ps": true, ...}: lost chunks, timings), each worker one per
iteration (the training-job emulator's fields plus accuracy, loss and lost-chunk counts) and a final
{"summary": true, ...}. Wrap a worker in ``mlfc-agent`` (or give --coordinator/--token-file) to report its
progress to the coordinator. Exit status: 0 done, 1 the job failed (peer gone, timeout), 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from mlfc.hosts.cc import ALGORITHMS
from mlfc.hosts.training import protocol as proto
from mlfc.hosts.transport import SenderConfig
from mlfc.hosts.transport.recovery import TOLERATED_LOSS_REACTIONS
from mlfc.policy.mltcp import F_HELP, f_argument, resolve_params
from mlfc.policy.withhold import DEFAULT_GAIN, SIGNALS, WithholdPolicy


def _endpoint(text: str, default_port: int) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep:
        return text, default_port
    try:
        return host, int(port)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected IP or IP:PORT") from None


def _withhold_policy(args: argparse.Namespace) -> WithholdPolicy:
    return WithholdPolicy(gain=args.withhold_gain, signal=args.withhold_signal)


def _sender_config(args: argparse.Namespace) -> SenderConfig:
    mltcp = resolve_params(args.f, args.cc) if args.mltcp else None
    return SenderConfig(
        chunk_size=args.chunk,
        cc=args.cc,
        mltcp=mltcp,
        line_rate=args.line_rate,
        peer_timeout=args.peer_timeout,
        idle_gap=None,
        tolerated_loss=args.tolerated_loss,
    )


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="mlfc-train", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="role", required=True)
    for role in ("ps", "worker"):
        p = sub.add_parser(role, help="the parameter server" if role == "ps" else "one worker")
        p.add_argument("--job", type=int, required=True, help="job id 1..65535 (the shim's job_id)")
        p.add_argument("--bind", default="127.0.0.1", help="this host's IP address (%(default)s)")
        p.add_argument("--task", default="digits", help="digits | synthetic | module:function (%(default)s)")
        p.add_argument("--width", type=int, default=None, help="model width (task default)")
        p.add_argument("--iterations", type=int, default=0, help="PS: iterations; worker: 0 = the PS's")
        p.add_argument(
            "--mode",
            choices=proto.MODES,
            default="ps",
            help="ps: pull parameters (default); aggregate: pull mean gradients (DDP hook)",
        )
        p.add_argument("--cc", default="reno", choices=ALGORITHMS)
        p.add_argument("--mltcp", action="store_true", help="MLTCP augmentation on")
        p.add_argument("--f", type=f_argument, default=None, metavar="F", help=F_HELP)
        p.add_argument("--line-rate", type=float, default=100e6, help="host NIC rate, bits/s (DCQCN start rate)")
        p.add_argument("--chunk", type=int, default=SenderConfig().chunk_size, help="payload bytes per chunk")
        p.add_argument(
            "--tolerated-loss",
            choices=TOLERATED_LOSS_REACTIONS,
            default=SenderConfig().tolerated_loss,
            help="the window's reaction to a loss left within the loss bound: as a loss, as one ECN mark, "
            "none (%(default)s)",
        )
        p.add_argument(
            "--deadline",
            type=float,
            default=0.02,
            help="receiver: s after a tensor's last chunk before missing chunks may be zero-filled",
        )
        p.add_argument("--timeout", type=float, default=60.0, help="s to wait for a peer / one transfer")
        p.add_argument(
            "--withhold-gain",
            type=float,
            default=None,
            help="f(c) = min(1, GAIN * c) of a push (worker --withhold) or pull (PS --pull-loss-bound) left out at "
            f"congestion c (default: the signal's, {DEFAULT_GAIN})",
        )
        p.add_argument(
            "--withhold-signal",
            choices=SIGNALS,
            default=WithholdPolicy().signal,
            help="congestion c: the others' share of a standing queue, the share of chunks marked or dropped, or "
            "the flow's share of the excess by the queue the switches report (telemetry) (mlfc.policy.withhold; "
            "%(default)s)",
        )
        p.add_argument("--peer-timeout", type=float, default=10.0)
        p.add_argument("-v", "--verbose", action="store_true")
        if role == "ps":
            p.add_argument("--workers", type=int, required=True)
            p.add_argument("--port", type=int, default=proto.PS_PORT, help="push port (%(default)s; 0: any)")
            p.add_argument(
                "--tx-port-base",
                type=int,
                default=proto.PS_TX_PORT_BASE,
                help="pull flow to worker r from this port + r (0: any)",
            )
            p.add_argument("--lr", type=float, default=None, help="SGD learning rate (task default)")
            p.add_argument("--momentum", type=float, default=0.9)
            p.add_argument("--weight-decay", type=float, default=0.0)
            p.add_argument("--seed", type=int, default=0, help="model init and data order")
            p.add_argument(
                "--checkpoint",
                default=None,
                metavar="FILE",
                help="PS: keep the model, optimizer and iteration here (written atomically, fsynced); a PS "
                "started with an existing FILE resumes from it and calls its workers back. Aggregate mode: keep "
                "the admitted ranks here; a restarted aggregator tells them at once that it cannot resume them",
            )
            p.add_argument("--checkpoint-every", type=int, default=1, help="save after every k-th step (%(default)s)")
            p.add_argument(
                "--pull-loss-bound",
                type=float,
                default=0.0,
                help="approximate pulls: under congestion leave out up to this share of each pulled tensor, the "
                "chunks that changed least; the worker keeps its previous values there (0: pulls whole)",
            )
            p.add_argument(
                "--metrics",
                default=None,
                metavar="[HOST:]PORT",
                help="serve Prometheus /metrics (lost chunks) here; host defaults to 127.0.0.1",
            )
        else:
            p.add_argument("--rank", type=int, required=True)
            p.add_argument(
                "--ps",
                required=True,
                type=lambda t: _endpoint(t, proto.PS_PORT),
                help=f"the parameter server, IP[:PORT] (port {proto.PS_PORT})",
            )
            p.add_argument("--rx-port", type=int, default=proto.WORKER_RX_PORT, help="pull port (0: any)")
            p.add_argument("--tx-port", type=int, default=proto.WORKER_TX_PORT, help="push flow's port (0: any)")
            p.add_argument("--batch-size", type=int, default=None, help="per worker (task default)")
            p.add_argument(
                "--loss-bound",
                type=float,
                default=0.0,
                help="fraction of each pushed tensor the PS may zero-fill (%(default)s)",
            )
            p.add_argument(
                "--no-loss-feedback",
                dest="loss_feedback",
                action="store_false",
                help="zero-filled gradient elements are gone (default: added to the tensor's next push)",
            )
            p.add_argument(
                "--withhold",
                action="store_true",
                help="the network decides how much: withhold the least important chunks of a push, up to the loss "
                "bound, as this job's congestion estimate says (mlfc.policy.withhold; needs --loss-bound > 0)",
            )
            p.add_argument(
                "--protect-fraction",
                type=float,
                default=0.25,
                help="largest-gradient chunks of each tensor that are protected (%(default)s)",
            )
            p.add_argument(
                "--compress",
                default="none",
                metavar="none|fp16|topk:F",
                help="rigid compression of every push: fp16, or the F largest gradients with error feedback "
                "(needs --loss-bound 0; %(default)s)",
            )
            p.add_argument("--eval-every", type=int, default=5, help="validation every k iterations (%(default)s)")
            p.add_argument("--eval-all", action="store_true", help="every rank evaluates (default: rank 0)")
            p.add_argument(
                "--compute-s",
                type=float,
                default=0.0,
                help="pad each iteration's real compute to this many seconds (reported as pad_s)",
            )
            p.add_argument("--start-at", type=float, default=0.0, help="wall-clock start of iteration 0")
            p.add_argument("--start-delay", type=float, default=0.0, help="seconds after --start-at")
            p.add_argument("--coordinator", default=None, help="report progress to this coordinator in-process")
            p.add_argument("--token-file", default=None, help="the coordinator's token (with --coordinator)")
            p.add_argument("--metric", choices=("accuracy", "loss"), default="accuracy")
    return ap


def _run_ps(args: argparse.Namespace) -> int:
    from mlfc.hosts.training.accounting import start_metrics_server
    from mlfc.hosts.training.loop import Checkpoint, TrainConfig, make_parameter_server
    from mlfc.hosts.training.server import ServerConfig
    from mlfc.hosts.training.tasks import load_task

    if args.mode != "ps":
        return _run_aggregator(args)
    if args.iterations < 1:
        raise ValueError("--iterations must be >= 1")
    task = load_task(args.task, args.seed, args.width)
    train = TrainConfig(
        iterations=args.iterations, lr=args.lr, momentum=args.momentum, weight_decay=args.weight_decay, seed=args.seed
    )
    scfg = ServerConfig(
        job=args.job,
        workers=args.workers,
        bind=args.bind,
        port=args.port,
        tx_port_base=args.tx_port_base or None,
        deadline=args.deadline,
        timeout=args.timeout,
        sender=_sender_config(args),
        pull_withhold=_withhold_policy(args) if args.pull_loss_bound > 0 else None,
        pull_loss_bound=args.pull_loss_bound,
    )
    ckpt = Checkpoint(Path(args.checkpoint), args.checkpoint_every) if args.checkpoint else None
    with make_parameter_server(task, train, scfg, checkpoint=ckpt) as srv:
        if srv.iteration:
            print(f"mlfc-train ps: job {args.job} resumed from {args.checkpoint} at iteration {srv.iteration}",
                  file=sys.stderr, flush=True)  # fmt: skip
        if args.metrics:
            _server, port = start_metrics_server(srv.ledger, args.metrics)
            print(f"mlfc-train ps: metrics on port {port}", file=sys.stderr, flush=True)
        print(
            f"mlfc-train ps: job {args.job} {proto.PS_LISTENING} {srv.address[0]}:{srv.address[1]}",
            file=sys.stderr,
            flush=True,
        )
        srv.accept()
        srv.run(args.iterations)
        print(
            json.dumps(
                {
                    "summary": True,
                    "ps": True,
                    "job": args.job,
                    **srv.ledger.totals(),
                    "stray": srv.stray,
                    "rejoins": srv.rejoins,
                    "pull_failures": srv.pull_failures,
                }
            ),
            flush=True,
        )
    return 0


def _run_aggregator(args: argparse.Namespace) -> int:
    from mlfc.hosts.training.accounting import start_metrics_server
    from mlfc.hosts.training.server import ServerConfig, TrainingServer

    scfg = ServerConfig(
        job=args.job,
        workers=args.workers,
        bind=args.bind,
        port=args.port,
        mode="aggregate",
        tx_port_base=args.tx_port_base or None,
        deadline=args.deadline,
        timeout=args.timeout,
        sender=_sender_config(args),
        roster_file=args.checkpoint,
    )
    with TrainingServer(scfg) as srv:
        if args.metrics:
            start_metrics_server(srv.ledger, args.metrics)
        print(
            f"mlfc-train ps: job {args.job} aggregating on {srv.address[0]}:{srv.address[1]}",
            file=sys.stderr,
            flush=True,
        )
        srv.accept()
        srv.serve()
        print(json.dumps({"summary": True, "ps": True, "job": args.job, **srv.ledger.totals()}), flush=True)
    return 0


def run_worker_command(args: argparse.Namespace, *, push_sock=None) -> int:
    """``mlfc-train worker`` with parsed ``args``; ``push_sock`` replaces the push flow's socket (tests)."""
    from mlfc.hosts.training.client import ClientConfig, WorkerClient
    from mlfc.hosts.training.compress import parse
    from mlfc.hosts.training.loop import TrainConfig, run_worker
    from mlfc.hosts.training.tasks import load_task

    if args.mode != "ps":
        raise ValueError("workers in aggregate mode are DDP processes: see mlfc.hosts.training.ddp")
    task = load_task(args.task, 0, args.width)
    train = TrainConfig(
        iterations=args.iterations,
        batch_size=args.batch_size,
        eval_every=args.eval_every,
        eval_all=args.eval_all,
        compute_s=args.compute_s,
    )
    ccfg = ClientConfig(
        job=args.job,
        rank=args.rank,
        ps=args.ps,
        bind=args.bind,
        rx_port=args.rx_port,
        tx_port=args.tx_port,
        loss_bound=args.loss_bound,
        loss_feedback=args.loss_feedback,
        withhold=_withhold_policy(args) if args.withhold else None,
        protect_fraction=args.protect_fraction,
        deadline=args.deadline,
        timeout=args.timeout,
        connect_timeout=args.timeout,
        sender=_sender_config(args),
        compression=parse(args.compress),
    )
    agent = None
    if args.coordinator:
        agent = _agent(args)
    try:
        with WorkerClient(ccfg, push_sock=push_sock) as client:
            report = None if agent is None else _reporter(agent, args.rank, args.metric)
            summary = run_worker(task, client, train, report=report, start_at=args.start_at + args.start_delay)
            st = client.tx.stats
            print(
                json.dumps(
                    {
                        "summary": True,
                        "job": args.job,
                        "worker": args.rank,
                        "iterations": summary.iterations,
                        "accuracy": summary.accuracy,
                        "lost_chunks": summary.lost_chunks,
                        "retransmits": st.retransmits,
                        "ece_acks": st.ece_acks,
                        "cnps": st.cnps,
                        "timeouts": st.timeouts,
                        "seconds": round(summary.seconds, 3),
                    }
                ),
                flush=True,
            )
    finally:
        if agent is not None:
            agent.finish()
    return 0


def _agent(args: argparse.Namespace):
    from mlfc.hosts.agent import Agent

    if not args.token_file:
        raise ValueError("--coordinator needs --token-file")
    # rank 0 registers the job; the others only report (as mlfc-agent --no-register)
    return Agent(
        args.job,
        coordinator=args.coordinator,
        token_file=args.token_file,
        metric=args.metric,
        register=args.rank == 0,
        worker=args.rank,
        name=f"{args.task}",
        bytes_per_iteration=0,
        final_iteration=max(0, args.iterations - 1),
    ).start()


def _reporter(agent, rank: int, metric: str):
    def report(rec: dict) -> None:
        value = rec.get("accuracy") if metric == "accuracy" else rec.get("loss")
        agent.report(
            rec["iteration"],
            value,
            worker=rank,
            compute_s=rec["compute_s"],
            comm_s=rec["comm_s"],
            bytes=rec["bytes"],
            timestamp=rec["end"],
        )

    return report


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        stream=sys.stderr,
        format=f"mlfc-train {args.role}: %(levelname)s %(message)s",
    )
    from mlfc.hosts.training.client import WorkerError
    from mlfc.hosts.training.protocol import ProtocolError
    from mlfc.hosts.training.server import TrainingError

    try:
        return _run_ps(args) if args.role == "ps" else run_worker_command(args)
    except ValueError as exc:
        print(f"mlfc-train {args.role}: {exc}", file=sys.stderr)
        return 2
    except (TrainingError, WorkerError, ProtocolError, TimeoutError, OSError) as exc:
        print(f"mlfc-train {args.role} job {args.job}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
