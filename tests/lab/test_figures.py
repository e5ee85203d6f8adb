"""lab/summaries.py and lab/figures.py: rows merge into docs/data/<experiment>/summary.json by key, CSVs are
copied beside it, nothing is half-written, and the docs' figures blocks are regenerated from the data (``--check``
fails on a stale block)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlfc.lab import figures, summaries
from mlfc.lab.approx import figures as approx_figures
from mlfc.lab.chaos import figures as chaos_figures
from mlfc.lab.hpsearch import figures as hpsearch_figures
from mlfc.lab.mltcp import figures as mltcp_figures


def _row(mix: str = "two-compatible", f: str = "2:0.5", shares=(0.9, 0.95), **kw) -> dict:
    row = {
        "mix": mix,
        "cc": "reno",
        "dataplane": "ref",
        "treatment": "mltcp-reno",
        "jobs": 2,
        "rounds": len(shares),
        "share_of_ideal": list(shares),
        "avg_speedup": 1.5,
        "p99_speedup": 1.6,
        "ideal_avg": 1.55,
        "ideal_p99": 1.7,
        "interleaved_from": [3] * len(shares),
        "f": f,
        "command": "python -m mlfc.lab.e2e ...",
        "ack_delay": None,
    }
    row.update(kw)
    return row


KEY = ("mix", "cc", "dataplane", "treatment", "f", "ack_delay")


def test_publish_merges_by_key_and_copies_the_runs(tmp_path: Path) -> None:
    csv = tmp_path / "run.csv"
    csv.write_text("job,iteration\n1,0\n")
    path = summaries.publish("mltcp", [_row(), _row(f="7:1:bounded")], key=KEY, runs=[(csv, "a/b-r1.csv")],
                           data=tmp_path)  # fmt: skip
    assert path == tmp_path / "mltcp" / "summary.json"
    assert (tmp_path / "mltcp" / "runs" / "a" / "b-r1.csv").read_text() == csv.read_text()
    summaries.publish("mltcp", [_row(shares=(0.5,))], key=KEY, data=tmp_path)  # the same key: replaced
    rows = json.loads(path.read_text())["rows"]
    assert len(rows) == 2
    assert {r["f"]: r["share_of_ideal"] for r in rows} == {"2:0.5": [0.5], "7:1:bounded": [0.9, 0.95]}


def test_publish_refuses_bad_input_and_keeps_the_old_summary(tmp_path: Path) -> None:
    summaries.publish("mltcp", [_row()], key=KEY, data=tmp_path)
    before = (tmp_path / "mltcp" / "summary.json").read_text()
    with pytest.raises(summaries.FiguresError, match="key field"):
        summaries.publish("mltcp", [{"mix": "x"}], key=KEY, data=tmp_path)
    with pytest.raises(summaries.FiguresError, match="leaves"):
        summaries.publish("mltcp", [_row()], key=KEY, runs=[(tmp_path / "x", "../../escape.csv")], data=tmp_path)
    with pytest.raises(summaries.FiguresError, match="experiment name"):
        summaries.publish("../up", [_row()], key=KEY, data=tmp_path)
    assert (tmp_path / "mltcp" / "summary.json").read_text() == before
    (tmp_path / "mltcp" / "summary.json").write_text("{not json")
    with pytest.raises(summaries.FiguresError, match="not JSON"):
        summaries.load("mltcp", tmp_path)


def test_targets_follow_issue_24() -> None:
    assert mltcp_figures.mltcp_meets(_row(shares=(0.91, 0.95)))
    assert not mltcp_figures.mltcp_meets(_row(shares=(0.89, 0.99)))  # two-compatible: every round
    assert not mltcp_figures.mltcp_meets(_row(shares=(0.95,), p99_speedup=1.4))  # p99 below the average speed-up
    four = _row(mix="four-compatible", shares=(0.9,), avg_speedup=2.05, p99_speedup=2.1)
    assert mltcp_figures.mltcp_meets(four)
    assert not mltcp_figures.mltcp_meets({**four, "p99_speedup": 1.9})
    assert mltcp_figures.mltcp_target(_row(cc="dcqcn")) == "share>=0.70"
    assert mltcp_figures.mltcp_target(_row(mix="compat-4", dataplane="kernel")) == "share>=0.70"
    assert mltcp_figures.mltcp_target(_row(mix="compat-2", dataplane="kernel")) == "share>=0.80"
    assert mltcp_figures.mltcp_target(_row(mix="three-heavy")) == "share>=0.75"


def test_blocks_are_regenerated_from_the_data_and_check_fails_when_stale(tmp_path: Path, capsys) -> None:
    summaries.publish("mltcp", [_row(shares=(0.8, 0.9))], key=KEY, data=tmp_path)
    doc = tmp_path / "results.md"
    doc.write_text("intro\n<!-- figures:mltcp -->\nold table\n<!-- /figures:mltcp -->\nafter\n")
    assert figures.main(["--check", "--data", str(tmp_path), str(doc)]) == 1
    assert "make figures" in capsys.readouterr().err
    assert figures.main(["--data", str(tmp_path), "--img", str(tmp_path), str(doc)]) == 0
    assert (tmp_path / "figures-mltcp.png").stat().st_size > 0
    text = doc.read_text()
    assert text.startswith("intro\n<!-- figures:mltcp -->\n| mix |") and text.endswith(
        "<!-- /figures:mltcp -->\nafter\n"
    )
    assert "85 % (80..90)" in text and "**no**" in text
    assert figures.main(["--check", "--data", str(tmp_path), str(doc)]) == 0
    doc.write_text("<!-- figures:nosuch -->\n<!-- /figures:nosuch -->\n")
    assert figures.main(["--data", str(tmp_path), "--img", str(tmp_path), str(doc)]) == 2
    assert "no table for experiment 'nosuch'" in capsys.readouterr().err


def test_bench_rows_render_with_their_anchor_and_target(tmp_path: Path) -> None:
    row = {"name": "mlfc.p4 pps", "value": 4209.0, "unit": "pkt/s", "anchor": "l3fwd.p4", "anchor_value": 6912.0,
           "ratio": 0.609, "target": "ratio >= 0.85", "command": "python bench/dataplane_bench.py"}  # fmt: skip
    summaries.publish("bench", [row], key=("name",), data=tmp_path)
    table = figures.render("bench", tmp_path)
    assert "| mlfc.p4 pps | 4,209 pkt/s | l3fwd.p4 | 6,912 pkt/s | 0.61 | ratio >= 0.85 | - |" in table


def test_dataplane_designs_render_with_their_work_per_packet_and_each_round(tmp_path: Path) -> None:
    ops = {"mlfc": {"tables applied": 4, "table hits": 2, "conditions": 7, "primitives": 11},
           "l3fwd": {"tables applied": 2, "table hits": 1, "conditions": 3, "primitives": 5}}  # fmt: skip
    rounds = [{"round": 1, "mlfc_pps": 8558.0, "l3fwd_pps": 11202.0, "ratio": 0.764},
              {"round": 2, "mlfc_pps": 9900.0, "l3fwd_pps": 11000.0, "ratio": 0.9}]  # fmt: skip
    row = {"design": "2 empty queue", "rounds": rounds, "ratio_min": 0.764, "ratio_max": 0.9, "target": 0.85,
           "ops": ops, "trials_per_round": 5, "seconds": 5.0, "size": 200}  # fmt: skip
    summaries.publish("dataplane", [row], key=("design",), data=tmp_path, meta={"command": "python bench/x.py"})
    table = figures.render("dataplane", tmp_path)
    assert ("| 2 empty queue | 4 (2), 2 hits | 7 (3) | 11 (5) | 8,558, 9,900 | 11,202, 11,000 | 0.76, 0.90 "
            "| >= 0.85: missed |") in table  # fmt: skip
    assert "5 alternating trials of 5 s" in table and "`python bench/x.py`" in table


def test_transport_designs_render_in_command_line_order_judged_on_medians(tmp_path: Path) -> None:
    def row(design: str, position: int, cc: str, gbps, of_tcp) -> dict:
        return {"design": design, "position": position, "commit": f"{position}" * 40, "cc": cc, "gbps": gbps,
                "of_tcp": of_tcp, "tx_cpu_s_per_gbit": 0.1, "rx_cpu_s_per_gbit": 0.12, "target_gbps": 3.0,
                "target_of_tcp": 0.35}  # fmt: skip

    rows = [row("zeta", 0, "cubic", [5.0, 5.5, 6.0], [0.30, 0.34, 0.36]),  # median ratio 0.34: missed
            row("alpha", 1, "cubic", [7.0, 2.0, 8.0], [0.50, 0.20, 0.55]),  # medians 7.0 Gb/s, 0.50: met
            row("alpha", 1, "reno", [7.0, 7.5, 8.0], [0.45, 0.46, 0.47])]  # fmt: skip
    summaries.publish("transport-designs", rows, key=("design", "cc"), data=tmp_path,
                    meta={"trials": 3, "tensors": 16, "bytes": 25e6, "command": "python bench/x.py"})  # fmt: skip
    lines = [ln for ln in figures.render("transport-designs", tmp_path).splitlines() if ln.startswith("| ")][1:]
    assert [ln.split(" | ")[:2] for ln in lines] == [["| reno", "alpha (1111111)"], ["| cubic", "zeta (0000000)"],
                                                     ["| cubic", "alpha (1111111)"]]  # fmt: skip
    assert (
        lines[1].endswith("0.34 of TCP: missed |".replace("0.34 of TCP", "0.35 of TCP"))
        and "0.30, 0.34, 0.36" in lines[1]
    )
    assert lines[2].endswith("met |") and "7.00 (2.00..8.00)" in lines[2]


def test_the_committed_docs_are_what_the_committed_data_says() -> None:
    assert figures.main(["--check"]) == 0


def _hps(treatment: str, less=(0.5, 0.46, 0.44), slow=(1.1, 1.2, 1.25), **kw) -> dict:
    row = {"task": "digits", "dataplane": "ref", "configurations": 12, "framework": "mlfc-ps",
           "treatment": treatment, "rounds": len(less), "time_to_090": [10.0, 12.0, 11.0],
           "time_to_095": [20.0, 22.0, 21.0], "less_than_fifo_095": list(less), "top_job_slowdown": list(slow),
           "command": "python -m mlfc.lab.hpsearch --publish"}  # fmt: skip
    row.update(kw)
    return row


def test_hpsearch_rows_render_against_issue_26s_targets(tmp_path: Path) -> None:
    assert hpsearch_figures.hpsearch_meets(_hps("maif-search", less=(0.5, 0.46, 0.45)))  # every round >= 45 %, <= 1.3x
    assert not hpsearch_figures.hpsearch_meets(_hps("maif-search"))  # a mean of 46.7 %, but one round at 44 %
    assert hpsearch_figures.hpsearch_meets(_hps("maif-sum", less=(0.40, 0.38, 0.39)))  # sum objective: >= 38 %
    assert not hpsearch_figures.hpsearch_meets(_hps("maif-sum", less=(0.40, 0.38, 0.37)))
    assert not hpsearch_figures.hpsearch_meets(_hps("maif-sum", slow=(1.1, 1.31, 1.0)))  # one round above 1.3x
    assert not hpsearch_figures.hpsearch_meets(_hps("maif-sum", less=(0.9, None, 0.9)))  # a round missed the target
    assert not hpsearch_figures.hpsearch_meets(_hps("maif-search", configurations=6))  # short of the method
    assert not hpsearch_figures.hpsearch_meets(_hps("maif-search", less=(0.9, 0.9), slow=(1.0, 1.0), rounds=2))
    assert hpsearch_figures.hpsearch_meets(_hps("fifo", less=(None,) * 3)) is None
    rows = [_hps("maif-search", less=(0.5, 0.46, 0.45)), _hps("fifo", less=(None,) * 3, slow=(2.0, 2.1, 2.2)),
            _hps("maif-sum", less=(0.1, 0.2, 0.3))]  # fmt: skip
    summaries.publish("hpsearch", rows, key=("task", "dataplane", "framework", "treatment"), data=tmp_path)
    table = figures.render("hpsearch", tmp_path).splitlines()
    assert [line.split(" | ")[4] for line in table[2:5]] == ["fifo", "maif-sum", "maif-search"]
    assert table[2].endswith("| 2.10x (2.00..2.20) | - | - |")
    assert "| 20 % (10..30) | 1.18x (1.10..1.25) | ≥ 38 % less than FIFO, top job ≤ 1.3x | **no** |" in table[3]
    assert table[4].endswith("| ≥ 45 % less than FIFO, top job ≤ 1.3x | yes |")
    assert "`python -m mlfc.lab.hpsearch --publish`" in table[-1]


def _apx(treatment: str, tta=(60.0, 62.0, 58.0, 61.0, 59.0, 60.0), acc=(0.95,) * 6, jobs: int = 3, **kw) -> dict:
    row = {"model": "digits-cnn", "dataplane": "ref", "jobs": jobs, "congested": jobs > 1, "treatment": treatment,
           "rounds": 3, "seeds": [0, 1], "time_to_095": list(tta), "final_acc": list(acc), "bytes_sent_share": 0.7,
           "less_than_full_095": [0.4] * len(tta), "command": "python -m mlfc.lab.approx --publish"}  # fmt: skip
    row.update(kw)
    return row


def test_approx_rows_render_against_issue_25s_targets(tmp_path: Path) -> None:
    full = _apx("full", tta=(100.0,) * 6)
    assert approx_figures.approx_meets(_apx("mlfc"), full)  # 60 s against 100 s: 40 % less, same accuracy
    assert not approx_figures.approx_meets(_apx("mlfc", tta=(61.0,) * 6), full)  # 39 % less
    assert not approx_figures.approx_meets(_apx("mlfc", acc=(0.944,) * 6), full)  # 0.6 pp below full
    assert not approx_figures.approx_meets(_apx("mlfc", tta=(50.0, None, 50.0, 50.0, 50.0, 50.0)), full)  # a run missed
    assert not approx_figures.approx_meets(_apx("mlfc", rounds=2), full)  # short of the method
    assert not approx_figures.approx_meets(_apx("mlfc", seeds=[0]), full)
    assert not approx_figures.approx_meets(_apx("mlfc"), None)  # nothing to compare with
    assert approx_figures.approx_meets(_apx("topk-ef"), full) is None
    assert approx_figures.approx_meets(_apx("mlfc-share"), full), "the third design is the scheme too"
    assert not approx_figures.approx_meets(_apx("mlfc-share", tta=(61.0,) * 6), full)
    alone_full = _apx("full", jobs=1, tta=(30.0,) * 6)
    assert approx_figures.approx_meets(_apx("mlfc", jobs=1, tta=(30.5,) * 6), alone_full)  # 1.7 % more: within 2 %
    assert not approx_figures.approx_meets(_apx("mlfc", jobs=1, tta=(30.7,) * 6), alone_full)
    rows = [_apx("mlfc", tta=(70.0,) * 6, acc=(0.948,) * 6), full, _apx("fp16", tta=(80.0,) * 6), alone_full,
            _apx("mlfc", jobs=1, tta=(30.0,) * 6, bottleneck_pps=600, queue_packets=64, marking="RED 4-32 packets",
                 signals_per_phase=[0.5, 1.5])]  # fmt: skip
    summaries.publish("approx", rows, key=("model", "dataplane", "jobs", "treatment"), data=tmp_path)
    table = figures.render("approx", tmp_path).splitlines()
    assert [line.split(" | ")[2:4] for line in table[2:7]] == [
        ["3", "full"], ["3", "fp16"], ["3", "mlfc"], ["1", "full"], ["1", "mlfc"]]  # fmt: skip
    assert "| 0.20 pp | 70 % | - | ≥ 40 % less time than full, ≤ 0.5 pp below | **no** |" in table[4]
    assert table[6].endswith("| 1.00 (0.50..1.50) | ≤ 2 % more time than full, ≤ 0.5 pp below | yes |")
    regime = next(line for line in table if line.startswith("Regime: "))
    assert "600 packets/s bottleneck, 64-packet queue, marking RED 4-32 packets (digits-cnn/ref)" in regime
    assert "? packets/s bottleneck, queue and marking not recorded" in regime  # rows from before
    assert "`python -m mlfc.lab.approx --publish`" in table[-1]


def _chaos(seed: int, **kw) -> dict:
    row = {"dataplane": "ref", "seed": seed, "faults": 13, "kinds": {"kill": 6, "stop": 6, "down": 1},
           "reports_acked": 300, "reports_found": 300,
           "decisions_acked": 12, "decisions_applied": 12, "max_restore_s": 0.4, "final_acc": 0.951,
           "undisturbed_acc": 0.953, "command": f"python -m mlfc.lab.chaos --seed {seed} --publish"}  # fmt: skip
    row.update(kw)
    return row


def test_chaos_rows_render_against_issue_29s_targets(tmp_path: Path) -> None:
    assert chaos_figures.chaos_meets(_chaos(1))
    assert not chaos_figures.chaos_meets(_chaos(1, reports_found=299))  # a lost acknowledged report
    assert not chaos_figures.chaos_meets(_chaos(1, decisions_applied=11))
    assert not chaos_figures.chaos_meets(_chaos(1, max_restore_s=1.31))
    assert not chaos_figures.chaos_meets(_chaos(1, max_restore_s=None))  # unmeasured is not met
    assert not chaos_figures.chaos_meets(_chaos(1, final_acc=0.947))  # 0.6 pp below
    assert not chaos_figures.chaos_meets(_chaos(1, faults=6))
    assert not chaos_figures.chaos_meets(_chaos(1, kinds={"kill": 13}))  # no SIGSTOP, no link down
    assert not chaos_figures.chaos_meets({k: v for k, v in _chaos(1).items() if k != "kinds"})  # a row of before
    summaries.publish("chaos", [_chaos(2, max_restore_s=1.31), _chaos(1)], key=("dataplane", "seed", "faults"),
                    data=tmp_path)  # fmt: skip
    table = figures.render("chaos", tmp_path).splitlines()
    assert table[2].startswith(
        "| ref | 1 | 13 | link down 1, kill -9 6, SIGSTOP 6 | 300/300 | 12/12 | 0.400 | 0.9510 | 0.9530 | -0.20 pp "
        "| yes |"
    )
    assert "| 1.310 |" in table[3] and table[3].endswith("| **no** |")
    assert "`python -m mlfc.lab.chaos --seed 2 --publish`" in table[-1]


def test_the_coordinated_table_says_when_the_fallback_engaged(tmp_path: Path) -> None:
    rows = [
        _row(mix="circular", treatment="maif", f="-"),
        _row(mix="circular", treatment="mltcp+fallback", fallback_engaged_s=[4.2, None]),
    ]
    summaries.publish("coordinated", rows, key=KEY, data=tmp_path)
    table = figures.render("coordinated", tmp_path)
    assert "| circular | ref | mltcp+fallback | `2:0.5` | 2 | 92 % (90..95) |" in table
    assert table.splitlines()[2].endswith("| 3/3 | - |")  # maif: no fallback, no column value
    assert "| 3/3 | 4.2/never |" in table


def test_e2e_publishes_mltcp_alone_and_the_coordinators_treatments_apart() -> None:
    from mlfc.lab.e2e.cli import PUBLISHED
    from mlfc.lab.scenarios import TREATMENTS

    def where(name: str) -> list[str]:
        return [experiment for experiment, which in PUBLISHED.items() if which(TREATMENTS[name])]

    assert where("mltcp-reno") == ["mltcp"] and where("mltcp-dcqcn") == ["mltcp"]
    assert where("maif") == ["coordinated"] and where("mltcp+fallback") == ["coordinated"]
    assert where("baseline") == [] and where("cubic") == []
    assert set(PUBLISHED) <= set(figures.SCHEMAS) and set(PUBLISHED) <= set(figures.RENDERERS)
