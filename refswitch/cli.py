"""mlfc-refswitch: the reference switch, started like simple_switch_grpc.

    mlfc-refswitch --device-id 1 -i 1@veth1 -i 2@veth2 --grpc-addr 127.0.0.1:9559 --admin-port 9190 \\
        [--queue-mode shared|per-queue] [--priority-queues 8] [--queue-depth 64] [--log-level info] \\
        [--tls-cert sw1.crt --tls-key sw1.key [--tls-ca ca.crt --tls-client-auth]] [--allow-remote]
    mlfc-refswitch cli --admin-port 9190 < commands      # like simple_switch_CLI: set_queue_rate, ...

The switch starts without a pipeline (like ``simple_switch_grpc --no-p4``) and drops every packet
until a controller pushes mlfc's P4Info with SetForwardingPipelineConfig.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from mlfc import contract
from mlfc.controller.queues import QueueConfigError, RefSwitchAdminQueues
from mlfc.refswitch.pipeline import default_rng
from mlfc.refswitch.server import RefSwitchServer, SwitchOptions
from mlfc.refswitch.tm import QUEUE_MODES, SHARED
from mlfc.tls import add_tls_arguments, tls_from_args

DEFAULT_ADMIN_PORT = 9190


def parse_interface(text: str) -> tuple[int, str]:
    port, sep, iface = text.partition("@")
    if not sep or not port.isdigit() or not iface or not 0 <= int(port) <= contract.MAX_PORT:
        raise argparse.ArgumentTypeError(f"{text!r}: expected PORT@IFACE with PORT in 0..{contract.MAX_PORT}")
    return int(port), iface


def switch_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="mlfc-refswitch", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--device-id", type=int, default=1)
    ap.add_argument(
        "-i",
        "--interface",
        action="append",
        type=parse_interface,
        default=[],
        metavar="PORT@IFACE",
        help="attach interface IFACE as switch port PORT (repeatable)",
    )
    ap.add_argument("--grpc-addr", default="127.0.0.1:9559", help="P4Runtime listen address (default %(default)s)")
    ap.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --grpc-addr (needs TLS)")
    add_tls_arguments(ap, "server")
    ap.add_argument(
        "--admin-port",
        type=int,
        default=DEFAULT_ADMIN_PORT,
        help="loopback TCP port of the queue-configuration endpoint (default %(default)s; 0 picks one)",
    )
    ap.add_argument(
        "--queue-mode",
        choices=QUEUE_MODES,
        default=SHARED,
        help="shared: one rate per port shared by its priority queues (a real switch); "
        "per-queue: each priority queue limited on its own (BMv2)",
    )
    ap.add_argument("--priority-queues", type=int, default=8)
    ap.add_argument("--queue-depth", type=int, default=64, help="packets per priority queue (BMv2 default 64)")
    ap.add_argument("--seed", type=int, default=None, help="seed of the ECN marking random numbers")
    ap.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    ap.add_argument("--log-file", default=None)
    ap.add_argument("--no-p4", action="store_true", help="accepted for simple_switch_grpc parity (always the case)")
    return ap


def cli_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="mlfc-refswitch cli", description="Send simple_switch_CLI-style queue commands (stdin) to a refswitch."
    )
    ap.add_argument("--admin-port", type=int, default=DEFAULT_ADMIN_PORT)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--raw", action="store_true", help="print exactly one reply line per command")
    args = ap.parse_args(argv)
    commands = [line.strip() for line in sys.stdin if line.strip() and not line.lstrip().startswith("#")]
    try:
        replies = RefSwitchAdminQueues(args.admin_port, args.host).exchange(commands)
    except QueueConfigError as err:
        print(f"Error: cannot reach refswitch admin port {args.host}:{args.admin_port}: {err}")
        return 1
    if args.raw:
        print("\n".join(replies))
        return 1 if any(r.startswith("Error") for r in replies) else 0
    failed = False
    for cmd, reply in zip(commands, replies, strict=True):
        print(f"RuntimeCmd: {cmd}")
        if reply != "OK":
            print(reply)
        failed |= reply.startswith("Error")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["cli"]:
        return cli_main(argv[1:])
    args = switch_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), filename=args.log_file, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    ports = dict(args.interface)
    if len(ports) != len(args.interface):
        print("mlfc-refswitch: a port number is given twice", file=sys.stderr)
        return 2
    try:
        tls = tls_from_args(args)
    except ValueError as err:
        print(f"mlfc-refswitch: {err}", file=sys.stderr)
        return 2
    options = SwitchOptions(
        device_id=args.device_id,
        ports=ports,
        grpc_addr=args.grpc_addr,
        admin_port=args.admin_port,
        queue_mode=args.queue_mode,
        priority_queues=args.priority_queues,
        queue_depth=args.queue_depth,
        tls=tls,
        allow_remote=args.allow_remote,
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        switch = RefSwitchServer(options, default_rng(args.seed)).start()
    except (OSError, ValueError) as err:
        print(f"mlfc-refswitch: cannot start: {err}", file=sys.stderr)
        return 1
    print(
        f"mlfc-refswitch: device {args.device_id} P4Runtime {switch.grpc_addr} admin 127.0.0.1:{switch.admin_port}",
        flush=True,
    )
    try:
        stop.wait()
    finally:
        switch.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
