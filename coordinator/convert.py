"""The one place where the coordinator's own types become wire or storage formats: decisions to intents
(mlfc.intent.v1), maif.Window to IterationWindow, the ranker's memory to and from the JSON kept with each
decision, fits and records to the coordinator API's messages."""

from __future__ import annotations

import json
from collections.abc import Mapping

from mlfc.policy import fallback as fb
from mlfc.policy import maif
from mlfc.proto import coordinator_pb2 as pb
from mlfc.proto import intent_pb2

from .decision import Decision, Memory
from .jobs import JobRecord
from .store import DecisionRow

SOURCE = "mlfc-coordinator"  # Intent.source of every decision
FALLBACK_KEY = "_fallback"  # the fallback's state in the memory JSON (job ids are numbers)


def window_pb(w: maif.Window) -> intent_pb2.IterationWindow:
    return intent_pb2.IterationWindow(first=w.first, last=w.last, priority=w.priority)


def intent_of(decision: Decision) -> intent_pb2.Intent:
    applies = decision.applies
    intent = intent_pb2.Intent(interleaving=decision.interleaving or applies is fb.Applied.INTERLEAVE, source=SOURCE)
    if applies is not fb.Applied.MAIF:  # idle (MLTCP alone) or interleaving: no job classes
        return intent
    for jid, d in decision.jobs.items():
        ji = intent.jobs.add(job_id=jid, priority=d.priority, flows=d.view.flows)
        if d.window is not None:
            ji.windows.append(window_pb(d.window))
    return intent


def jobs_key(intent: intent_pb2.Intent) -> bytes:
    """The jobs part of the intent, deterministically serialized."""
    return b"".join(j.SerializeToString(deterministic=True) for j in sorted(intent.jobs, key=lambda j: j.job_id))


def intent_key(intent: intent_pb2.Intent) -> bytes:
    """What identifies a decision: its jobs and whether it interleaves (which the fallback switches alone)."""
    return (b"I" if intent.interleaving else b"-") + jobs_key(intent)


# The memory column of `decisions`: {"<job>": {"rank", "priority", "plateau", "window": [first, last, prio] | null,
# and with the chance objective "credit", "held_from"},
# "_fallback": {"engaged", "changed_at": {"<job>": iteration}, "releases", "reason"} (only with the fallback)}
def memory_json(memory: Mapping[int, Memory], fallback_state: fb.FallbackState | None = None) -> str:
    out: dict[str, object] = {
        str(j): {
            "rank": m.previous.rank,
            "priority": m.previous.priority,
            "plateau": m.previous.plateau,
            **({"credit": m.previous.credit} if m.previous.credit else {}),
            **({"held_from": m.previous.held_from} if m.previous.held_from >= 0 else {}),
            "window": [m.window.first, m.window.last, m.window.priority] if m.window else None,
        }
        for j, m in memory.items()
    }
    if fallback_state is not None:
        s = fallback_state
        out[FALLBACK_KEY] = {
            "engaged": s.engaged,
            "changed_at": {str(j): it for j, it in s.changed_at.items()},
            "releases": s.releases,
            "reason": s.reason,
        }
    return json.dumps(out)


def fallback_from_json(text: str) -> fb.FallbackState | None:
    """The fallback's state kept with a decision, None if the decision was made without the fallback."""
    f = json.loads(text).get(FALLBACK_KEY)
    if f is None:
        return None
    changed = {int(j): int(it) for j, it in f["changed_at"].items()}
    return fb.FallbackState(bool(f["engaged"]), changed, int(f["releases"]), str(f["reason"]))


def memory_from_json(text: str) -> dict[int, Memory]:
    out = {}
    for j, m in json.loads(text).items():
        if j == FALLBACK_KEY:
            continue
        w = m.get("window")
        out[int(j)] = Memory(
            maif.Previous(
                m["rank"], m["priority"], m["plateau"], float(m.get("credit", 0.0)), int(m.get("held_from", -1))
            ),
            maif.Window(*w) if w else None,
        )
    return out


def fit_pb(fit: maif.Fit) -> pb.CurveFit:
    return pb.CurveFit(
        model=fit.model,
        a=fit.a,
        b=fit.b,
        c=fit.c,
        r2=fit.r2,
        points=fit.points,
        last_iteration=fit.last_iteration,
        last_quality=fit.last_quality,
        t0=fit.t0,
    )


def worker_progress(job: JobRecord) -> list[pb.WorkerProgress]:
    return [
        pb.WorkerProgress(rank=w, has_reports=True, last_iteration=t.last, reports=t.reports)
        for w, t in sorted(job.workers.items())
    ]


def job_info(job: JobRecord) -> pb.JobInfo:
    return pb.JobInfo(
        job_id=job.job_id,
        name=job.spec.name,
        metric=job.spec.metric or pb.ACCURACY,
        state=job.state,
        reason=job.reason,
        instance=job.instance,
        registered_at=job.registered_at,
        changed_at=job.changed_at,
        workers=worker_progress(job),
        reports=sum(t.reports for t in job.workers.values()),
        metric_points=len(job.curve.t),
        final_iteration=job.spec.final_iteration,
    )


def decision_record(row: DecisionRow) -> pb.DecisionRecord:
    memory = memory_from_json(row.memory)
    ranked = [
        pb.RankedJob(
            job_id=j,
            rank=m.previous.rank,
            priority=m.previous.priority,
            plateau=m.previous.plateau,
            windows=[window_pb(m.window)] if m.window else [],
        )
        for j, m in sorted(memory.items(), key=lambda jm: jm[1].previous.rank)
    ]
    return pb.DecisionRecord(
        seq=row.seq,
        created_at=row.created_at,
        applied_at=row.applied_at or 0.0,
        generation=row.generation or 0,
        intent=intent_pb2.Intent.FromString(row.intent),
        jobs=ranked,
    )
