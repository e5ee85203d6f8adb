"""``mlfc-coordinator``: run the MAIF coordinator, or explain a job's class.

    mlfc-coordinator run --db coord.sqlite --listen 127.0.0.1:50061 --controller 127.0.0.1:50051 \\
        --token-file token [--fallback maif] [--tls-cert coord.crt --tls-key coord.key --tls-ca ca.crt]
    mlfc-coordinator explain 7 --db coord.sqlite            # offline, from the database
    mlfc-coordinator explain 7 --coordinator 127.0.0.1:50061 --token-file token   # live
    mlfc-coordinator status --db coord.sqlite
    mlfc-coordinator jobs --coordinator 127.0.0.1:50061 --token-file token    # states, workers' iterations
    mlfc-coordinator decisions --db coord.sqlite [--after SEQ]               # when, ranks, acknowledged
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from collections.abc import Sequence

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

from mlfc.policy.fallback import ACTIONS, FallbackParams
from mlfc.policy.maif import OBJECTIVES, MaifParams
from mlfc.policy.priority import PolicyError
from mlfc.proto import coordinator_pb2 as pb
from mlfc.tls import add_tls_arguments, tls_from_args

from .api import read_token
from .client import CoordinatorClient
from .engine import Engine, EngineConfig
from .errors import RequestError
from .metrics import start_metrics_server
from .service import DEFAULT_LISTEN, Coordinator
from .store import Store, StoreError


def _add_policy(p: argparse.ArgumentParser) -> None:
    d = MaifParams()
    g = p.add_argument_group("MAIF policy (see docs/coordinator.md)")
    g.add_argument("--horizon", type=float, default=d.horizon_s, help="gain horizon, seconds (%(default)s)")
    g.add_argument("--min-points", type=int, default=d.min_points, help="points before fitting (%(default)s)")
    g.add_argument("--hysteresis", type=float, default=d.hysteresis, help="relative margin (%(default)s)")
    g.add_argument("--plateau-gain", type=float, default=d.plateau_gain, help="(%(default)s)")
    g.add_argument("--top-class", type=int, default=d.top_class, help="(%(default)s)")
    g.add_argument("--bottom-class", type=int, default=d.bottom_class, help="(%(default)s)")
    g.add_argument("--straggler-lag", type=int, default=d.straggler_lag, help="iterations (%(default)s)")
    g.add_argument("--straggler-boost", type=int, default=d.straggler_boost, help="classes (%(default)s)")
    g.add_argument(
        "--objective",
        choices=OBJECTIVES,
        default=d.objective,
        help="sum: every job's accuracy gain counts; best: a hyper-parameter search, only gains of the best "
        "job's accuracy; potential: the same judged by optimistic curves at the search's next doubling; "
        "elimination: the jobs that cannot be ruled out as the best share the top class; chance: the top class "
        "time-shared in proportion to each job's probability of being the best (%(default)s)",
    )
    g.add_argument("--silence", type=float, default=60.0, help="retire a job silent for this long, s (%(default)s)")
    f = FallbackParams()
    g = p.add_argument_group("MLTCP fallback (mlfc/policy/fallback.py, docs/coordinator.md)")
    g.add_argument(
        "--fallback",
        choices=ACTIONS,
        help="apply no classes (MLTCP alone) until the agents' timings show the jobs contending, then this",
    )
    g.add_argument("--fallback-warmup", type=int, default=f.warmup, help="iterations (%(default)s)")
    g.add_argument("--fallback-window", type=int, default=f.window, help="iterations (%(default)s)")
    g.add_argument("--fallback-enter", type=float, default=f.enter, help="contention to engage (%(default)s)")
    g.add_argument("--fallback-exit", type=float, default=f.exit, help="contention to release (%(default)s)")
    g.add_argument("--fallback-calm", type=int, default=f.calm, help="iterations before a release (%(default)s)")
    g.add_argument(
        "--fallback-overlap-enter", type=float, default=f.overlap_enter, help="phase overlap to engage (%(default)s)"
    )
    g.add_argument(
        "--fallback-overlap-exit", type=float, default=f.overlap_exit, help="phase overlap to release (%(default)s)"
    )


def _config(args: argparse.Namespace) -> EngineConfig:
    params = MaifParams(
        horizon_s=args.horizon,
        min_points=args.min_points,
        hysteresis=args.hysteresis,
        plateau_gain=args.plateau_gain,
        top_class=args.top_class,
        bottom_class=args.bottom_class,
        straggler_lag=args.straggler_lag,
        straggler_boost=args.straggler_boost,
        objective=args.objective,
    )
    fallback = None
    if args.fallback:
        fallback = FallbackParams(
            action=args.fallback,
            warmup=args.fallback_warmup,
            window=args.fallback_window,
            enter=args.fallback_enter,
            exit=args.fallback_exit,
            calm=args.fallback_calm,
            overlap_enter=args.fallback_overlap_enter,
            overlap_exit=args.fallback_overlap_exit,
            max_calm=max(FallbackParams().max_calm, args.fallback_calm),
        )
    return EngineConfig(
        params=params, silence_s=args.silence, interleaving=getattr(args, "interleaving", False), fallback=fallback
    )


def _add_source(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", help="read the coordinator's database (works while it runs or is down)")
    p.add_argument("--coordinator", help="ask a running coordinator instead, e.g. 127.0.0.1:50061")
    p.add_argument("--token-file", help="token for --coordinator")
    p.add_argument("--json", action="store_true", help="print the structured explanation as JSON")
    add_tls_arguments(p, "client")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mlfc-coordinator",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="serve agents and drive the controller")
    r.add_argument("--db", required=True, help="SQLite database (created if missing)")
    r.add_argument("--listen", default=DEFAULT_LISTEN, help="HOST:PORT, loopback unless --allow-remote (%(default)s)")
    r.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --listen address (needs TLS)")
    r.add_argument(
        "--metrics-listen",
        metavar="HOST:PORT",
        help="serve Prometheus /metrics here (port 0: any free port; loopback unless --allow-remote; "
        "docs/metrics.md); omit for none",
    )
    r.add_argument("--controller", help="controller IntentService address; omit to decide without applying")
    r.add_argument("--token-file", required=True, help="file holding the token agents must send")
    r.add_argument(
        "--sync",
        choices=("full", "normal"),
        default="full",
        help="SQLite synchronous mode: full survives power loss, normal only process crashes",
    )
    r.add_argument("--interleaving", action="store_true", help="set Intent.interleaving")
    r.add_argument("-v", "--verbose", action="store_true")
    add_tls_arguments(r, "server")  # with TLS, --controller is reached over TLS too (--tls-ca, this certificate)
    _add_policy(r)
    for name, help_ in (
        ("explain", "why a job got its class"),
        ("status", "all jobs and the latest decision"),
        ("jobs", "every job: state, workers' latest iterations and report counts"),
        ("decisions", "the decisions: when, classes and ranks, acknowledged by the controller or not"),
    ):
        e = sub.add_parser(name, help=help_)
        if name == "explain":
            e.add_argument("job", type=int)
        if name == "decisions":
            e.add_argument("--after", type=int, default=0, help="only decisions after this sequence number")
            e.add_argument("--limit", type=int, default=1000, help="at most this many, oldest first (%(default)s)")
        _add_source(e)
        if name in ("explain", "status"):
            _add_policy(e)
    return p


def _start_metrics(coord: Coordinator, args: argparse.Namespace) -> object | None:
    """The /metrics server of --metrics-listen (None without it); a failure stops the coordinator."""
    if not args.metrics_listen:
        return None
    try:
        server, port = start_metrics_server(coord.engine, args.metrics_listen, args.allow_remote)
    except BaseException:
        coord.stop(grace=0)
        raise
    print(f"mlfc-coordinator: metrics on {args.metrics_listen.rpartition(':')[0]}:{port}", flush=True)
    return server


def _run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s mlfc-coordinator %(levelname)s %(name)s: %(message)s",
    )
    coord = Coordinator(
        args.db,
        token=read_token(args.token_file),
        listen=args.listen,
        controller=args.controller,
        config=_config(args),
        synchronous=args.sync,
        allow_remote=args.allow_remote,
        tls=tls_from_args(args),
    ).start()
    print(f"mlfc-coordinator: listening on {coord.address}", flush=True)
    metrics = _start_metrics(coord, args)
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    if metrics is not None:
        metrics.shutdown()  # type: ignore[attr-defined]
    coord.stop(grace=1.0)
    return 0


def _query(args: argparse.Namespace, source: Engine | CoordinatorClient) -> list[Message]:
    if args.cmd == "explain":
        return [source.explain(args.job)]
    if args.cmd == "status":
        return list(source.status().jobs)
    if args.cmd == "jobs":
        return list(source.jobs())
    return list(source.decisions(args.after, args.limit))


def _fetch(args: argparse.Namespace) -> list[Message]:
    if args.db and args.coordinator:
        raise ValueError("give --db or --coordinator, not both")
    if args.coordinator:
        if not args.token_file:
            raise ValueError("--coordinator needs --token-file")
        client = CoordinatorClient(args.coordinator, token=read_token(args.token_file), tls=tls_from_args(args))
        with client:
            return _query(args, client)
    if not args.db:
        raise ValueError("give --db PATH or --coordinator ADDR")
    store = Store(args.db, readonly=True)
    try:
        engine = Engine(store, _config(args) if hasattr(args, "horizon") else None)
        if args.cmd in ("explain", "status"):
            engine.decide(persist=False)  # re-derive fits and ranks from the stored history and ranker memory
        return _query(args, engine)
    finally:
        store.close()


def _text(m: Message) -> str:
    if isinstance(m, pb.JobExplanation):
        return m.text
    if isinstance(m, pb.JobInfo):
        workers = ", ".join(f"w{w.rank}@{w.last_iteration} ({w.reports} reports)" for w in m.workers) or "no reports"
        reason = f" ({m.reason})" if m.reason else ""
        return f"job {m.job_id} {m.name!r}: {m.state}{reason}; {workers}"
    assert isinstance(m, pb.DecisionRecord)
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(m.created_at)) + f".{int(m.created_at % 1 * 1000):03d}"
    acked = f"applied as generation {m.generation}" if m.applied_at else "not acknowledged"
    ranks = " ".join(f"{j.job_id}->{j.priority}" + (" (plateau)" if j.plateau else "") for j in m.jobs) or "no jobs"
    if m.jobs and not m.intent.jobs:  # ranked, but the fallback held the classes back
        mode = "in-network interleaving" if m.intent.interleaving else "MLTCP alone"
        ranks = f"no classes applied ({mode}; ranked {ranks})"
    return f"decision {m.seq} at {when}: {ranks}; {acked}"


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.cmd == "run":
            return _run(args)
        jobs = _fetch(args)
    except RequestError as e:
        print(f"mlfc-coordinator: {e.message}", file=sys.stderr)
        return 1
    except grpc.RpcError as e:
        print(f"mlfc-coordinator: {e.code().name}: {e.details()}", file=sys.stderr)
        return 1
    except (OSError, ValueError, StoreError, PolicyError) as e:
        print(f"mlfc-coordinator: {e}", file=sys.stderr)
        return 1
    for j in jobs:
        print(json_format.MessageToJson(j, preserving_proto_field_name=True) if args.json else _text(j))
    return 0


if __name__ == "__main__":
    sys.exit(main())
