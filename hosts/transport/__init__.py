"""Tagged gradient transfer over UDP: a paced, window- or rate-controlled sender with SACK, RACK-style
loss detection and RTO, and a receiver with cumulative + selective ACKs, ECN feedback and bounded-loss
delivery. Real sockets and IP addresses only, so it runs over loopback, veth pairs and a P4 switch.

The pieces, one job each (see docs/transport.md):

* ``sender`` / ``receiver``: the two ends, socket I/O and the congestion controller's events;
* ``recovery``: the sender's loss recovery without sockets (scoreboard, RACK, RTO, recovery point);
* ``reassembly``: one tensor at the receiver without sockets (placement, SACK, the zero-fill decision);
* ``outgoing``: a send request checked and turned into a transfer, without sockets;
* ``gso``: UDP GSO/GRO batching (many shim-tagged chunks per system call, each still its own datagram);
* ``pacing``: the sender's token bucket and delivery rate; ``packet``: the DATA descriptor, ACK and CNP codecs;
* ``sockets``: shim-range UDP sockets and ECN codepoints; ``config``, ``stats``, ``errors``: settings,
  counters and exceptions of both ends.

The bounded-loss rule and the protected floor are mlfc.policy.loss; in-iteration progress (the shim's
progress tag and MLTCP's bytes_ratio) is mlfc.hosts.progress.
"""

from __future__ import annotations

from mlfc.hosts.transport.config import DEFAULT_CHUNK, ReceiverConfig, SenderConfig
from mlfc.hosts.transport.errors import PeerTimeout, TransferAborted, TransferRejected, TransportError
from mlfc.hosts.transport.outgoing import SendResult
from mlfc.hosts.transport.packet import HEADER_LEN, MAX_CHUNK_PAYLOAD
from mlfc.hosts.transport.reassembly import LossReport
from mlfc.hosts.transport.receiver import DeliveredTensor, Receiver
from mlfc.hosts.transport.sender import Sender
from mlfc.hosts.transport.sockets import ECN_CE, ECN_MASK, ECT0, UDP_IP_OVERHEAD, bind_shim_socket, parse_endpoint
from mlfc.hosts.transport.stats import FlowStats, ReceiverStats

__all__ = [
    "DEFAULT_CHUNK",
    "ECN_CE",
    "ECN_MASK",
    "ECT0",
    "HEADER_LEN",
    "MAX_CHUNK_PAYLOAD",
    "UDP_IP_OVERHEAD",
    "DeliveredTensor",
    "FlowStats",
    "LossReport",
    "PeerTimeout",
    "Receiver",
    "ReceiverConfig",
    "ReceiverStats",
    "SendResult",
    "Sender",
    "SenderConfig",
    "TransferAborted",
    "TransferRejected",
    "TransportError",
    "bind_shim_socket",
    "parse_endpoint",
]
