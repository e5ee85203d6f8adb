"""The decision as a pure function (coordinator/decision.py) and its conversion to an intent and to the
stored memory (coordinator/convert.py): snapshots in, rankings out, no threads, SQLite or gRPC."""

from __future__ import annotations

import math

import numpy as np

from mlfc.coordinator import convert
from mlfc.coordinator.decision import Decision, FitCache, JobView, Memory, decide, fit_job
from mlfc.policy import maif
from mlfc.proto import intent_pb2

T = np.arange(200, dtype=float)
PLATEAU = 0.85 - 0.75 * np.exp(-0.08 * T)
IMPROVING = 0.95 - 0.9 * (T + 1) ** -0.35


def view(job_id: int, fit: maif.Fit, workers: dict[int, int] | None = None, **kw: object) -> JobView:
    return JobView(job_id, f"job{job_id}", fit, 0.15, 0.05, workers or {0: fit.last_iteration}, **kw)  # type: ignore[arg-type]


def fitted(curve: np.ndarray, n: int = 200) -> maif.Fit:
    return fit_job("accuracy", T[:n].tolist(), curve[:n].tolist(), None, 4)


def test_improving_job_is_served_first_and_plateau_sinks() -> None:
    d = decide([view(1, fitted(PLATEAU)), view(2, fitted(IMPROVING)), view(3, maif.Fit("prior"))], {})
    assert {j: x.priority for j, x in d.jobs.items()} == {2: 6, 3: 5, 1: 2}
    assert d.jobs[1].assignment.plateau and any("plateaued" in r for r in d.jobs[1].reasons)
    assert any("exploration prior" in r for r in d.jobs[3].reasons)
    assert list(d.jobs) == [1, 2, 3]  # by job id, whatever the rank


def test_previous_order_holds_within_the_hysteresis_margin() -> None:
    a, b = fitted(IMPROVING, 100), fitted(IMPROVING, 100)
    views = [view(1, a), view(2, b)]
    first = decide(views, {})
    assert (first.jobs[1].priority, first.jobs[2].priority) == (6, 5)  # equal scores: job id breaks the tie
    again = decide(views, {1: Memory(maif.Previous(2, 5)), 2: Memory(maif.Previous(1, 6))})
    assert (again.jobs[1].priority, again.jobs[2].priority) == (5, 6)  # the incumbent keeps its place


def test_straggler_window_and_its_memory() -> None:
    lagging = {0: 203, 1: 199}
    d = decide([view(1, fitted(PLATEAU), lagging), view(2, fitted(IMPROVING))], {})
    j1 = d.jobs[1]
    assert j1.window == maif.Window(200, 203, j1.priority + 1)
    assert any("straggler: worker 1 lags 4" in r for r in j1.reasons)
    # Sticky while the straggler is inside the window, given the memory of the previous decision.
    later = decide([view(1, fitted(PLATEAU), {0: 205, 1: 201}), view(2, fitted(IMPROVING))], d.memory())
    assert later.jobs[1].window == j1.window


def test_intent_has_every_job_its_flows_and_one_window_type() -> None:
    flow = intent_pb2.Flow(src="10.0.0.1", protocol=6)
    d = decide([view(1, fitted(PLATEAU), {0: 203, 1: 199}, flows=(flow,)), view(2, fitted(IMPROVING))], {}, None, True)
    intent = convert.intent_of(d)
    assert intent.interleaving and intent.source == convert.SOURCE
    j1 = next(j for j in intent.jobs if j.job_id == 1)
    assert list(j1.flows) == [flow]
    assert [(w.first, w.last, w.priority) for w in j1.windows] == [(200, 203, d.jobs[1].priority + 1)]
    # The decision key ignores the source and job order.
    other = intent_pb2.Intent(jobs=list(reversed(intent.jobs)), source="else")
    assert convert.jobs_key(other) == convert.jobs_key(intent)


def test_memory_round_trips_through_the_stored_json() -> None:
    d = decide([view(1, fitted(PLATEAU), {0: 203, 1: 199}), view(2, fitted(IMPROVING))], {})
    assert convert.memory_from_json(convert.memory_json(d.memory())) == d.memory()
    # The format of databases written before the split: [first, last, priority] lists.
    old = '{"1": {"rank": 2, "priority": 5, "plateau": false, "window": [200, 203, 6]}}'
    assert convert.memory_from_json(old) == {1: Memory(maif.Previous(2, 5, False), maif.Window(200, 203, 6))}


def test_no_jobs_no_intent_jobs() -> None:
    d = decide([], {7: Memory(maif.Previous(1, 6))})
    assert d == Decision({}, False) and list(convert.intent_of(d).jobs) == []


def test_fit_job_and_cache() -> None:
    loss = fit_job("loss", T[:50].tolist(), (2.0 * (T[:50] + 1) ** -0.3).tolist(), None, 4)
    assert loss.model in ("power", "exp") and loss.last_quality > 0  # quality = fraction of the first loss removed
    assert fit_job("accuracy", [], [], None, 4).model == "prior"
    cache = FitCache()
    cache.put(1, 3, loss)
    assert cache.get(1, 3) is loss and cache.get(1, 4) is None
    cache.drop(1)
    assert cache.get(1, 3) is None
    assert math.isfinite(decide([view(1, loss)], {}).jobs[1].score.gain)


def test_search_objective_serves_the_best_job_and_says_so() -> None:
    leader = 0.9 - 0.5 * (T + 1) ** -0.5  # best so far, gaining slowly
    laggard = 0.95 - 0.9 * (T + 1) ** -0.3  # far below, gaining faster
    views = [view(1, fitted(leader, 41)), view(2, fitted(laggard, 41))]
    assert decide(views, {}).jobs[2].priority == 6  # MAIF's sum of gains serves the laggard
    d = decide(views, {}, maif.MaifParams(objective="best"))
    assert (d.jobs[1].priority, d.jobs[2].priority) == (6, 5)
    assert any(r.startswith("search objective: counted gain") for r in d.jobs[1].reasons)


def test_coordinator_cli_passes_the_objective() -> None:
    from mlfc.coordinator.cli import _config, build_parser

    args = build_parser().parse_args(["run", "--db", "x.db", "--token-file", "t", "--objective", "best"])
    assert _config(args).params.objective == "best"
    assert _config(build_parser().parse_args(["run", "--db", "x.db", "--token-file", "t"])).params.objective == "sum"
