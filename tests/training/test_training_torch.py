"""Real training over the transport on loopback (needs torch: skips with the reason where it is missing)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from mlfc.hosts.agent_cli import parse_line
from mlfc.hosts.training.launch import TrainingJob, run_local
from mlfc.hosts.transport import bind_shim_socket

# find_spec, not import: the jobs run in child processes, and importing torch here costs seconds
for _module, _why in (("torch", "torch==2.13.0"), ("sklearn", "scikit-learn")):
    if importlib.util.find_spec(_module) is None:
        pytest.skip(f"{_why} not installed: `make install` brings the train extra", allow_module_level=True)

HERE = Path(__file__).resolve().parent
EMULATOR_KEYS = {"iteration", "compute_s", "comm_s", "bytes", "worker", "job", "start", "comm_start", "push_end",
                 "comm_end", "end", "retransmits", "zero_filled"}  # fmt: skip
ITERATIONS = 110


def _lossy(rank: int, argv: list[str]) -> list[str]:
    """Worker 1's pushes lose 5 % of first transmissions (worker 0 runs the plain CLI)."""
    if rank != 1:
        return argv
    return [sys.executable, str(HERE / "lossy_worker.py"), "--drop-rate", "0.05", "--", *argv[3:]]


@pytest.mark.slow
def test_two_workers_train_digits_over_loopback_with_loss_counted():
    job = TrainingJob(job=3, workers=2, iterations=ITERATIONS, task="digits", loss_bound=0.05, timeout=60)
    run = run_local(job, timeout=300, worker_wrap=_lossy)
    assert run.ok, f"exit codes {run.returncodes}; stderr: {run.stderr}"
    by_worker = {r: [rec for rec in run.records if rec["worker"] == r] for r in (0, 1)}
    for r, recs in by_worker.items():
        assert [rec["iteration"] for rec in recs] == list(range(ITERATIONS)), f"worker {r}"
        assert set(recs[0]) >= EMULATOR_KEYS, EMULATOR_KEYS - set(recs[0])
    acc = run.final_accuracy()
    print(f"final validation accuracy {acc:.3f} after {ITERATIONS} iterations, {run.seconds:.0f} s")
    assert acc is not None and acc >= 0.90
    lost = {r: sum(rec["lost_chunks"] for rec in recs) for r, recs in by_worker.items()}
    ps_summary = next(s for s in run.summaries if s.get("ps"))
    print(f"lost chunks: worker 0 {lost[0]}, worker 1 {lost[1]} of {ps_summary['chunks']} pushed")
    assert lost[0] == 0 and lost[1] > 0, lost
    assert ps_summary["lost_chunks"] == lost[1]
    # each iteration's job-wide count agrees between the PS's line and the workers' records
    ps_by_it = {rec["iteration"]: rec["lost_chunks"] for rec in run.ps_records}
    assert all(rec["job_lost_chunks"] == ps_by_it[rec["iteration"]] for rec in run.records)
    per_tensor = sum(sum(rec["lost_by_tensor"].values()) for rec in by_worker[1])
    assert per_tensor == lost[1]
    # what mlfc-agent makes of a worker line: an iteration report with the real accuracy and timings, and what
    # its metrics export (bytes on the wire, withheld chunks, the transport's MLTCP state at the push's end)
    line = next(rec for rec in by_worker[0] if "accuracy" in rec)
    rep = parse_line(json.dumps(line), "accuracy")
    assert rep == {"iteration": line["iteration"], "metric": line["accuracy"], "compute": line["compute_s"],
                   "comm": line["comm_s"], "bytes": line["bytes"], "worker": 0, "sent_bytes": line["sent_bytes"],
                   "chunks": line["chunks"], "withheld_chunks": line["withheld_chunks"],
                   "bytes_ratio": line["bytes_ratio"], "mltcp_f": line["mltcp_f"]}  # fmt: skip
    # nothing withheld (no --withhold): the push's flow got through all its declared bytes
    assert line["withheld_chunks"] == 0 and line["sent_bytes"] == line["bytes"] and line["bytes_ratio"] == 1.0


@pytest.mark.slow
def test_ddp_hook_gives_the_parameters_of_gloo_allreduce(tmp_path: Path):
    gloo = bind_shim_socket("127.0.0.1")  # any free port (TCP below; the shim range is just a free range)
    gloo_port = gloo.getsockname()[1]
    ps = bind_shim_socket("127.0.0.1")
    ps_port = ps.getsockname()[1]
    gloo.close()
    ps.close()
    out = tmp_path / "ddp.json"
    cmd = [sys.executable, str(HERE / "ddp_equivalence.py"), "--gloo-port", str(gloo_port), "--ps-port",
           str(ps_port), "--out", str(out)]  # fmt: skip
    procs = [subprocess.Popen([*cmd, "--rank", str(r)], stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    errs = [p.communicate(timeout=240)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    res = json.loads(out.read_text())
    print(res)
    assert res["moved"] > 1e-3, "training did not move the parameters: the comparison would be vacuous"
    assert res["max_diff"] <= 1e-5, res
    assert res["lost_chunks"] == 0 and res["chunks"] > 0
