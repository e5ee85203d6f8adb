"""Training jobs for the simulator: real models' gradient sizes and compute times, placement on hosts,
PS push/pull or ring all-reduce, jittered compute for stragglers.

Model sizes are float32 parameter counts of the published architectures. Compute times are
*assumptions* of the right order for one data-centre GPU per worker (fp32, the batch named), not
measurements: what matters for the network is the communication fraction a = comm / (compute + comm),
which the scenarios print. ``scaled(f)`` multiplies bytes and compute time by the same factor, which
keeps a (and therefore interleaving) while cutting the packets to simulate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from mlfc import contract
from mlfc.sim.lab import JobProfile, JobSpec

PS, RING = "ps", "ring"


@dataclass(frozen=True)
class ModelProfile:
    name: str
    parameters: int  # float32 parameters: gradient bytes = 4 x parameters
    compute_s: float  # forward + backward of one iteration on one GPU (assumption, see module doc)
    batch: str

    @property
    def gradient_bytes(self) -> int:
        return 4 * self.parameters


MODELS: dict[str, ModelProfile] = {
    m.name: m
    for m in (
        ModelProfile("vgg16", 138_357_544, 0.25, "batch 64, 224x224"),
        ModelProfile("resnet50", 25_557_032, 0.12, "batch 64, 224x224"),
        ModelProfile("bert-base", 109_482_240, 0.20, "batch 32, sequence 128"),
    )
}


@dataclass(frozen=True)
class SimJob:
    """One data-parallel job. ``pattern`` ps: ``workers`` push to ``ps`` and pull from it; ring: the
    workers all-reduce ``push_bytes`` around the ring in the listed order (``pull_bytes`` unused)."""

    job_id: int
    name: str
    push_bytes: int
    pull_bytes: int
    compute_s: float
    workers: tuple[str, ...]
    ps: str | None = None
    pattern: str = PS
    jitter: float = 0.0  # relative standard deviation of each compute phase (normal, clipped at 3 sigma)
    straggle: float = 1.0  # compute multiplier of worker 0 from iteration straggle_from
    straggle_from: int = 0
    start_delay: float = 0.0
    acc_max: float = 0.9  # learning curve acc(i) = acc_max (1 - exp(-(i + 1) / tau)), the lab's model
    tau: float = 10.0
    importance: tuple[int, ...] = ()  # class per chunk of an iteration, cycled; () = all 0
    tags: dict[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if not 1 <= self.job_id <= contract.MAX_JOB_ID:
            raise ValueError(f"job {self.name}: job_id={self.job_id} out of range 1..{contract.MAX_JOB_ID}")
        if self.pattern not in (PS, RING):
            raise ValueError(f"job {self.job_id}: pattern {self.pattern!r} is not {PS!r} or {RING!r}")
        if not self.workers:
            raise ValueError(f"job {self.job_id}: no workers")
        if len(set(self.workers)) != len(self.workers):
            raise ValueError(f"job {self.job_id}: a host appears twice among the workers {self.workers}")
        if self.pattern == PS and not self.ps:
            raise ValueError(f"job {self.job_id}: a parameter-server job needs a ps host")
        if self.pattern == PS and self.ps in self.workers:
            raise ValueError(f"job {self.job_id}: the ps host {self.ps} is also a worker")
        if self.pattern == RING and len(self.workers) < 2:
            raise ValueError(f"job {self.job_id}: a ring needs at least 2 workers")
        if self.push_bytes <= 0 or (self.pattern == PS and self.pull_bytes <= 0):
            raise ValueError(f"job {self.job_id}: push/pull bytes must be > 0")
        if not (math.isfinite(self.compute_s) and self.compute_s >= 0):
            raise ValueError(f"job {self.job_id}: compute_s={self.compute_s!r} must be >= 0")
        if not (0 <= self.jitter < 0.34):
            raise ValueError(f"job {self.job_id}: jitter={self.jitter!r} must be in [0, 0.34) (3 sigma < 100 %)")
        if self.straggle <= 0 or self.start_delay < 0:
            raise ValueError(f"job {self.job_id}: straggle must be > 0 and start_delay >= 0")

    @property
    def hosts(self) -> tuple[str, ...]:
        return (*self.workers, self.ps) if self.ps else self.workers

    def scaled(self, factor: float) -> SimJob:
        """Bytes and compute times times ``factor`` (a is unchanged)."""
        if not factor > 0:
            raise ValueError(f"scale factor {factor!r} must be > 0")
        return replace(
            self,
            push_bytes=max(1, round(self.push_bytes * factor)),
            pull_bytes=max(1, round(self.pull_bytes * factor)),
            compute_s=self.compute_s * factor,
            start_delay=self.start_delay * factor,
        )


def model_job(
    job_id: int,
    model: str,
    workers: tuple[str, ...],
    ps: str | None = None,
    pattern: str = PS,
    scale: float = 1.0,
    **kw: object,
) -> SimJob:
    """A job training ``model`` (a key of MODELS), bytes and compute scaled by ``scale``."""
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}; known: {', '.join(MODELS)}")
    m = MODELS[model]
    job = SimJob(
        job_id, f"{model}-{job_id}", m.gradient_bytes, m.gradient_bytes, m.compute_s, workers, ps, pattern, **kw
    )  # type: ignore[arg-type]
    return job.scaled(scale) if scale != 1.0 else job


def from_lab_job(spec: JobSpec, workers: tuple[str, ...], ps: str, jitter: float = 0.0) -> SimJob:
    """A job of the lab's mixes (scenarios.MIXES) on the hosts the lab's topology gave it."""
    p: JobProfile = spec.profile
    return SimJob(
        spec.job,
        p.name,
        p.push_bytes,
        p.pull_bytes,
        p.compute_s,
        workers,
        ps,
        PS,
        jitter=jitter,
        straggle=spec.straggle,
        straggle_from=spec.straggle_from,
        start_delay=spec.start_delay,
        acc_max=spec.acc_max,
        tau=spec.tau,
    )
