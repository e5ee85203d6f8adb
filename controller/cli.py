"""``mlfc-controller``: run the daemon, or talk to a running one.

mlfc-controller run --config configs/example.yaml     # the daemon (Ctrl-C / SIGTERM to stop)
mlfc-controller check --config configs/example.yaml   # validate the deployment file and artifacts
mlfc-controller status [--addr 127.0.0.1:50090] [--json]
mlfc-controller apply intent.yaml [--addr ...]        # an Intent as YAML/JSON (proto field names)
mlfc-controller get [--addr ...]
mlfc-controller pipeline --grpc-addr 127.0.0.1:50051    # what a switch runs (joins as a backup; exit 1: none)
Clients take --tls-ca [--tls-cert --tls-key] [--tls-server-name] when the controller or switch serves TLS.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
from pathlib import Path

import grpc
import yaml
from google.protobuf import json_format

from mlfc.controller.client import IntentClient
from mlfc.controller.config import DEFAULT_INTENT_ADDR, load_config
from mlfc.controller.errors import ValidationError
from mlfc.controller.pipeline import Pipeline, PipelineError
from mlfc.proto import intent_pb2 as pb
from mlfc.tls import TlsConfig, TlsError, add_tls_arguments, tls_from_args

LOG = logging.getLogger("mlfc.controller")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mlfc-controller", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the controller daemon")
    run.add_argument("--config", required=True, type=Path, help="deployment file (YAML)")
    run.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    check = sub.add_parser("check", help="validate a deployment file and its pipeline artifacts")
    check.add_argument("--config", required=True, type=Path)
    for name, text in (("status", "per-switch state and per-job counters"), ("get", "the current intent")):
        p = sub.add_parser(name, help=text)
        p.add_argument(
            "--addr", default=DEFAULT_INTENT_ADDR, help=f"intent API address (default {DEFAULT_INTENT_ADDR})"
        )
        p.add_argument("--json", action="store_true", help="print JSON")
        p.add_argument("--timeout", type=float, default=5.0)
        add_tls_arguments(p, "client")
    probe = sub.add_parser("pipeline", help="the pipeline a switch runs, asked as a read-only backup")
    probe.add_argument("--grpc-addr", required=True)
    probe.add_argument("--device-id", type=int, default=1)
    probe.add_argument("--election-id", type=int, default=1, help="ours (default 1: below any controller)")
    add_tls_arguments(probe, "client")
    apply = sub.add_parser("apply", help="send an intent (YAML or JSON with the proto's field names)")
    apply.add_argument("intent", type=Path)
    apply.add_argument("--addr", default=DEFAULT_INTENT_ADDR)
    apply.add_argument("--timeout", type=float, default=30.0)
    add_tls_arguments(apply, "client")
    args = parser.parse_args(argv)

    try:
        if args.command == "run":
            return _run(args.config, args.log_level)
        if args.command == "check":
            return _check(args.config)
        if args.command == "pipeline":
            return _pipeline(args.grpc_addr, args.device_id, args.election_id, tls_from_args(args))
        with IntentClient(args.addr, tls=tls_from_args(args)) as client:
            if args.command == "status":
                reply = client.status(timeout_s=args.timeout)
                print(_to_json(reply) if args.json else format_status(reply))
            elif args.command == "get":
                reply = client.get(timeout_s=args.timeout)
                text = yaml.safe_dump(
                    json_format.MessageToDict(reply, preserving_proto_field_name=True), sort_keys=False
                )
                print(_to_json(reply) if args.json else text.rstrip())
            elif args.command == "apply":
                intent = load_intent(args.intent)
                reply = client.apply(intent, timeout_s=args.timeout)
                print(f"generation {reply.generation}: {reply.entries} entries per switch")
                for u in reply.unconverged:
                    print(f"not converged: {u.switch}: {pb.SyncState.Name(u.state)}: {u.reason}", file=sys.stderr)
                if reply.unconverged:
                    return 3
        return 0
    except ValidationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except grpc.RpcError as exc:
        print(f"error: {exc.code().name}: {exc.details()}", file=sys.stderr)  # type: ignore[attr-defined]
        return 1
    except TlsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _run(config_path: Path, log_level: str) -> int:
    from mlfc.controller.daemon import Daemon  # grpc.aio/finsy only for the daemon

    logging.basicConfig(level=log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if log_level != "DEBUG":
        logging.getLogger("finsy").setLevel(logging.ERROR)  # per-connection chatter ("gNMI is not implemented")
    config = load_config(config_path)

    async def main_async() -> None:
        daemon = Daemon(config)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, daemon.request_stop)
        await daemon.run()

    asyncio.run(main_async())
    return 0


def _check(config_path: Path) -> int:
    config = load_config(config_path)
    pipeline = Pipeline.load(config.p4info, config.device_config)
    from mlfc.controller.compile import compile_policy
    from mlfc.controller.validate import default_policy

    compiled = compile_policy(default_policy(config), config, pipeline)
    print(f"{config_path}: {len(config.switches)} switch(es), pipeline {pipeline.name}")
    for sw in config.switches:
        print(f"  {sw.name} {sw.grpc_addr} device {sw.device_id}: {len(compiled.entries[sw.name])} default entries")
    return 0


def _pipeline(grpc_addr: str, device_id: int, election_id: int, tls: TlsConfig | None = None) -> int:
    """Exit 0 when the switch runs a pipeline (printed with who is primary), 1 when it runs none."""
    from mlfc.controller.switch import SwitchError
    from mlfc.controller.sync import SwitchConnection

    try:
        with SwitchConnection(grpc_addr, device_id, election_id=election_id, timeout_s=10, tls=tls) as conn:
            cookie = conn.pipeline_cookie()
            primary = conn.client.primary_election_id
    except (SwitchError, TimeoutError) as exc:
        print(f"error: {grpc_addr}: {exc}", file=sys.stderr)
        return 2
    if cookie is None:
        print(f"{grpc_addr}: no pipeline loaded")
        return 1
    print(f"{grpc_addr}: pipeline cookie {cookie:#x}; primary election id {primary}")
    return 0


def load_intent(path: Path) -> pb.Intent:
    """An Intent from YAML/JSON; unknown field names are errors (json_format names them)."""
    data = yaml.safe_load(path.read_text()) or {}
    try:
        return json_format.ParseDict(data, pb.Intent())
    except json_format.ParseError as exc:
        raise ValidationError(str(path), str(exc)) from None


def _to_json(msg: object) -> str:
    return json.dumps(
        json_format.MessageToDict(msg, always_print_fields_with_no_presence=True, preserving_proto_field_name=True),
        indent=2,
    )  # type: ignore[arg-type]


def format_status(reply: pb.StatusReply) -> str:
    lines = [f"intent generation {reply.generation}"]
    for sw in reply.switches:
        sync = pb.SyncState.Name(sw.state) if sw.state else "-"
        if sw.state == pb.NOT_PRIMARY:  # another client holds mastership; we may be re-arbitrating
            link = "backup" if sw.connected else "backup, reconnecting"
        else:
            link = ("connected, primary" if sw.primary else "connected, backup") if sw.connected else "DISCONNECTED"
        lines.append(
            f"switch {sw.name}: {sync}, {link}, pipeline {sw.pipeline or '-'}, "
            f"generation {sw.applied_generation if sw.applied else '-'}"
        )
        if sw.entries:
            short = sorted((t.rsplit(".", 1)[-1], n) for t, n in sw.entries.items())
            tables = ", ".join(f"{t}={n}" for t, n in short)
            lines.append(f"  entries: {tables}")
        if sw.last_error:
            lines.append(f"  last error: {sw.last_error}")
        if sw.queue_error:
            lines.append(f"  QUEUES NOT SHAPED: {sw.queue_error}")
    if reply.jobs:
        lines.append(f"{'job':>6} {'packets':>12} {'bytes':>14} {'ecn_marks':>10} {'drops':>10}")
        for j in reply.jobs:
            label = "other" if j.job_id == 0 else str(j.job_id)
            lines.append(f"{label:>6} {j.packets:>12} {j.bytes:>14} {j.ecn_marks:>10} {j.drops:>10}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
