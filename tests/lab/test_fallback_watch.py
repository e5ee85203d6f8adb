"""The lab reads the coordinator's fallback mode from the Status RPC's typed field (lab/fallback_watch.py),
which coordinator/explain.py fills from the decision's fallback state: no prose is parsed."""

from __future__ import annotations

from mlfc.coordinator.decision import JobView, decide
from mlfc.coordinator.explain import fallback_status
from mlfc.lab.fallback_watch import Switch, describe, fallback_reason
from mlfc.policy import fallback as fb
from mlfc.policy import maif
from mlfc.proto import coordinator_pb2 as pb


def status(series: dict[int, float]) -> pb.StatusReply:
    views = [JobView(j, f"job{j}", maif.Fit("prior"), 1.0, 0.4, {0: max(series)}, (), series) for j in (1, 2)]
    d = decide(views, {}, maif.MaifParams(), False, fb.FallbackParams())
    assert d.fallback is not None
    return pb.StatusReply(fallback=fallback_status(d.fallback.state))


def test_engaged_and_idle_are_read_from_the_typed_status() -> None:
    engaged = fallback_reason(status({i: 0.4 if i == 1 else 0.7 for i in range(10)}))
    assert engaged is not None and engaged[0] and "has not interleaved" in engaged[1]
    idle = fallback_reason(status({i: 0.4 for i in range(10)}))
    assert idle is not None and not idle[0]
    assert fallback_reason(pb.StatusReply(fallback=fallback_status(None))) is None  # no fallback configured
    assert fallback_reason(pb.StatusReply(jobs=[pb.JobExplanation(reasons=["fallback engaged: prose"])])) is None
    lines = describe([Switch(105.0, True, engaged[1])], 100.0)
    assert lines[0].startswith("   5.0 s: fallback engaged") and "this job" not in lines[0]
    assert describe([], 0.0) == ["fallback never engaged"]


def test_random_straggler_draws_are_seeded_and_bounded() -> None:
    import random

    from mlfc.lab.emulator import slowdown

    def draws(seed: int) -> list[float]:
        rng = random.Random(seed)
        return [slowdown(i, 2.2, 3, True, rng) for i in range(40)]

    a = draws(1000)
    assert a[:3] == [1.0, 1.0, 1.0] and all(1.0 <= x <= 2.2 for x in a[3:])
    assert a == draws(1000) and a != draws(2000) and len(set(a[3:])) > 30
    assert slowdown(5, 1.6, 5, False, random.Random(0)) == 1.6 and slowdown(4, 1.6, 5, False, random.Random(0)) == 1.0


def test_replay_of_recorded_runs(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from mlfc.lab.fallback_replay import comm_series, replay
    from mlfc.lab.results import IterationRecord, write_csv

    def rec(job: int, it: int, comm: float) -> IterationRecord:
        return IterationRecord(
            "m/t", job, "w0", it, it * 2.0, it * 2.0 + 1, it * 2.0 + 1 + comm, it * 2.0 + 1 + comm, 1
        )

    contended = [rec(j, i, 0.4 if i == 1 else 0.7) for j in (1, 2) for i in range(12)]
    write_csv(tmp_path / "c.csv", contended)
    comm, phases = comm_series(tmp_path / "c.csv")
    r = replay(comm, fb.FallbackParams())
    assert [(n, e) for n, e, _ in r.switches] == [(6, True)]  # warm-up 0..3, window 4..6
    assert r.ratios[1][1] == 1.0 and abs(r.ratios[1][5] - 1.75) < 1e-9
    write_csv(tmp_path / "ok.csv", [rec(j, i, 0.4) for j in (1, 2) for i in range(12)])
    ok, ok_phases = comm_series(tmp_path / "ok.csv")
    assert replay(ok, fb.FallbackParams()).switches == []
    # The same uncontended times, but every phase beside the other job's: the overlap engages it.
    assert [(n, e) for n, e, _ in replay(ok, fb.FallbackParams(), ok_phases).switches] == [(6, True)]
    assert [(n, e) for n, e, _ in replay(comm, fb.FallbackParams(), phases).switches] == [(6, True)]
