"""What a worker (``WorkerClient``, hosts/training/client.py) is told: its job and rank, its PS, its ports and
timeouts, and how its pushes may lose (the loss bound, loss feedback, withholding, compression), checked
together so that a combination the PS path cannot honour is refused before anything is sent."""

from __future__ import annotations

from dataclasses import dataclass, field

from mlfc.hosts.training import protocol as proto
from mlfc.hosts.training.compress import NONE, Compression
from mlfc.hosts.transport import SenderConfig
from mlfc.policy.withhold import WithholdPolicy


@dataclass(frozen=True)
class ClientConfig:
    job: int
    rank: int
    ps: tuple[str, int]
    bind: str = "127.0.0.1"
    rx_port: int = proto.WORKER_RX_PORT  # 0: any free shim port (several workers on one address)
    tx_port: int = proto.WORKER_TX_PORT
    mode: str = "ps"
    loss_bound: float = 0.0  # fraction of each pushed tensor the PS may zero-fill (unprotected chunks only)
    protect_fraction: float = 0.25  # largest-gradient chunks of each tensor that are protected
    deadline: float = 0.02  # receiver: s after a pull's last chunk before zero-fill (pulls are lossless anyway)
    connect_timeout: float = 60.0  # s to keep knocking while the PS starts
    timeout: float = 60.0  # s for one transfer / one pull
    sender: SenderConfig = field(default_factory=SenderConfig)
    # Rigid compression of every push (hosts/training/compress.py): sent protected, retransmitted until complete.
    compression: Compression = NONE
    # PS mode with a loss bound: what the PS zero-filled of a push goes out again, added to the tensor's next
    # push (error feedback). Not in aggregate mode: DDP rebuilds its buckets after the first step, so a bucket
    # index does not name the same elements from one step to the next.
    loss_feedback: bool = True
    # The network-decided withheld share (mlfc.policy.withhold); None: every chunk is sent. Needs loss feedback
    # (what is withheld must come later, not be lost).
    withhold: WithholdPolicy | None = None
    # The precision is part of the decision (mlfc.policy.precision): the withheld share is shed first by pushing
    # at fp16 or int8, the rest withheld. Needs ``withhold`` (it is its signal) and no compression.
    precision: bool = False
    # Shed by plan, repair the rest (issue 46's third design): the transport tolerates only the chunks the
    # worker withheld; what the network drops beyond them is retransmitted. Needs ``withhold``.
    repair_drops: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.loss_bound, bool) or not 0.0 <= self.loss_bound <= 1.0:
            raise ValueError(f"loss_bound={self.loss_bound!r} must be in [0, 1]")
        if self.compression.active and self.loss_bound > 0:
            raise ValueError(
                f"compression {self.compression.spec()} needs loss bound 0 (a lost chunk of a compressed "
                f"push cannot be zero-filled), not {self.loss_bound:g}"
            )
        if self.compression.active and self.mode != "ps":
            raise ValueError("compression is for PS mode pushes, not DDP buckets (aggregate mode)")
        if self.withhold is not None and not self.feeds_back_loss:
            raise ValueError("withhold needs loss feedback: PS mode, a loss bound > 0 and loss_feedback on")
        if self.precision and self.withhold is None:
            raise ValueError("precision needs withhold: the withheld share is what it sheds")
        if self.repair_drops and self.withhold is None:
            raise ValueError("repair_drops needs withhold: the withheld chunks are the only loss it tolerates")

    @property
    def feeds_back_loss(self) -> bool:
        """Lost elements of a push are held for the next one (see ``loss_feedback``)."""
        return self.loss_feedback and self.loss_bound > 0 and self.mode == "ps"
