"""The queue-configuration endpoint: simple_switch_CLI's queue commands over a loopback TCP line protocol.

One command per line, one reply line per command: ``OK``, ``Error: <why>`` or the command's output.

    set_queue_rate <rate_pps> [<egress_port> [<priority>]]          packets per second (BMv2's unit)
    set_queue_rate_bps <rate_bps> [<egress_port> [<priority>]]      bits per second: a link (not on BMv2)
    set_queue_depth <nb_pkts> [<egress_port> [<priority>]]
    set_queue_depth_bytes <nb_bytes> [<egress_port> [<priority>]]   byte capacity besides nb_pkts; 0: none
    show_queues        queue occupancy, depth limits and rates
    stats              dataplane packet counts
    help
"""

from __future__ import annotations

import logging
import socketserver
import threading
from collections.abc import Callable

from mlfc import contract
from mlfc.refswitch.tm import QueueConfigError, TrafficManager

log = logging.getLogger("mlfc.refswitch.admin")


class AdminError(ValueError):
    pass


def _int(text: str, what: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise AdminError(f"invalid {what} {text!r}: not an integer") from None


# command -> (its value's name, the TrafficManager method it calls)
SETTERS: dict[str, tuple[str, Callable[[TrafficManager, int, int | None, int | None], None]]] = {
    "set_queue_rate": ("rate_pps", TrafficManager.set_rate),
    "set_queue_rate_bps": ("rate_bps", TrafficManager.set_rate_bps),
    "set_queue_depth": ("nb_pkts", TrafficManager.set_depth),
    "set_queue_depth_bytes": ("nb_bytes", TrafficManager.set_depth_bytes),
}


def execute(line: str, tm: TrafficManager, stats: Callable[[], str] | None = None) -> str:
    """Run one command line against the traffic manager; returns the reply line."""
    args = line.split()
    if not args:
        return "OK"
    cmd, rest = args[0], args[1:]
    try:
        if cmd in SETTERS:
            what, setter = SETTERS[cmd]
            if not 1 <= len(rest) <= 3:
                raise AdminError(f"usage: {cmd} <{what}> [<egress_port> [<priority>]]")
            value = _int(rest[0], what)
            port = _int(rest[1], "egress_port") if len(rest) > 1 else None
            prio = _int(rest[2], "priority") if len(rest) > 2 else None
            if port is not None and not 0 <= port < contract.MAX_PORTS:
                raise AdminError(f"egress_port {port} out of range 0..{contract.MAX_PORTS - 1}")
            setter(tm, value, port, prio)
            return "OK"
        if cmd == "show_queues":
            return " | ".join(tm.describe())
        if cmd == "stats":
            return stats() if stats else ""
        if cmd == "help":
            return " | ".join(" ".join(line.split()) for line in __doc__.splitlines()[3:] if line.strip())
        raise AdminError(f"unknown command {cmd!r} (try help)")
    except (AdminError, QueueConfigError) as err:
        return f"Error: {err}"


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        server: AdminServer = self.server  # type: ignore[assignment]
        for raw in self.rfile:
            line = raw.decode(errors="replace").strip()
            reply = execute(line, server.tm, server.stats)
            log.info("admin: %s -> %s", line, reply)
            if line.split()[:1] and line.split()[0].startswith("set_") and reply == "OK":
                server.on_change()
            self.wfile.write(reply.encode() + b"\n")
            self.wfile.flush()


class AdminServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        host: str,
        port: int,
        tm: TrafficManager,
        on_change: Callable[[], None] = lambda: None,
        stats: Callable[[], str] | None = None,
    ) -> None:
        self.tm = tm
        self.on_change = on_change
        self.stats = stats
        super().__init__((host, port), _Handler)
        # A short poll interval keeps shutdown() quick (it waits for the next poll).
        self.thread = threading.Thread(target=self.serve_forever, args=(0.05,), name="admin", daemon=True)

    @property
    def port(self) -> int:
        return self.server_address[1]

    def start(self) -> AdminServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
