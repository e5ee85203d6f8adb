"""The chaos run's ledger: every acknowledged report looked up in the coordinator's store, every acknowledged
decision looked for on the switches within the bound. One row per report / decision (CSV), and the counts.

A report is acknowledged when an agent's --ack-log has it in a committed batch; it may be acknowledged more
than once (a re-send after a lost acknowledgement, another agent incarnation), it is one entry. A decision
is acknowledged when the controller answered it (the store's ``applied_at``). It counts as applied when
every switch was seen holding exactly its entries within ``bound`` s of being due: of its acknowledgement,
or of the end of a fault that came between its acknowledgement and the sighting (a killed switch holds
nothing until it is back). A decision that a newer acknowledged one replaced within the bound could not
be seen any longer and broke no promise: "superseded", counted as applied.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Sequence
from dataclasses import astuple, dataclass, fields
from pathlib import Path

# (job, worker, iteration) -> the store's receive time of that report, None when the store lacks it
ReportLookup = Callable[[int, int, int], float | None]


@dataclass(frozen=True)
class ReportEntry:
    job: int
    worker: int
    iteration: int
    first_ack: float  # unix time of the first acknowledgement (the agent's log)
    acks: int  # how many acknowledgements named it
    found: bool  # the coordinator's store holds it
    recv_time: float | None  # when the store says it received it


@dataclass(frozen=True)
class DecisionEntry:
    seq: int
    created_at: float
    acked_at: float  # the controller's acknowledgement (store: applied_at)
    due_from: float  # acked_at, or the end of the last fault between it and the sighting
    seen_at: float | None  # first time every switch held exactly its entries
    superseded_at: float | None  # the next acknowledged decision's acknowledgement
    status: str  # applied, superseded, late, never, unobserved (due after the observation ended)

    @property
    def applied(self) -> bool:
        return self.status in ("applied", "superseded")

    @property
    def delay_s(self) -> float | None:
        return None if self.seen_at is None else max(0.0, self.seen_at - self.due_from)


def report_ledger(acks: Iterable[dict], lookup: ReportLookup, default_job: int) -> list[ReportEntry]:
    """One entry per distinct acknowledged (job, worker, iteration), in that order."""
    first: dict[tuple[int, int, int], float] = {}
    count: dict[tuple[int, int, int], int] = {}
    for row in acks:
        if not row.get("committed"):
            continue
        job = int(row.get("job", default_job))
        for worker, iteration in row.get("reports", ()):
            key = (job, int(worker), int(iteration))
            t = float(row.get("time", 0.0))
            first[key] = min(t, first.get(key, t))
            count[key] = count.get(key, 0) + 1
    out = []
    for key in sorted(first):
        recv = lookup(*key)
        out.append(ReportEntry(*key, first[key], count[key], recv is not None, recv))
    return out


def decision_ledger(
    decisions: Iterable[tuple[int, float, float | None]],
    seen: dict[int, float],
    faults: Sequence[tuple[float, float]],
    bound: float,
    observed_until: float,
) -> list[DecisionEntry]:
    """``decisions``: (seq, created_at, acked_at or None); ``seen``: seq -> first sighting on every switch;
    ``faults``: (killed_at, back_at); one entry per acknowledged decision, by seq."""
    acked = sorted((s, c, a) for s, c, a in decisions if a)
    out = []
    for i, (seq, created, at) in enumerate(acked):
        sighting = seen.get(seq)
        horizon = sighting if sighting is not None else float("inf")
        due = max([at, *(back for killed, back in faults if killed <= horizon and back >= at)])
        nxt = acked[i + 1][2] if i + 1 < len(acked) else None
        if sighting is not None and sighting - due <= bound:
            status = "applied"
        elif nxt is not None and nxt <= due + bound:
            status = "superseded"
        elif sighting is not None:
            status = "late"
        elif due + bound > observed_until:
            status = "unobserved"
        else:
            status = "never"
        out.append(DecisionEntry(seq, created, at, due, sighting, nxt, status))
    return out


@dataclass(frozen=True)
class Ledger:
    reports: list[ReportEntry]
    decisions: list[DecisionEntry]
    unacked_decisions: int = 0  # made but never acknowledged by the controller (not promised)

    @property
    def reports_acked(self) -> int:
        return len(self.reports)

    @property
    def reports_found(self) -> int:
        return sum(r.found for r in self.reports)

    def lost(self) -> list[ReportEntry]:
        return [r for r in self.reports if not r.found]

    @property
    def decisions_acked(self) -> int:
        """Acknowledged decisions whose bound ran out while the switches were watched."""
        return sum(d.status != "unobserved" for d in self.decisions)

    @property
    def decisions_applied(self) -> int:
        return sum(d.applied for d in self.decisions)

    @property
    def ok(self) -> bool:
        return self.reports_found == self.reports_acked and self.decisions_applied == self.decisions_acked

    def summary(self, bound: float) -> list[str]:
        """Markdown bullet lines."""
        lost = self.lost()
        by_status: dict[str, int] = {}
        for d in self.decisions:
            by_status[d.status] = by_status.get(d.status, 0) + 1
        delays = [d.delay_s for d in self.decisions if d.status == "applied" and d.delay_s is not None]
        named = ", ".join(f"job {r.job} worker {r.worker} iteration {r.iteration}" for r in lost[:10])
        named += ", ..." if len(lost) > 10 else ""
        lines = [
            f"* reports acknowledged to the agents: {self.reports_acked}, found in the coordinator's store: "
            f"{self.reports_found}; lost: **{len(lost)}**" + (f" ({named})" if lost else ""),
            f"* decisions acknowledged by the controller: {self.decisions_acked}, on every switch within "
            f"{bound:g} s: **{self.decisions_applied}** ("
            + ", ".join(f"{k} {v}" for k, v in sorted(by_status.items()))
            + (f"; slowest {max(delays):.2f} s" if delays else "")
            + f"); never acknowledged: {self.unacked_decisions}",
        ]
        return lines

    def write(self, out: Path) -> list[Path]:
        """reports.csv and decisions.csv in ``out``; returns their paths."""
        out.mkdir(parents=True, exist_ok=True)
        paths = [out / "ledger-reports.csv", out / "ledger-decisions.csv"]
        _write_csv(paths[0], [f.name for f in fields(ReportEntry)], [astuple(r) for r in self.reports])
        heads = [f.name for f in fields(DecisionEntry)] + ["applied", "delay_s"]
        _write_csv(paths[1], heads, [(*astuple(d), int(d.applied), d.delay_s) for d in self.decisions])
        return paths


def _write_csv(path: Path, header: list[str], rows: Iterable[tuple]) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for row in rows:
            w.writerow(["" if v is None else f"{v:.6f}" if isinstance(v, float) else int(v) if isinstance(v, bool)
                        else v for v in row])  # fmt: skip
