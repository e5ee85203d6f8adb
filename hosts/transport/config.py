"""The two ends' settings, checked when built."""

from __future__ import annotations

from dataclasses import dataclass

from mlfc.hosts.cc import ALGORITHMS
from mlfc.hosts.transport.packet import MAX_CHUNK_PAYLOAD, MAX_TENSOR_BYTES
from mlfc.hosts.transport.recovery import DEFAULT_TOLERATED_LOSS, TOLERATED_LOSS_REACTIONS
from mlfc.policy.mltcp import EWMA_WEIGHT, MltcpParams
from mlfc.policy.mltcp_tuning import TuningParams

DEFAULT_CHUNK = 1400  # payload bytes; + 32 header + 28 UDP/IP = 1460 < 1500 MTU


@dataclass(frozen=True)
class SenderConfig:
    chunk_size: int = DEFAULT_CHUNK  # payload bytes per chunk
    cc: str = "reno"
    mltcp: MltcpParams | None = None  # None: plain congestion control
    # Online tuning of MLTCP's slope/intercept from this flow's iteration time (mlfc.policy.mltcp_tuning),
    # starting from ``mltcp``; None: F stays as configured.
    mltcp_tune: TuningParams | None = None
    idle_gap: float | None = 0.1  # s without new data that starts a new iteration (MLTCP)
    ewma_weight: float = EWMA_WEIGHT  # bytes-per-iteration EWMA
    line_rate: float = 1e9  # bits/s; DCQCN's line rate and start rate
    initial_rto: float = 0.2
    min_rto: float = 0.05  # above scheduling gaps of a Python process (~10 ms seen on 2 cores); RFC 6298: 1 s
    max_rto: float = 1.0
    # Restart the window after more than an RTO without sending (RFC 5681 4.1), as Linux does by
    # default (net.ipv4.tcp_slow_start_after_idle=1). Window-based controllers only.
    restart_after_idle: bool = True
    peer_timeout: float = 3.0  # no feedback at all for this long ends the transfer with PeerTimeout
    reorder_window: int = 3  # RACK: a chunk is lost once one sent this many transmissions later is acked
    # What a tolerated loss (within the tensor's loss bound, not retransmitted) is to the congestion controller:
    # "loss" (a loss event: on_loss, Reno halves), "ecn" (one ECN echo: on_ack(ece=True), at most one
    # reduction per round trip), "none" (no reaction). A loss that must be retransmitted is always a loss.
    tolerated_loss: str = DEFAULT_TOLERATED_LOSS  # "ecn": see recovery.DEFAULT_TOLERATED_LOSS for why
    max_tensor_bytes: int = 1 << 30
    jobs: frozenset[int] | None = None  # jobs this sender may send for (None: any)
    pacing_burst: float = 0.0005  # s of line rate the pacer may send back to back (min 16 chunks)
    sample_interval: float = 0.001  # s between timeline samples
    max_samples: int = 200_000
    # UDP GSO: many chunks per sendmsg (each its own datagram on the wire); off by itself where the kernel
    # refuses it (no checksum offload on the egress device, a chunk above the path MTU)
    gso: bool = True
    gso_burst: float = 0.001  # s of the flow's rate one GSO send may carry (at most 64 KB; see Sender._autosize)
    # the per-chunk loops (importance magnitudes, batches of new chunks) in C where mlfc.hosts.fastpath is
    # built (`make install`); False, or not built: the numpy paths, which give the same packets
    compiled: bool = True

    def __post_init__(self) -> None:
        if not 1 <= self.chunk_size <= MAX_CHUNK_PAYLOAD:
            raise ValueError(f"chunk_size={self.chunk_size} must be in 1..{MAX_CHUNK_PAYLOAD}")
        if self.cc not in ALGORITHMS:
            raise ValueError(f"cc={self.cc!r}: choose one of {', '.join(ALGORITHMS)}")
        if not 0 < self.min_rto <= self.initial_rto <= self.max_rto:
            raise ValueError("need 0 < min_rto <= initial_rto <= max_rto")
        if not self.peer_timeout > 0:
            raise ValueError("peer_timeout must be > 0")
        if not 0 < self.max_tensor_bytes <= MAX_TENSOR_BYTES:
            raise ValueError(f"max_tensor_bytes must be in 1..{MAX_TENSOR_BYTES}")
        if self.tolerated_loss not in TOLERATED_LOSS_REACTIONS:
            raise ValueError(
                f"tolerated_loss={self.tolerated_loss!r}: choose one of {', '.join(TOLERATED_LOSS_REACTIONS)}"
            )
        if self.mltcp_tune is not None and self.mltcp is None:
            raise ValueError("mltcp_tune needs mltcp (the point the tuning starts from)")


@dataclass(frozen=True)
class ReceiverConfig:
    deadline: float = 0.02  # s after the last chunk first arrives before missing chunks may be zero-filled
    cnp_interval: float = 50e-6  # DCQCN NP: at most one CNP per flow per interval
    ack_every: int = 8  # in-order chunks per ACK (an ACK also goes out whenever the socket is drained)
    # s an ACK may wait, once the socket is drained, for more in-order chunks (up to ack_every): at a low
    # packet rate every chunk drains the socket, so without it each chunk gets its own ACK (0.8 ACKs per
    # chunk measured at 1,500 pkt/s), and on a packet-rate bottleneck the ACKs of one direction's transfers
    # take a share of the other direction's rate. A hole, a duplicate and the last chunk are still ACKed at once.
    ack_delay: float = 0.0
    # DCTCP's receiver (RFC 8257 3.2): the chunks one ACK acknowledges share one CE state, so its ECE flag is
    # exact per chunk (DCTCP's marked fraction): a chunk whose CE state differs from the chunks waiting for an
    # ACK first has them acknowledged. False: ECE on the next ACK after any CE chunk, which with ack_every
    # (and GRO reads) counts up to a whole ACK's chunks marked for one CE chunk. An ACK more per change of state.
    ack_on_ce_change: bool = True
    jobs: frozenset[int] | None = None  # accepted jobs (None: any)
    max_tensor_bytes: int = 1 << 30
    max_pending_bytes: int = 2 << 30  # memory for tensors being received
    # an incomplete tensor with no packet for this long is abandoned; keep it above the senders' peer
    # timeout (``stale_timeout_for``): a flow starved in a low class gets no packet through for minutes
    stale_timeout: float = 10.0
    completed_memory: int = 4096  # finished tensors remembered to re-send their FIN
    rcvbuf: int = 8 << 20
    gro: bool = True  # UDP GRO: take coalesced datagrams of a flow in one read where the kernel offers it
    compiled: bool = True  # runs of chunks checked and placed in C where mlfc.hosts.fastpath is built

    def __post_init__(self) -> None:
        if self.ack_every < 1:
            raise ValueError(f"ack_every={self.ack_every!r} must be >= 1")
        if not 0.0 <= self.ack_delay <= 0.1:
            raise ValueError(f"ack_delay={self.ack_delay!r} must be in [0, 0.1] s")


def stale_timeout_for(sender: SenderConfig) -> float:
    """A receiver's ``stale_timeout`` beside peers that send with ``sender``: twice their peer timeout, so it
    never gives up a tensor that a sender still retransmits (the sender would re-send what the receiver
    dropped, ``Scoreboard.renege``, but only after a round trip the starved flow may not get)."""
    return max(ReceiverConfig.stale_timeout, 2.0 * sender.peer_timeout)
