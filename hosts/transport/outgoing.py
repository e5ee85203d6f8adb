"""One tensor to send, without sockets: the request checked, its importance classes (with the protected
floor of mlfc.policy.loss), the DATA header values every chunk shares, and its scoreboard."""

from __future__ import annotations

from dataclasses import dataclass, field

from mlfc import contract
from mlfc.hosts.importance import assign_importance, expand_importance, num_chunks
from mlfc.hosts.transport.config import SenderConfig
from mlfc.hosts.transport.errors import TransferRejected
from mlfc.hosts.transport.gso import Chunks
from mlfc.hosts.transport.packet import DataHeader
from mlfc.hosts.transport.recovery import Scoreboard
from mlfc.policy import loss
from mlfc.policy.priority import PolicyError
from mlfc.policy.withhold import WithholdPolicy, congestion_sample


@dataclass(frozen=True)
class SendResult:
    job_id: int
    iteration: int
    tensor_id: int
    nbytes: int
    chunks: int
    duration: float
    retransmits: int
    tolerated_chunks: int  # lost chunks the sender did not retransmit (the receiver may have zero-filled them)
    fin: bool  # the receiver ended the transfer (FIN), as opposed to every chunk being acknowledged
    # chunks never acknowledged: what the receiver zero-filled as far as its ACKs told (the FIN's SACK blocks
    # cover up to 32 runs: beyond that, or when the ACK of a late arrival was lost, a superset)
    missing_chunks: tuple[int, ...] = ()
    withheld_chunks: int = 0  # chunks the sender did not send (``withhold``; among the missing ones)
    withheld_bytes: int = 0
    acks: int = 0  # ACKs of this tensor, and how many echoed ECN: the push's congestion signal
    ece_acks: int = 0
    own_share: float | None = None  # mean delivery rate / capacity at the marked ACKs (None: none marked)
    # mean over its ACKs of the echoed queue's excess share (mlfc.policy.withhold.echo_excess; None: no echo
    # could be read, e.g. no rate known yet)
    excess: float | None = None

    def congestion(self, policy: WithholdPolicy) -> float:
        """This transfer's congestion sample by ``policy``'s signal (mlfc.policy.withhold)."""
        marked = self.ece_acks / self.acks if self.acks else 0.0
        lost = self.retransmits + self.tolerated_chunks
        return congestion_sample(policy, self.chunks - self.withheld_chunks, marked, lost, self.own_share, self.excess)


@dataclass
class Transfer:
    """One tensor being sent: its identity, bytes, DATA header values (per-chunk fields filled in at each
    send), its scoreboard, and (GSO) the batch's view of its bytes."""

    job: int
    iteration: int
    tensor_id: int
    mv: memoryview
    board: Scoreboard
    header: DataHeader
    chunks: Chunks | None = None
    started: float = 0.0  # set by the sender when it starts sending
    values: list[int] = field(default_factory=list)  # the header's values; _xmit rewrites per-chunk fields
    done: bool = False
    fin: bool = False
    acks: int = 0
    ece_acks: int = 0
    share_sum: float = 0.0  # own_share samples at the marked ACKs (mlfc.policy.withhold)
    share_n: int = 0
    excess_sum: float = 0.0  # echo_excess over the ACKs (each plain ACK a merged one stands for counted)
    excess_n: int = 0

    def __post_init__(self) -> None:
        self.values = list(self.header)

    def result(self, now: float) -> SendResult:
        b = self.board
        missing = () if b.complete else b.unacknowledged()
        return SendResult(self.job, self.iteration, self.tensor_id, b.nbytes, b.n, now - self.started,
                          b.retransmits, b.tolerated, self.fin, missing, b.withheld, b.withheld_bytes,
                          self.acks, self.ece_acks,
                          self.share_sum / self.share_n if self.share_n else None,
                          self.excess_sum / self.excess_n if self.excess_n else None)  # fmt: skip


def prepare(cfg: SenderConfig, job: int, iteration: int, tensor_id: int, buffer, importance, layer_index: int,
            num_layers: int, loss_bound: float, *, batched: bool, withhold=()) -> Transfer:  # fmt: skip
    """Check a send request and build its transfer; raises TransferRejected for bad input. ``withhold``:
    chunks not to send (each while the loss bound covers it; the receiver zero-fills them)."""
    try:
        mv = memoryview(buffer).cast("B")
    except (TypeError, ValueError) as exc:
        raise TransferRejected(f"buffer must be a contiguous bytes-like object: {exc}") from None
    nbytes = mv.nbytes
    if nbytes == 0:
        raise TransferRejected("empty buffer")
    if nbytes > cfg.max_tensor_bytes:
        raise TransferRejected(f"buffer of {nbytes} bytes exceeds max_tensor_bytes={cfg.max_tensor_bytes}")
    if not 0 <= job <= contract.MAX_JOB_ID or (cfg.jobs is not None and job not in cfg.jobs):
        raise TransferRejected(f"unknown job {job}")
    if not 0 <= iteration <= contract.MAX_ITERATION or not 0 <= tensor_id <= 0xFFFF:
        raise TransferRejected(f"iteration {iteration} / tensor_id {tensor_id} out of range")
    try:
        bound_bp = loss.to_basis_points(loss_bound)
        if importance is None:
            classes = bytearray(assign_importance(mv, cfg.chunk_size, layer_index=layer_index,
                                                  num_layers=num_layers, gradients=nbytes % 4 == 0,
                                                  compiled=cfg.compiled))  # fmt: skip
        else:
            classes = expand_importance(importance, num_chunks(nbytes, cfg.chunk_size))
    except (PolicyError, ValueError) as exc:
        raise TransferRejected(str(exc)) from None
    loss.apply_floor(classes)
    board = Scoreboard(nbytes, cfg.chunk_size, classes, loss.LossBudget(nbytes, bound_bp))
    try:
        board.withhold(withhold)
    except ValueError as exc:
        raise TransferRejected(str(exc)) from None
    header = DataHeader(job_id=job, iteration=iteration, tensor_id=tensor_id, total_len=nbytes,
                        chunk_size=cfg.chunk_size, loss_bound_bp=bound_bp,
                        n_protected=loss.count_protected(classes))  # fmt: skip
    chunks = Chunks(mv, cfg.chunk_size, classes) if batched and board.n > 1 else None
    return Transfer(job, iteration, tensor_id, mv, board, header, chunks)
