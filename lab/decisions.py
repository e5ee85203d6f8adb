"""What MAIF ranked when: the coordinator's decisions sampled over its Status RPC while the jobs run.

``DecisionWatch`` polls ``Coordinator.Status`` (mlfc/proto/coordinator.proto) every ``interval_s`` and keeps
one ``DecisionSample`` per job whenever the decision number changes: the job's rank, class, score, predicted
gain and curve fit. ``timeline_rows`` / ``write_csv`` / ``plot_timeline`` turn them into the decision
timeline a reader checks a MAIF result against (which job was served first, from when, and why).
"""

from __future__ import annotations

import csv
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from mlfc.lab.status_watch import StatusPoller
from mlfc.proto import coordinator_pb2 as pb


@dataclass(frozen=True)
class DecisionSample:
    time: float  # wall clock (time.time()) when the sample was taken
    decision: int  # the coordinator's decision sequence number
    job: int
    rank: int  # 1 = served first
    priority: int  # switch class
    score: float  # predicted gain per network second (exploration prior for jobs without a curve)
    gain: float  # predicted accuracy gain over the horizon
    model: str  # curve fit: power, exp, prior, flat
    points: int
    last_iteration: int
    last_quality: float


class DecisionWatch:
    """Samples the coordinator's Status while running (start/stop, or a context manager)."""

    def __init__(self, address: str, token_file: Path | str, interval_s: float = 0.25) -> None:
        self.samples: list[DecisionSample] = []
        self._last: tuple[int, tuple] | None = None
        self._poller = StatusPoller(address, token_file, self._on_status, interval_s, "decision-watch")

    @property
    def errors(self) -> int:
        return self._poller.errors

    def start(self) -> DecisionWatch:
        self._poller.start()
        return self

    def stop(self) -> list[DecisionSample]:
        self._poller.stop()
        return self.samples

    def __enter__(self) -> DecisionWatch:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _on_status(self, st: pb.StatusReply) -> None:
        now = time.time()
        active = [j for j in st.jobs if j.state == "active" and j.rank]
        key = (st.decision, tuple((j.job_id, j.rank, j.priority) for j in active))
        if not active or key == self._last:
            return
        self._last = key
        self.samples += [sample(now, st.decision, j) for j in active]


def sample(now: float, decision: int, j: pb.JobExplanation) -> DecisionSample:
    return DecisionSample(
        now,
        decision,
        j.job_id,
        j.rank,
        j.priority,
        j.score,
        j.predicted_gain,
        j.fit.model,
        j.fit.points,
        j.fit.last_iteration,
        j.fit.last_quality,
    )


def rankings(samples: Sequence[DecisionSample]) -> list[tuple[float, int, list[int]]]:
    """(time, decision, jobs in rank order) for every sampled decision, in time order."""
    by: dict[tuple[float, int], list[DecisionSample]] = {}
    for s in samples:
        by.setdefault((s.time, s.decision), []).append(s)
    return [(t, d, [s.job for s in sorted(ss, key=lambda s: s.rank)]) for (t, d), ss in sorted(by.items())]


def top_changes(samples: Sequence[DecisionSample], start: float) -> list[tuple[float, int, list[int]]]:
    """The decisions at which the order changed: (seconds after ``start``, decision, order)."""
    out: list[tuple[float, int, list[int]]] = []
    for t, d, order in rankings(samples):
        if not out or out[-1][2] != order:
            out.append((t - start, d, order))
    return out


def describe(samples: Sequence[DecisionSample], start: float, names: Mapping[int, str] | None = None) -> list[str]:
    """One line per change of MAIF's order: '12.3 s (decision 41): job 3 (w16 lr0.1) > job 1 > ...'."""
    names = names or {}
    by = {(s.time, s.job): s for s in samples}
    lines = []
    for t, d, order in top_changes(samples, start):
        parts = []
        for j in order:
            s = by.get((t + start, j))
            label = f"job {j}" + (f" ({names[j]})" if j in names else "")
            if s is not None:
                label += f" c{s.priority} {s.model}"
                if s.model != "prior":
                    label += f" {100 * s.last_quality:.0f}%@{s.last_iteration}"
            parts.append(label)
        lines.append(f"{t:7.1f} s (decision {d}): " + " > ".join(parts))
    return lines


def write_csv(path: Path, samples: Sequence[DecisionSample], start: float = 0.0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["since_start", *(fl.name for fl in fields(DecisionSample))])
        w.writeheader()
        for s in samples:
            w.writerow({"since_start": round(s.time - start, 4), **asdict(s)})


def plot_timeline(
    path: Path,
    samples: Sequence[DecisionSample],
    start: float,
    title: str,
    names: Mapping[int, str] | None = None,
    marks: Mapping[str, float] | None = None,
) -> None:
    """A step line per job: its switch class over time (higher = served first); ``marks``: vertical lines
    (e.g. when the search reached 0.9 A*)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4.2))
    colours = plt.get_cmap("tab10")
    jobs = sorted({s.job for s in samples})
    for k, job in enumerate(jobs):
        mine = sorted((s.time - start, s.priority) for s in samples if s.job == job)
        if not mine:
            continue
        xs, ys = zip(*mine, strict=True)
        # a small offset per job keeps lines on the same class apart
        off = (k - (len(jobs) - 1) / 2) * 0.06
        label = f"job {job}" + (f" ({names[job]})" if names and job in names else "")
        ax.step(xs, [y + off for y in ys], where="post", color=colours((job - 1) % 10), label=label, linewidth=1.6)
    for name, t in (marks or {}).items():
        if t == t:  # not NaN
            ax.axvline(t, color="grey", linestyle="--", linewidth=0.8)
            ax.annotate(name, (t, ax.get_ylim()[1]), xytext=(2, -12), textcoords="offset points", fontsize="small")
    ax.set_xlabel("time since the start (s)")
    ax.set_ylabel("switch class (MAIF)")
    ax.set_title(title, fontsize="medium")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="x-small", loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
