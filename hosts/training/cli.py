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

from mlfc.hosts.training import options
from mlfc.hosts.training import protocol as proto
from mlfc.hosts.training.options import sender_config, withhold_policy
from mlfc.tls import tls_from_args


def build_parser() -> argparse.ArgumentParser:
    """``mlfc-train``'s parser, its help described by this module's header."""
    return options.build_parser(description=__doc__)


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
        sender=sender_config(args),
        pull_withhold=withhold_policy(args) if args.pull_loss_bound > 0 else None,
        pull_loss_bound=args.pull_loss_bound,
        pull_precision=args.pull_precision,
        pull_repair_drops=args.pull_repair_drops,
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
        sender=sender_config(args),
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
        withhold=withhold_policy(args) if args.withhold else None,
        precision=args.precision,
        repair_drops=args.repair_drops,
        protect_fraction=args.protect_fraction,
        deadline=args.deadline,
        timeout=args.timeout,
        connect_timeout=args.timeout,
        sender=sender_config(args),
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
        tls=tls_from_args(args),
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
