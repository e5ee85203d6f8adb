"""Counters of the two ends (``Sender.stats``, ``Receiver.stats``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class FlowStats:
    """Per-flow counters; ``samples`` rows are (t, cwnd_bytes or -1, rate_Bps or -1, bytes_acked, F, bytes_ratio)."""

    bytes_sent: int = 0  # on the wire incl. headers and retransmissions
    payload_bytes_sent: int = 0  # first transmissions only
    bytes_acked: int = 0
    chunks_sent: int = 0
    retransmits: int = 0
    probes: int = 0
    reneged_chunks: int = 0  # acknowledged chunks sent again: the receiver had given the tensor up (stale)
    tolerated_chunks: int = 0  # lost unprotected chunks left for the receiver to zero-fill
    acks: int = 0
    ece_acks: int = 0
    ece_bytes_acked: int = 0  # bytes newly acknowledged by ACKs with ECE: CE-marked (ReceiverConfig.ack_on_ce_change)
    ece_events: int = 0
    cnps: int = 0
    loss_events: int = 0
    tolerated_events: int = 0  # ACKs that found tolerated losses after the recovery point (tolerated_loss)
    timeouts: int = 0
    idle_restarts: int = 0  # window restarts after an idle period (restart_after_idle)
    tensors: int = 0
    malformed: int = 0  # undecodable packets on the socket
    foreign: int = 0  # decodable but not feedback (e.g. DATA), or for another job
    stale: int = 0  # feedback for a tensor no longer being sent
    socket_errors: int = 0  # ICMP errors (e.g. port unreachable) reported on the socket
    send_calls: int = 0  # system calls that sent DATA (one chunk, or a GSO batch)
    gso_sends: int = 0  # of which sendmsg calls that carried several chunks (UDP GSO)
    gso_refused: int = 0  # 1 once the kernel refused GSO and the flow fell back to a datagram per chunk
    wait_seconds: float = 0.0  # time blocked waiting for feedback, the window or the pacer
    srtt: float = 0.0
    samples: list[tuple[float, float, float, int, float, float]] = field(default_factory=list)


@dataclass
class ReceiverStats:
    datagrams: int = 0  # socket reads: with GRO one read may carry many packets
    runs: int = 0  # reads placed at once: consecutive new chunks of one tensor
    packets: int = 0
    data_bytes: int = 0
    duplicates: int = 0
    malformed: int = 0
    foreign: int = 0  # valid shim but not DATA (e.g. a stray ACK)
    unknown_job: int = 0
    oversized: int = 0
    over_memory: int = 0
    ce_marked: int = 0
    acks_sent: int = 0
    cnps_sent: int = 0
    tensors_delivered: int = 0
    tensors_zero_filled: int = 0
    abandoned: int = 0
    send_errors: int = 0
