"""``mlfc-train``'s command line: the parser of both roles and the options turned into the transport's and the
withholding policy's settings. Running a role is hosts/training/cli.py."""

from __future__ import annotations

import argparse

from mlfc.hosts.cc import ALGORITHMS
from mlfc.hosts.training import protocol as proto
from mlfc.hosts.transport import SenderConfig
from mlfc.hosts.transport.recovery import TOLERATED_LOSS_REACTIONS
from mlfc.policy.mltcp import F_HELP, f_argument, resolve_params
from mlfc.policy.withhold import DEFAULT_GAIN, SIGNALS, WithholdPolicy
from mlfc.tls import add_tls_arguments


def _endpoint(text: str, default_port: int) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep:
        return text, default_port
    try:
        return host, int(port)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected IP or IP:PORT") from None


def withhold_policy(args: argparse.Namespace) -> WithholdPolicy:
    """--withhold-gain and --withhold-signal: the policy of a worker's --withhold or a PS's approximate pulls."""
    return WithholdPolicy(gain=args.withhold_gain, signal=args.withhold_signal)


def sender_config(args: argparse.Namespace) -> SenderConfig:
    """The transport's settings of both roles' flows (congestion control, MLTCP, chunk size, timeouts)."""
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


def build_parser(description: str | None = None) -> argparse.ArgumentParser:
    """``mlfc-train ps|worker`` and their options; ``description``: the help's text (cli.py's header)."""
    ap = argparse.ArgumentParser(
        prog="mlfc-train", description=description, formatter_class=argparse.RawDescriptionHelpFormatter
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
                "--pull-precision",
                action="store_true",
                help="with --pull-loss-bound: to workers started with --precision, a congested pull goes as the "
                "change since the worker's copy at fp16 or int8 before any chunk is left out (hosts/training/"
                "pull_copies.py)",
            )
            p.add_argument(
                "--pull-repair-drops",
                action="store_true",
                help="with --pull-loss-bound: a pull tolerates only the chunks it leaves out by plan; what the "
                "network drops beyond them is retransmitted (issue 46's third design)",
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
                "--precision",
                action="store_true",
                help="the precision is part of the decision: shed the share --withhold asks for first by pushing at "
                "fp16 or int8 (the nearest), withholding only the rest; the rounding joins the residual "
                "(mlfc.policy.precision; needs --withhold, no --compress)",
            )
            p.add_argument(
                "--repair-drops",
                action="store_true",
                help="with --withhold: tolerate only the chunks withheld by plan; what the network drops beyond "
                "them is retransmitted, not left to the loss bound (issue 46's third design)",
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
            add_tls_arguments(p, "client")  # the coordinator over TLS (docs/tls.md)
            p.add_argument("--metric", choices=("accuracy", "loss"), default="accuracy")
    return ap
