"""Kernel MLTCP under unmodified PyTorch DDP over gloo (mlfc.lab.mltcp.gloo): the job's arithmetic, the
per-rank records, the connection and signal counts, the published rows without root; one short run as root
with torch and the BPF toolchain (skipped with the missing piece named otherwise)."""

from __future__ import annotations

import csv
import json
import math
import os
from pathlib import Path

import pytest

from mlfc.hosts.kernel import KernelMltcpError, build
from mlfc.hosts.kernel.namespaces import TcpSocket
from mlfc.lab import summaries
from mlfc.lab.mltcp import figures as mltcp_figures
from mlfc.lab.mltcp import gloo, gloo_ddp, gloo_rows, regime, rows
from mlfc.lab.mltcp.rows import Cell
from mlfc.lab.results import IterationRecord

# ---- the job ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("jobs", "share", "step", "width"), [(2, 0.40, 0.50, 1113), (4, 0.20, 0.40, 702)])
def test_the_gradient_is_the_communication_share_of_a_step_at_the_bottleneck_rate(jobs, share, step, width) -> None:
    job = gloo_ddp.layout(jobs, 200e6)
    assert job.width == width
    # G bytes cross the shaped direction per step: 8 G / R = a x step
    assert 8 * gloo_ddp.grad_bytes(job.width) / 200e6 == pytest.approx(share * step, rel=2e-3)
    assert job.comm_share == pytest.approx(share)
    assert job.compute_s == pytest.approx(step * (1 - share))
    assert jobs * job.comm_share == pytest.approx(0.8)  # compatible: the jobs' communication fits in a step


def test_the_width_follows_the_rate_and_the_step() -> None:
    assert gloo_ddp.grad_bytes(gloo_ddp.layout(2, 50e6).width) == pytest.approx(gloo_ddp.grad_bytes(1113) / 4, rel=5e-3)
    longer = gloo_ddp.layout(2, 200e6, step_s=1.5)
    assert (longer.comm_s, longer.compute_s) == (pytest.approx(0.6), pytest.approx(0.9))
    with pytest.raises(ValueError, match="3 jobs"):
        gloo_ddp.layout(3, 200e6)


def test_grad_bytes_counts_both_layers() -> None:
    assert gloo_ddp.grad_bytes(100) == 4 * (100 * 100 + 100 + 10 * 100 + 10)


# ---- a rank's output and its records --------------------------------------------------------------


def _rank(t0: float = 1000.0, steps: int = 3, backward_s: float = 0.01, wait: float = 0.2) -> gloo_ddp.RankOutput:
    out = gloo_ddp.RankOutput()
    out.take("[W socket.cpp:207] a warning torch prints\n")
    out.take(json.dumps({"ready": True, "grad_bytes": 5_000_000, "backward_s": backward_s}))
    for i in range(steps):
        s = t0 + 0.6 * i
        out.take(json.dumps({"step": i, "start": s, "backward_start": s + 0.31, "backward_end": s + 0.31 + wait,
                             "end": s + 0.52 + wait}))  # fmt: skip
    return out


def test_records_bracket_the_allreduce_after_backwards_own_compute() -> None:
    out = _rank()
    assert out.ready and out.grad_bytes == 5_000_000 and len(out.steps) == 3
    [first, second, _] = gloo_ddp.records_of("ddp-2/reno", 2, 1, out, t0=1000.0)
    assert (first.job, first.worker, first.iteration, first.bytes) == (2, "r1@w2", 0, 5_000_000)
    assert first.start == pytest.approx(0.0)
    assert first.comm_start == pytest.approx(0.32)  # backward start + its compute alone
    assert first.comm_end == pytest.approx(0.51)
    assert first.end == pytest.approx(0.72)
    assert second.start == pytest.approx(0.6)
    assert gloo_ddp.records_of("s", 1, 0, out, 1000.0)[0].worker == "r0@s"


def test_a_backward_slower_than_its_compute_alone_has_no_negative_communication() -> None:
    [rec] = gloo_ddp.records_of("s", 1, 1, _rank(steps=1, backward_s=0.5, wait=0.1), t0=1000.0)
    assert rec.comm_start == rec.comm_end


def _records(avg: float, jobs: int = 2, steps: int = 5, comm: float = 0.2) -> list[IterationRecord]:
    out = []
    for j in range(1, jobs + 1):
        for rank in (0, 1):
            for i in range(steps):
                s = i * avg
                out.append(IterationRecord("s", j, gloo_ddp.rank_label(j, rank), i, s, s + avg - comm, s + avg, s + avg,
                                           1000))  # fmt: skip
    return out


def test_a_runs_figures_are_over_both_ranks_and_signals_per_connection_and_step() -> None:
    run = gloo_ddp.DdpRun("s", "reno", _records(0.5), steps=5, connections={1: 1, 2: 2}, loss_events=12, marks=3)
    assert run.avg == pytest.approx(0.5)
    assert run.signals_per_phase == pytest.approx(15 / (3 * 5))
    assert run.per_job() == {1: (pytest.approx(0.5), pytest.approx(0.2)), 2: (pytest.approx(0.5), pytest.approx(0.2))}
    assert run.interleaved_at is None  # every job communicates at once
    assert math.isnan(gloo_ddp.DdpRun("s", "reno", [], steps=5).signals_per_phase)  # no connection seen


# ---- namespaces ---------------------------------------------------------------------------------

SS = [
    TcpSocket("w1", "ESTAB", "10.80.1.1:40112", "10.80.250.1:29501", "mltcp_reno", 10, 1.0),  # the store
    TcpSocket("w1", "ESTAB", "10.80.1.1:51000", "10.80.250.1:45123", "mltcp_reno", 10, 1.0),  # gloo
    TcpSocket("w1", "ESTAB", "10.80.1.1:39999", "10.80.250.1:39998", "reno", 10, 1.0),  # gloo, wrong cc
    TcpSocket("w1", "TIME-WAIT", "10.80.1.1:51001", "10.80.250.1:45124", "", None, None),
    TcpSocket("w1", "ESTAB", "127.0.0.1:1", "127.0.0.1:2", "mltcp_reno", 10, 1.0),
]


def test_gloo_connections_are_the_established_ones_to_the_server_but_the_store() -> None:
    assert gloo_ddp.data_connections(SS, "10.80.250.1", 29501) == {
        ("10.80.1.1:51000", "10.80.250.1:45123"),
        ("10.80.1.1:39999", "10.80.250.1:39998"),
    }


def test_every_established_socket_must_use_the_treatments_congestion_control() -> None:
    assert [s.local for s in gloo_ddp.wrong_cc(SS, "mltcp_reno")] == ["10.80.1.1:39999"]


def test_the_device_of_an_address() -> None:
    out = (
        "1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever\n"
        "2: v9b@if3    inet 10.80.250.1/24 scope global v9b\\       valid_lft forever preferred_lft forever\n"
    )
    assert gloo_ddp.device_with(out, "10.80.250.1") == "v9b"
    assert gloo_ddp.device_with(out, "10.80.1.1") is None


# ---- rows ---------------------------------------------------------------------------------------


def _cells(base: list[float], mltcp: list[float], ideal: list[float], jobs: int = 2) -> list[Cell]:
    def run(avg: float) -> gloo_ddp.DdpRun:
        return gloo_ddp.DdpRun("s", "reno", _records(avg, jobs), 5, dict.fromkeys(range(1, jobs + 1), 1), 10, 0, 40)

    mix = gloo_rows.mix_name(jobs)
    # the lab's default regime: CE above 60 KB of a 300 KB queue at 200 Mbit/s
    plain = Cell(mix, "reno", "reno", [run(b) for b in base], ideal, ideal, base, [Path(f"/b{i}") for i in base],
                 300_000, 60_000)  # fmt: skip
    treated = Cell(mix, "mltcp_reno 16:0.5:step=0.2", "reno", [run(m) for m in mltcp], ideal, ideal, base,
                   [Path(f"/m{i}") for i in mltcp], 300_000, 60_000)  # fmt: skip
    return [plain, treated]


def test_a_published_row_per_mltcp_treatment_with_the_kernel_labs_fields() -> None:
    [(row, runs)] = gloo_rows.published_rows(_cells([1.0, 1.0], [0.9, 0.95], [0.8, 0.8]), "cmd")
    assert {k: row[k] for k in ("mix", "cc", "dataplane", "treatment", "f", "jobs", "rounds", "command")} == {
        "mix": "ddp-2", "cc": "reno", "dataplane": "real", "treatment": "mltcp_reno", "f": "16:0.5:step=0.2",
        "jobs": 2, "rounds": 2, "command": "cmd",
    }  # fmt: skip
    assert set(mltcp_figures.MLTCP_KEY) <= set(row)
    fields = {"share_of_ideal", "avg_speedup", "p99_speedup", "ideal_avg", "ideal_p99", "interleaved_from",
              "link_bps", "queue_bytes", "mark_threshold_bytes", "signals_per_phase", "avg_over_ideal"}  # fmt: skip
    assert fields <= set(row)
    assert row["share_of_ideal"] == [0.4444, 0.2105]
    assert row["ideal_avg"] == pytest.approx(1.25)
    assert row["ack_delay"] is None
    assert (row["queue_bytes"], row["mark_threshold_bytes"], row["link_bps"]) == (300_000, 60_000, 200e6)
    assert row["signals_per_phase"] == pytest.approx(10 / (2 * 5))
    assert row["retransmits"] == [40, 40]
    names = [name for _, name in runs]
    assert names == ["ddp-2/real-q300000-k60000/mltcp_reno@16_0.5_step=0.2-r1.csv",
                     "ddp-2/real-q300000-k60000/mltcp_reno@16_0.5_step=0.2-r2.csv",
                     "ddp-2/real-q300000-k60000/reno-r1.csv", "ddp-2/real-q300000-k60000/reno-r2.csv"]  # fmt: skip


def test_the_shallow_regimes_targets_judge_the_rows() -> None:
    [(two, _)] = gloo_rows.published_rows(_cells([1.0], [0.85], [0.8]), "cmd")
    [(four, _)] = gloo_rows.published_rows(_cells([1.0], [0.85], [0.8], jobs=4), "cmd")
    assert mltcp_figures.mltcp_target(two) == "share>=0.70"
    assert mltcp_figures.mltcp_target(four) == "share>=0.60"
    assert four["jobs"] == 4
    assert mltcp_figures.mltcp_meets(two) and mltcp_figures.mltcp_meets(four)  # 75 % of the ideal gain


def test_regime_rows_are_platform_kernel_ddp() -> None:
    [row] = gloo_rows.regime_rows(_cells([1.0, 1.0], [0.9, 0.95], [0.8, 0.8]), "cmd")
    assert set(regime.KEY) <= set(row)
    assert row["platform"] == "kernel-ddp" and row["mix"] == "ddp-2" and row["rounds"] == 2
    assert row["avg_over_ideal"] == [pytest.approx(0.9 / 0.8), pytest.approx(0.95 / 0.8)]


# ---- the command line -----------------------------------------------------------------------------


def test_a_clear_error_without_root(monkeypatch, capsys) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert gloo.main(["--rounds", "1"]) == 1
    assert "needs root" in capsys.readouterr().err


def test_a_clear_error_without_torch(monkeypatch, capsys) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    real = gloo.importlib.util.find_spec
    monkeypatch.setattr(gloo.importlib.util, "find_spec", lambda name: None if name == "torch" else real(name))
    assert gloo.main([]) == 1
    assert "torch is not installed" in capsys.readouterr().err


def test_a_clear_error_when_mltcp_cannot_be_built(monkeypatch, capsys) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(gloo.importlib.util, "find_spec", lambda name: object())

    def no_btf() -> None:
        raise KernelMltcpError("/sys/kernel/btf/vmlinux is missing")

    monkeypatch.setattr(build, "check_btf", no_btf)
    assert gloo.main([]) == 1
    assert "cannot be built" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv", [["--jobs", "3"], ["--cc", "dctcp"], ["--steps", "1"], ["--f", "2"], ["--f", "7:1:bounded"]]
)
def test_bad_options_are_refused(argv) -> None:
    with pytest.raises(SystemExit):
        gloo.main(argv)


# ---- one short run (root, torch, BTF, clang) ------------------------------------------------------


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.skipif(bool(gloo.missing_piece()), reason=f"[kernel] {gloo.missing_piece()}")
def test_two_ddp_jobs_one_round_runs_and_writes_its_records(tmp_path: Path) -> None:
    """Not a measurement: 1 round, 2 jobs, 4 steps, reno only."""
    out = tmp_path / "ddp"
    assert gloo.main(["--jobs", "2", "--rounds", "1", "--steps", "4", "--solo-steps", "3", "--cc", "reno",
                      "--out", str(out)]) == 0  # fmt: skip
    with (out / "rounds.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["treatment"] for r in rows] == ["reno", "mltcp_reno 16:0.5:step=0.2"]
    for r in rows:
        assert float(r["avg_s"]) > 0.3  # at least the slept compute
        assert int(r["connections"]) >= 2  # at least one gloo connection per job
    runs = out / "q300000-k60000" / "ddp-2"
    for stem in ("reno-r1", "mltcp_reno_16_0.5_step=0.2-r1"):
        assert (runs / f"{stem}.png").exists()
        with (runs / f"{stem}.csv").open() as f:
            recs = list(csv.DictReader(f))
        assert len(recs) == 2 * 2 * 4  # jobs x ranks x steps
        assert {r["worker"] for r in recs} == {"r0@s", "r1@w1", "r1@w2"}
    assert (out / "summary.md").read_text().count("ddp-2") >= 2


def test_publish_writes_the_mltcp_and_regime_rows(monkeypatch, tmp_path: Path) -> None:
    cells = _cells([1.0], [0.9], [0.8])
    for c in cells:
        c.csvs = [tmp_path / f"{c.treatment.split()[0]}.csv"]
        c.csvs[0].write_text("scenario\n")
    real_publish = summaries.publish
    monkeypatch.setattr(summaries, "publish", lambda *a, **k: real_publish(*a, **k, data=tmp_path / "data"))
    gloo._publish(cells, "python -m mlfc.lab.mltcp.gloo --jobs 2")
    mltcp = json.loads((tmp_path / "data" / "mltcp" / "summary.json").read_text())
    [row] = mltcp["rows"]
    assert (row["dataplane"], row["mix"]) == ("real", "ddp-2")
    assert (tmp_path / "data" / "mltcp" / "runs" / "ddp-2" / "real-q300000-k60000" / "reno-r1.csv").exists()
    curve = json.loads((tmp_path / "data" / regime.EXPERIMENT / "summary.json").read_text())
    assert [r["platform"] for r in curve["rows"]] == ["kernel-ddp"]


def test_rounds_csv_ends_with_the_gloo_runs_own_counts(tmp_path: Path) -> None:
    path = tmp_path / "rounds.csv"
    rows.write_round_csv(path, _cells([1.0], [0.9], [0.8]), gloo_rows.ROUND_COUNTS)
    with path.open() as f:
        lines = list(csv.DictReader(f))
    assert list(lines[0])[-5:] == ["connections", "loss_events", "ce_marks", "retransmits", "signals_per_phase"]
    assert [(r["treatment"], r["connections"], r["retransmits"]) for r in lines] == [
        ("reno", "2", "40"),
        ("mltcp_reno 16:0.5:step=0.2", "2", "40"),
    ]
    assert (lines[1]["loss_events"], lines[1]["ce_marks"], lines[1]["baseline_avg_s"]) == ("10", "0", "1.0000")
