"""Explanations: why a job has its class, as the API's JobExplanation (structured fields and a text)."""

from __future__ import annotations

import math

from mlfc.policy import fallback as fb
from mlfc.policy import maif
from mlfc.proto import coordinator_pb2 as pb

from .convert import fit_pb, window_pb
from .decision import JobDecision
from .jobs import ACTIVE, JobRecord


def ranked(
    job_decision: JobDecision, ranked_jobs: int, params: maif.MaifParams, decision: int, applies: str = "maif"
) -> pb.JobExplanation:
    """An active job as the latest evaluation ranked it (``decision``: the latest decision's number; ``applies``:
    Decision.applies, whether the class is in the intent or the fallback holds it back)."""
    view, score, assignment, fit = job_decision.view, job_decision.score, job_decision.assignment, job_decision.view.fit
    explanation = pb.JobExplanation(
        job_id=view.job_id,
        name=view.name,
        state=ACTIVE,
        fit=fit_pb(fit),
        predicted_gain=score.gain,
        next_iterations=score.next_iters,
        network_seconds=score.network_s,
        score=assignment.score,
        rank=assignment.rank,
        priority=assignment.priority,
        reasons=job_decision.reasons,
        decision=decision,
    )
    if job_decision.window is not None:
        explanation.windows.append(window_pb(job_decision.window))
    timing = "unknown iteration time" if math.isnan(view.iter_s) else f"{view.iter_s:.3g}s/iteration"
    net = (
        "network time unknown (whole iteration counted)"
        if math.isnan(view.net_s)
        else f"{view.net_s:.3g}s on the network"
    )
    priority = assignment.priority
    lines = [
        f"job {view.job_id} {view.name!r}: active, rank {assignment.rank} of {ranked_jobs} -> "
        + (f"class {priority}" if applies == "maif" else f"class {priority} not applied ({_HELD[applies]})"),
        f"  fit: {fit.describe()}; last iteration {fit.last_iteration}, quality {fit.last_quality:.4g}",
        f"  predicted gain: {score.gain:+.4g} over the next {score.next_iters:.3g} iterations "
        f"({params.horizon_s:g}s horizon, {timing}, {net})",
        f"  score: {assignment.score:.4g} quality per network second (network {score.network_s:.3g}s per horizon)",
    ]
    lines += [f"  - {reason}" for reason in job_decision.reasons]
    explanation.text = "\n".join(lines)
    return explanation


_HELD = {"none": "MLTCP alone, see the fallback line", "interleave": "in-network interleaving instead"}


def unranked(job: JobRecord, decision: int) -> pb.JobExplanation:
    """A job the latest evaluation did not rank: retired (finished, silent), or registered since."""
    text = f"job {job.job_id} {job.spec.name!r} ({job.kind}): {job.state}"
    if job.state != ACTIVE:
        return pb.JobExplanation(
            job_id=job.job_id,
            name=job.spec.name,
            state=job.state,
            reasons=[f"retired: {job.reason}"],
            decision=decision,
            text=text + f" ({job.reason}); not in the intent, its traffic falls back to the default class",
        )
    return pb.JobExplanation(
        job_id=job.job_id,
        name=job.spec.name,
        state=job.state,
        reasons=["not evaluated yet"],
        text=text + "; not evaluated yet",
    )


def fallback_status(state: fb.FallbackState | None) -> pb.FallbackStatus:
    """The fallback's mode as the Status RPC carries it: OFF without a fallback (``state`` None)."""
    if state is None:
        return pb.FallbackStatus(mode=pb.FALLBACK_OFF)
    mode = pb.FALLBACK_ENGAGED if state.engaged else pb.FALLBACK_IDLE
    return pb.FallbackStatus(mode=mode, reason=f"fallback {'engaged' if state.engaged else 'idle'}: {state.reason}")
