"""MLTCP's fallback (mlfc/policy/fallback.py) and the engine applying it: the detector engages on communication
times that stay contended, not on converged ones nor on a straggler's longer compute, releases only after the calm
period (doubled after every release), and the decision carries no classes until it engages and says why."""

from __future__ import annotations

import pytest
from coord_helpers import report, spec

from mlfc.coordinator import convert
from mlfc.coordinator.engine import Engine, EngineConfig
from mlfc.coordinator.store import Store
from mlfc.policy import fallback as fb
from mlfc.policy.maif import MaifParams
from mlfc.policy.priority import PolicyError
from mlfc.proto import coordinator_pb2 as pb

P = fb.FallbackParams()  # warmup 4, window 3, enter 1.35, exit 1.15, calm 8
SOLO = 0.40  # seconds of a communication phase alone


def converging(n: int, start: int = 0) -> dict[int, float]:
    """Two jobs' phases collide for three iterations, then MLTCP has them interleaved (a little jitter)."""
    return {i: SOLO * (1.9 if i < start + 3 else 1.0 + 0.05 * (i % 2)) for i in range(start, start + n)}


def contended(n: int, start: int = 0) -> dict[int, float]:
    """Never interleaved: every phase shared most of its length, oscillating between 1.5x and 1.9x."""
    return {i: SOLO * (1.5 if i % 2 else 1.9) for i in range(start, start + n)} | {start + 1: SOLO}


def run(series: dict[int, dict[int, float]], state: fb.FallbackState | None = None) -> fb.Verdict:
    return fb.step(state or fb.FallbackState(), series, P)


def test_contention_is_the_window_mean_against_the_best_after_the_first_iteration() -> None:
    c = fb.contention({0: 0.1, 1: 0.4, 2: 0.8, 3: 0.6, 4: 0.4}, window=3)
    assert c is not None and (c.first, c.last, c.best_s) == (2, 4, 0.4)  # iteration 0 (set-up) is not the best
    assert c.ratio == pytest.approx(1.5)
    assert fb.contention({0: 0.4, 1: 0.4}, window=3) is None  # too few iterations
    assert fb.contention({0: 0.4, 1: 0.4, 2: 0.5, 3: 0.6}, window=2, after=3) is None


def test_engages_on_jobs_that_never_interleave_and_says_why() -> None:
    v = run({1: contended(12), 2: contended(12)})
    assert v.switched and v.state.engaged
    assert v.applies("maif") == "maif" and v.applies("interleave") == "interleave"
    assert "MLTCP alone has not interleaved the jobs" in v.state.reason and "job 1" in v.state.reason
    assert v.state.changed_at == {1: 11, 2: 11}


def test_stays_idle_on_converged_jobs_during_warmup_and_alone() -> None:
    v = run({1: converging(16), 2: converging(16)})
    assert not v.state.engaged and not v.switched and v.applies("maif") == "none"
    assert max(c.ratio for c in v.contention) < P.exit
    # The same contended phases inside the warm-up (iterations 0..3) do not count.
    assert not run({1: contended(P.warmup), 2: contended(P.warmup)}).state.engaged
    # One job alone has nobody to be given priority over.
    assert not run({1: contended(12)}).state.engaged


def test_hysteresis_release_only_after_a_calm_period_that_doubles() -> None:
    engaged = run({1: contended(10), 2: contended(10)}).state
    assert engaged.changed_at == {1: 9, 2: 9}
    # Under priorities the phases are uncontended at once, but 7 iterations are not the 8 of the calm period.
    calm = {j: contended(10) | {i: SOLO for i in range(10, 17)} for j in (1, 2)}
    v = run(calm, engaged)
    assert v.state.engaged and not v.switched
    # Contention between exit and enter holds the priorities however long it lasts.
    middling = {j: contended(10) | {i: SOLO * 1.25 for i in range(10, 40)} for j in (1, 2)}
    assert run(middling, engaged).state.engaged
    calm = {j: contended(10) | {i: SOLO for i in range(10, 18)} for j in (1, 2)}
    v = run(calm, engaged)
    assert v.switched and not v.state.engaged and v.state.releases == 1 and "MLTCP alone again" in v.state.reason
    released = v.state
    # Back to MLTCP alone: the contended history before the release does not re-engage; MLTCP gets a warm-up.
    again = {j: calm[j] | {i: SOLO * 1.9 for i in range(18, 18 + P.warmup)} for j in (1, 2)}
    assert not run(again, released).state.engaged
    again = {j: calm[j] | {i: SOLO * 1.9 for i in range(18, 18 + P.warmup + P.window)} for j in (1, 2)}
    second = run(again, released).state
    assert second.engaged and second.releases == 1
    # The second calm period is 16 iterations.
    assert fb.calm_period(P, second.releases) == 16
    last = max(again[1])
    calm2 = {j: again[j] | {i: SOLO for i in range(last + 1, last + 16)} for j in (1, 2)}
    assert run(calm2, second).state.engaged
    calm2 = {j: again[j] | {i: SOLO for i in range(last + 1, last + 17)} for j in (1, 2)}
    assert not run(calm2, second).state.engaged


def test_params_are_checked() -> None:
    with pytest.raises(PolicyError, match="action"):
        fb.FallbackParams(action="fifo")
    with pytest.raises(PolicyError, match="exit < enter"):
        fb.FallbackParams(enter=1.1, exit=1.2)


# -- the engine ---------------------------------------------------------------------------------------------


def ends_at(job: int, iteration: int) -> float:
    """The agent's clock at an iteration's end: 2 s iterations, job 2 a second after job 1 (phases apart)."""
    return 1000.0 + 2.0 * iteration + (job - 1)


def feed(engine: Engine, job: int, series: dict[int, float], compute: float = 0.6) -> None:
    reports = []
    for i, s in sorted(series.items()):
        r = report(job, i, 0.9 * (1 - 0.9 ** (i + 1)), comm=s, compute=compute * (1.6 if job == 1 and i >= 5 else 1))
        r.timestamp = ends_at(job, i)
        reports.append(r)
    engine.report(pb.ReportBatch(reports=reports))


def engine_with(tmp_path, fallback: fb.FallbackParams | None) -> Engine:  # type: ignore[no-untyped-def]
    engine = Engine(Store(str(tmp_path / "coord.sqlite")), EngineConfig(params=MaifParams(), fallback=fallback))
    for j in (1, 2):
        engine.register(pb.RegisterRequest(job=spec(j), instance="agent"))
    return engine


def test_engine_switches_from_no_classes_to_maif_and_explains(tmp_path) -> None:  # type: ignore[no-untyped-def]
    engine = engine_with(tmp_path, P)
    for j in (1, 2):
        feed(engine, j, contended(P.warmup + P.window - 1))  # one iteration short of a full window
    assert engine.decide() is not None
    seq, intent = engine.latest_decision() or (0, None)
    assert intent is not None and list(intent.jobs) == [] and not intent.interleaving  # MLTCP alone
    text = engine.explain(1).text
    assert "not applied (MLTCP alone" in text and "fallback idle" in text
    assert engine.status().fallback.mode == pb.FALLBACK_IDLE  # the mode is typed state in Status too
    for j in (1, 2):
        feed(engine, j, {P.warmup + P.window - 1: SOLO * 1.9})
    assert engine.decide() == seq + 1
    _, intent = engine.latest_decision() or (0, None)
    assert intent is not None and sorted(j.priority for j in intent.jobs) == [5, 6]  # strict classes now
    text = engine.explain(2).text
    assert "fallback engaged: MAIF class applied: MLTCP alone has not interleaved the jobs" in text
    assert "not applied" not in text
    assert engine.status().fallback.mode == pb.FALLBACK_ENGAGED
    assert "has not interleaved" in engine.status().fallback.reason
    # The state survives a restart with the decision.
    engine._store.close()
    restarted = Engine(Store(str(tmp_path / "coord.sqlite")), EngineConfig(fallback=P))
    assert restarted._fallback.engaged and restarted._fallback.changed_at == {1: 6, 2: 6}
    assert restarted.decide() is None  # the same intent: nothing new to send


def test_a_stragglers_longer_compute_is_not_contention(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # Job 1 computes 1.6x slower from iteration 5: its iterations lengthen by 60 %, its communication does not.
    engine = engine_with(tmp_path, P)
    series = converging(16)
    feed(engine, 1, series, compute=0.6)  # (feed makes job 1 compute 1.6x from iteration 5)
    feed(engine, 2, series)
    engine.decide()
    assert not engine._fallback.engaged
    _, intent = engine.latest_decision() or (0, None)
    assert intent is not None and list(intent.jobs) == []
    # The same job with its communication stretched instead does engage it.
    engine = engine_with(tmp_path / "comm", P) if (tmp_path / "comm").mkdir() is None else None
    assert engine is not None
    feed(engine, 1, {i: s * (1.6 if i >= 5 else 1.0) for i, s in series.items()})
    feed(engine, 2, series)
    engine.decide()
    assert engine._fallback.engaged


def test_phases_that_always_coincide_engage_although_no_time_stands_out(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # Jobs colliding from their first iteration never communicate alone: the ratio to their best stays ~1, but
    # the agents' clocks show every phase beside the other job's.
    engine = engine_with(tmp_path, P)
    steady = {i: 2 * SOLO for i in range(10)}
    for j in (1, 2):
        reports = [report(j, i, 0.5, comm=s) for i, s in steady.items()]
        for r in reports:
            r.timestamp = ends_at(1, r.iteration)  # the same instants for both jobs
        engine.report(pb.ReportBatch(reports=reports))
    engine.decide()
    assert engine._fallback.engaged and "100 % of it beside other jobs'" in engine._fallback.reason
    # The same times with the phases apart (feed's clocks): no engagement.
    apart = engine_with(tmp_path / "apart", P) if (tmp_path / "apart").mkdir() is None else None
    assert apart is not None
    for j in (1, 2):
        feed(apart, j, steady)
    apart.decide()
    assert not apart._fallback.engaged and "overlap at most 0 %" in apart._fallback.reason


def test_engine_interleave_action_and_no_fallback(tmp_path) -> None:  # type: ignore[no-untyped-def]
    engine = engine_with(tmp_path, fb.FallbackParams(action="interleave"))
    for j in (1, 2):
        feed(engine, j, contended(12))
    engine.decide()
    _, intent = engine.latest_decision() or (0, None)
    assert intent is not None and intent.interleaving and list(intent.jobs) == []
    assert "in-network interleaving" in engine.explain(1).text
    # Without the fallback the ranking applies from the start, as before.
    plain = engine_with(tmp_path / "plain", None) if (tmp_path / "plain").mkdir() is None else None
    assert plain is not None
    for j in (1, 2):
        feed(plain, j, converging(6))
    plain.decide()
    _, intent = plain.latest_decision() or (0, None)
    assert intent is not None and len(intent.jobs) == 2
    assert "fallback" not in plain.explain(1).text
    assert plain.status().fallback.mode == pb.FALLBACK_OFF


def test_memory_json_keeps_the_fallback_state_apart_from_the_jobs() -> None:
    state = fb.FallbackState(True, {1: 9, 2: 11}, 1, "why")
    text = convert.memory_json({}, state)
    assert convert.fallback_from_json(text) == state and convert.memory_from_json(text) == {}
    assert convert.fallback_from_json(convert.memory_json({})) is None


def test_cli_flags_and_the_lab_treatment_configure_the_fallback() -> None:
    from mlfc.coordinator.cli import _config, build_parser
    from mlfc.lab.scenarios import MIXES, TREATMENTS, Treatment, stack_config

    args = build_parser().parse_args(["run", "--db", "x", "--token-file", "t", "--fallback", "interleave"])
    assert _config(args).fallback == fb.FallbackParams(action="interleave")
    args = build_parser().parse_args(
        ["run", "--db", "x", "--token-file", "t", "--fallback", "maif", "--fallback-overlap-enter", "0.9"]
    )
    assert _config(args).fallback == fb.FallbackParams(overlap_enter=0.9)
    args = build_parser().parse_args(["run", "--db", "x", "--token-file", "t"])
    assert _config(args).fallback is None
    cfg = stack_config(MIXES["circular"], TREATMENTS["mltcp+fallback"], 10)
    assert cfg.coordinator_args == ("--fallback", "maif") and cfg.priorities == "maif" and cfg.mltcp
    with pytest.raises(ValueError, match="needs priorities='maif'"):
        stack_config(MIXES["circular"], Treatment("x", mltcp=True, fallback="maif"), 10)


def test_overlap_is_the_share_of_a_phase_beside_other_jobs_phases() -> None:
    phases = {1: {0: (0.0, 1.0), 1: (2.0, 3.0)}, 2: {0: (0.5, 1.5), 1: (3.5, 4.0)}, 3: {0: (0.6, 0.8)}}
    assert fb.overlap(phases, 1, 0, 0) == pytest.approx(0.5)  # job 2 from 0.5 on (job 3 inside it: not twice)
    assert fb.overlap(phases, 1, 1, 1) == 0.0
    assert fb.overlap(phases, 1, 0, 1) == pytest.approx(0.25)
    assert fb.overlap({1: phases[1]}, 1, 0, 1) != fb.overlap({1: phases[1]}, 1, 0, 1)  # nan: nobody else
    # Released only when the phases are apart too: uncontended times, but still side by side.
    engaged = run({1: contended(10), 2: contended(10)}).state
    calm = {j: contended(10) | {i: SOLO for i in range(10, 20)} for j in (1, 2)}
    side_by_side = {j: {i: (2.0 * i, 2.0 * i + SOLO) for i in range(20)} for j in (1, 2)}
    assert fb.step(engaged, calm, P, side_by_side).state.engaged
    apart = {j: {i: (2.0 * i + j, 2.0 * i + j + SOLO) for i in range(20)} for j in (1, 2)}
    assert not fb.step(engaged, calm, P, apart).state.engaged
