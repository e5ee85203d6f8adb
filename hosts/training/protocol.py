"""What the parameter server and its workers say to each other over the mlfc transport.

Every transfer is one tagged tensor (job, iteration, tensor id). Gradient pushes and parameter (or mean
gradient) pulls use the model's tensor index as the tensor id and the training iteration as the iteration,
so what a switch sees on the wire matches what the worker reports to the coordinator. Control messages
use the top tensor ids (JSON bodies, or the initial parameters), sent protected and lossless:

=========== =========== ========= =====================================================================
tensor id   direction   iteration body
=========== =========== ========= =====================================================================
HELLO       worker->PS  session   {"rank", "rx": [ip, port], "numels": [...], "mode", "compression"?}
WELCOME     PS->worker  session   {"mode", "workers", "tensors", "iteration", "error"?}
INITIAL     PS->worker  session   every parameter, float32, concatenated in tensor order (PS mode)
STATS       PS->worker  i         what the PS did with iteration i's pushes (lost chunks, timings)
BYE         worker->PS  0         {"rank", "error"?}: the worker is done (aggregate mode ends when all said
                                  it) or, with "error", gave up (aggregate mode ends the job at once)
REJOIN      PS->worker  session   {"iteration"}: a restarted PS (from its checkpoint): connect again
ABORT       PS->worker  session   {"error"}: aggregate mode: the job cannot go on (e.g. a rank beyond
                                  ``workers`` knocked, or the aggregator restarted: it tells the ranks of
                                  its roster file); the worker's waits raise with the message. A worker
                                  takes only an ABORT of its own session
PING        PS->worker  n         empty: aggregate mode, idle: is the worker still there (its receiver acks)
=========== =========== ========= =====================================================================

``session`` is a random number a worker picks for each connection (and a restarted PS for its REJOINs):
the receivers remember finished tensors by (peer, job, iteration, tensor id), so a second HELLO from the
same address must not look like a retransmission of the first. WELCOME's ``iteration`` is where the worker
starts (0, or the PS's current iteration when it joins a running job or a PS that resumed).

Ports follow the lab's layout (the emulator's PS_PORT etc., same values) so a scenario can run real
training in place of the emulator; 0 anywhere picks a free shim-range port.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from mlfc.wire import IMPORTANCE_LEVELS, SHIM_PORT_BASE

PS_PORT = SHIM_PORT_BASE + 0x10  # the PS receives pushes here
WORKER_RX_PORT = SHIM_PORT_BASE + 0x20  # a worker receives pulls here
WORKER_TX_PORT = SHIM_PORT_BASE + 0x30  # a worker's push flow
PS_TX_PORT_BASE = SHIM_PORT_BASE + 0x40  # the PS's pull flow to worker r uses PS_TX_PORT_BASE + r
PS_LISTENING = "listening on"  # in the PS's stderr line once its port is bound (launchers wait for it)

HELLO = 0xFFFF
WELCOME = 0xFFFF
INITIAL = 0xFFFE
STATS = 0xFFFD
BYE = 0xFFFC
REJOIN = 0xFFFB
ABORT = 0xFFFA
PING = 0xFFF9
MAX_TENSORS = 0xFFF0  # data tensor ids are 0..MAX_TENSORS-1
CONTROL_IMPORTANCE = IMPORTANCE_LEVELS - 1  # control messages are protected: never dropped selectively

MODES = ("ps", "aggregate")  # PS: pull = updated parameters; aggregate: pull = mean gradient (DDP hook)
PROTOCOL_VERSION = 1
MAX_SESSION = (1 << 31) - 1


def role(mode: str) -> str:
    """What the server side is called in messages: the DDP hook's docs say aggregator, the PS's say PS."""
    return "aggregator" if mode == "aggregate" else "PS"


def new_session() -> int:
    """A fresh session number (the control messages' iteration field), never 0."""
    return secrets.randbelow(MAX_SESSION) + 1


class ProtocolError(RuntimeError):
    """A peer sent something this side cannot use (wrong model, wrong mode, malformed control message)."""


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps({"v": PROTOCOL_VERSION, **message}, separators=(",", ":")).encode()


def decode(data: bytes | bytearray, what: str) -> dict[str, Any]:
    try:
        msg = json.loads(bytes(data))
    except ValueError as exc:
        raise ProtocolError(f"malformed {what} message: {exc}") from None
    if not isinstance(msg, dict) or msg.get("v") != PROTOCOL_VERSION:
        raise ProtocolError(
            f"{what} message of protocol version {msg.get('v') if isinstance(msg, dict) else '?'}, "
            f"this side speaks {PROTOCOL_VERSION}"
        )
    return msg
