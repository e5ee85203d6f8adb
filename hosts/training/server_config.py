"""What a parameter server (``TrainingServer``, hosts/training/server.py) is told: its job, its workers, its
mode, its ports and timeouts, and in PS mode whether pulls may be approximate."""

from __future__ import annotations

from dataclasses import dataclass, field

from mlfc import contract
from mlfc.hosts.training import protocol as proto
from mlfc.hosts.transport import SenderConfig
from mlfc.policy.withhold import WithholdPolicy


@dataclass(frozen=True)
class ServerConfig:
    job: int
    workers: int
    bind: str = "127.0.0.1"
    port: int = proto.PS_PORT
    mode: str = "ps"
    tx_port_base: int | None = proto.PS_TX_PORT_BASE  # pull flow to worker r from this + r; None: any port
    deadline: float = 0.02  # receiver: s after a push's last chunk before missing chunks may be zero-filled
    timeout: float = 60.0  # s to wait for workers (HELLO, a push) and for one pulled tensor to be delivered
    sender: SenderConfig = field(default_factory=SenderConfig)
    # Aggregate mode: keep the admitted ranks (their pull addresses) in this file while the job runs, so
    # that a restarted aggregator tells the ranks of the job it lost at once (it cannot resume them).
    roster_file: str | None = None
    # PS mode: approximate pulls (hosts/training/pull_copies.py): None, every pull whole and protected
    pull_withhold: WithholdPolicy | None = None
    pull_loss_bound: float = 0.0  # of each pulled tensor, at most this share left out (with pull_withhold)
    # issue 46 item 3: to a worker that reads precision by length (its HELLO's "precision"), a congested pull
    # goes as the change since its copy at fp16/int8 before anything is left out (pull_copies.py)
    pull_precision: bool = False
    # issue 46's third design: a congested pull tolerates only the chunks left out by plan, network drops are
    # retransmitted (pull_copies.PullCopies.repair_drops)
    pull_repair_drops: bool = False

    def __post_init__(self) -> None:
        if self.pull_withhold is not None and (self.mode != "ps" or not 0.0 < self.pull_loss_bound <= 1.0):
            raise ValueError(
                f"pull_withhold needs PS mode and a pull loss bound in (0, 1], not {self.mode}, "
                f"{self.pull_loss_bound!r}"
            )
        if self.pull_precision and self.pull_withhold is None:
            raise ValueError("pull_precision needs approximate pulls (pull_withhold and a pull loss bound)")
        if self.pull_repair_drops and self.pull_withhold is None:
            raise ValueError("pull_repair_drops needs approximate pulls (pull_withhold and a pull loss bound)")
        if self.roster_file is not None and self.mode != "aggregate":
            raise ValueError("roster_file is for aggregate mode: a PS keeps its state in a Checkpoint (loop.py)")
        if self.mode not in proto.MODES:
            raise ValueError(f"mode={self.mode!r}: choose one of {', '.join(proto.MODES)}")
        if self.workers < 1:
            raise ValueError(f"workers={self.workers} must be >= 1")
        if not 1 <= self.job <= contract.MAX_JOB_ID:
            raise ValueError(f"job={self.job} must be in 1..{contract.MAX_JOB_ID}")
