"""Shared plumbing of the real-training experiments (hpsearch, approx, mltcp-real): jobs of real PyTorch
training with padded compute, one run of a set of jobs with MAIF's decisions watched, and the figures every
table states (padding, link use, CPU).

Compute padding: real forward/backward of these small models takes milliseconds on one CPU thread, far
below a GPU job's compute relative to its communication. A job's ``compute_s`` pads each iteration's
compute (a sleep after backward) up to that many seconds, so the communication fraction is a GPU job's;
``real_compute_s`` measures the unpadded time so the output can say by how much it was padded. Gradients,
updates and accuracy are always real.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mlfc.lab import dataplanes
from mlfc.lab.cleanup import leftovers
from mlfc.lab.decisions import DecisionSample, DecisionWatch
from mlfc.lab.emulator import JobProfile
from mlfc.lab.jobs import JobSpec, Training
from mlfc.lab.results import IterationRecord
from mlfc.lab.stack import Control, StackConfig, StackError, StackRun, job_counters, run_jobs
from mlfc.lab.tta import AccuracyPoint, accuracy_points, search_start
from mlfc.lab.validity import BottleneckNotCarried
from mlfc.topologies import Topology


def say(msg: str) -> None:
    print(msg, flush=True)


def model_numel(task: str, width: int | None) -> int:
    from mlfc.hosts.training.tasks import load_task

    model = load_task(task, 0, width).make_model()
    return sum(p.numel() for p in model.parameters())


def real_compute_s(task: str, width: int | None, batch_size: int | None = None, steps: int = 15) -> float:
    """Median seconds of one forward/backward step of the task's model on one thread, here and now (the
    machine's load included): what the padding replaces."""
    import torch

    from mlfc.hosts.training.tasks import batches, load_task

    torch.set_num_threads(1)
    t = load_task(task, 0, width)
    model = t.make_model()
    data = batches(t.train, batch_size or t.batch_size, 0)
    times = []
    for _ in range(steps):
        x, y = next(data)
        s = time.perf_counter()
        model.zero_grad()
        t.loss(model(x), y).backward()
        times.append(time.perf_counter() - s)
    return statistics.median(times[2:])


def training_spec(
    job: int,
    *,
    task: str = "digits",
    width: int | None = None,
    lr: float | None = None,
    compute_s: float = 0.3,
    workers: int = 2,
    eval_every: int = 2,
    seed: int = 0,
    loss_bound: float = 0.0,
    batch_size: int | None = None,
    name: str = "train",
) -> JobSpec:
    """A real-training job whose profile states its true push/pull size (the model's float32 bytes) and its
    padded compute time."""
    nbytes = 4 * model_numel(task, width)
    profile = JobProfile(name, nbytes, nbytes, compute_s)
    training = Training(
        task=task,
        width=width,
        lr=lr,
        batch_size=batch_size,
        seed=seed,
        eval_every=eval_every,
        pad_to_profile=compute_s > 0,
    )
    return JobSpec(job, profile, workers=workers, loss_bound=loss_bound, training=training)


@dataclass
class RealRun:
    """One run of a set of jobs: the records, what the switches counted, and MAIF's decisions."""

    run: StackRun
    start: float  # the records' clock: when iteration 0 began
    t0_wall: float  # wall clock of the records' zero (to place decision samples on the records' clock)
    decisions: list[DecisionSample] = field(default_factory=list)

    @property
    def records(self) -> list[IterationRecord]:
        return self.run.records

    @property
    def errors(self) -> list[str]:
        return self.run.errors

    def points(self) -> dict[int, list[AccuracyPoint]]:
        return accuracy_points(self.run.records)

    def decision_start(self) -> float:
        """``start`` on the wall clock (DecisionSample.time's clock)."""
        return self.t0_wall + self.start

    def start_spread(self) -> float:
        """Seconds between the first and the last job's first iteration (a job whose processes were not ready
        at the common start begins late: the lead time was too short for this machine's load)."""
        return start_spread(self.records)

    def finish(self) -> float:
        """Seconds after the start when the last job finished its last iteration; NaN for a run stopped early
        (``stopped``)."""
        if self.run.stopped_at is not None:
            return math.nan
        return max((r.end for r in self.records), default=math.nan) - self.start

    def stopped(self) -> float:
        """Seconds after the start when the run was stopped early (``run_real``'s ``until``); NaN if not."""
        return math.nan if self.run.stopped_at is None else self.run.stopped_at - self.start


def start_spread(records: list[IterationRecord]) -> float:
    firsts: dict[int, float] = {}
    for r in records:
        if r.iteration == 0:
            firsts[r.job] = min(r.start, firsts.get(r.job, math.inf))
    return max(firsts.values()) - min(firsts.values()) if firsts else math.nan


def start_lead(jobs: int) -> float:
    """Lead time for real-training jobs: every process imports torch and loads its data before the common
    start; measured 40 s for 2 jobs (6 processes) at load average 12 on 2 cores."""
    return 20.0 + 10.0 * jobs


MAX_START_SPREAD_S = 2.0


def run_real(
    ctl: Control,
    topo: Topology,
    cfg: StackConfig,
    watch: bool = True,
    progress: Callable[[str], None] | None = say,
    timeout: float = 1800.0,
    until: Callable[[list[IterationRecord]], bool] | None = None,
) -> RealRun:
    """Run ``cfg``'s jobs once; the switch counters are this run's (deltas), decisions sampled if ``watch``;
    ``until`` ends it early (``run_jobs``)."""
    before = job_counters(ctl.client)
    watches: list[DecisionWatch] = []

    def hook(address: str, token: Path) -> None:
        if watch:
            watches.append(DecisionWatch(address, token).start())

    try:
        res = run_jobs(ctl, topo, cfg, progress=progress, timeout=timeout, on_coordinator=hook, until=until)
    finally:
        samples = [s for w in watches for s in w.stop()]
    t0_wall = time.time() - res.duration  # run_jobs' zero: its records are relative to it
    res.counters = {j: {k: v - before.get(j, {}).get(k, 0) for k, v in c.items()} for j, c in res.counters.items()}
    start = search_start(res.records) if any(r.iteration == 0 for r in res.records) else 0.0
    spread = start_spread(res.records)
    if spread > MAX_START_SPREAD_S:
        res.errors.append(
            f"the jobs' first iterations began {spread:.1f} s apart (> {MAX_START_SPREAD_S:g} s): a job's processes "
            "were not ready at the common start; give a longer start lead"
        )
    return RealRun(res, start, t0_wall, samples)


def same_curve(a: list[AccuracyPoint], b: list[AccuracyPoint], tol: float = 1e-9) -> bool:
    """Identical accuracy at every iteration both evaluated (lossless runs of one configuration must be:
    same seeds, exact aggregation; only their timing differs)."""
    ia = {p.iteration: p.accuracy for p in a}
    ib = {p.iteration: p.accuracy for p in b}
    common = set(ia) & set(ib)
    return bool(common) and all(abs(ia[i] - ib[i]) <= tol for i in common)


def run_experiment(name: str, dataplane: str, run_plane: Callable[[dataplanes.Dataplane], str], written: str) -> int:
    """What every real-job experiment's ``main`` does around its own runs: root and dataplane checks,
    ``run_plane`` once per selected dataplane (it returns that dataplane's summary text), a clean stop on
    a failed check or Ctrl-C, and the processes this run left behind. Returns the exit status."""
    if os.geteuid() != 0:
        print(f"make {name} needs root (Mininet)", file=sys.stderr)
        return 2
    try:
        planes = dataplanes.select(dataplane)
    except dataplanes.DataplaneMissing as exc:
        print(f"cannot run: {exc}", file=sys.stderr)
        return 2
    preexisting = set(leftovers())
    texts = []
    try:
        for plane in planes:
            say(f"dataplane: {dataplanes.describe(plane)}")
            texts.append(run_plane(plane))
    except (BottleneckNotCarried, StackError, RuntimeError) as exc:
        print(f"make {name} stopped: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: torn down; partial results stay in the output folder", file=sys.stderr)
        return 130
    print("\n\n".join(texts))
    print(f"written: {written}")
    left = sorted(set(leftovers()) - preexisting)
    if left:
        print("left behind: " + "; ".join(left), file=sys.stderr)
        return 1
    return 0
