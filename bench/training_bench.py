"""Real training over the mlfc transport on loopback: accuracy, iteration times and lost chunks.

    python bench/training_bench.py [--rounds 3] [--iterations 110] [--task digits] [--out results/training]

Treatments (a 2-worker PS job, each a fresh set of processes): every chunk delivered (no loss), and
injected loss on both workers' pushes (the first transmission of each gradient chunk dropped with
probability p, as a congested switch would; protected chunks are retransmitted, the rest are zero-filled
within the loss bound). Writes results.csv (one row per round), summary.md (mean and range over rounds)
and accuracy.png (validation accuracy vs iteration, one line per round). Nothing is asserted.
Hold the shared lock for figures you report: ``flock /tmp/mlfc-measure.lock python bench/training_bench.py``.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

from mlfc.hosts.training.launch import TrainingJob, run_local

LOSSY_WORKER = Path(__file__).resolve().parents[1] / "tests" / "training" / "lossy_worker.py"
TREATMENTS = {  # name: (drop probability of a first transmission, loss bound, receiver deadline s)
    "no loss": (0.0, 0.0, 0.02),
    "5 % dropped, bound 5 %": (0.05, 0.05, 0.02),
    "10 % dropped, bound 10 %": (0.10, 0.10, 0.02),
    "5 % dropped, bound 0 (all retransmitted)": (0.05, 0.0, 0.02),
    "5 % dropped, bound 5 %, deadline 5 ms": (0.05, 0.05, 0.005),
}
DEFAULT = tuple(TREATMENTS)[:3]


def _wrap(drop: float, seed: int):
    def wrap(rank: int, argv: list[str]) -> list[str]:
        if drop <= 0:
            return argv
        seed_args = ["--drop-seed", str(seed * 10 + rank)]
        return [sys.executable, str(LOSSY_WORKER), "--drop-rate", str(drop), *seed_args, "--", *argv[3:]]

    return wrap


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def one_round(task: str, iterations: int, drop: float, bound: float, deadline: float, seed: int) -> dict:
    job = TrainingJob(job=1, workers=2, iterations=iterations, task=task, loss_bound=bound, deadline=deadline,
                      timeout=60)  # fmt: skip
    run = run_local(job, timeout=900, worker_wrap=_wrap(drop, seed))
    if not run.ok:
        raise RuntimeError(f"run failed: {run.returncodes}: {run.stderr}")
    w0 = [r for r in run.records if r["worker"] == 0]
    ps = next(s for s in run.summaries if s.get("ps"))
    steady = w0[5:]  # the first iterations include connection set-up and warm-up
    first_90 = next((r["iteration"] for r in w0 if r.get("accuracy", 0) >= 0.9), None)
    return {
        "final_accuracy": run.final_accuracy(),
        "best_accuracy": max(r["accuracy"] for r in w0 if "accuracy" in r),
        "first_iteration_90": first_90,
        "iteration_ms": 1000 * _median([r["end"] - r["start"] for r in steady]),
        "compute_ms": 1000 * _median([r["compute_real_s"] for r in steady]),
        "comm_ms": 1000 * _median([r["comm_s"] for r in steady]),
        "eval_ms": 1000 * _median([r["eval_s"] for r in w0 if "eval_s" in r]),
        "lost_chunks": ps["lost_chunks"],
        "chunks": ps["chunks"],
        "retransmits": sum(r["retransmits"] for r in run.records),
        "wall_s": w0[-1]["end"] - w0[0]["start"],
        "curve": [(r["iteration"], r["accuracy"]) for r in w0 if "accuracy" in r],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=110)
    ap.add_argument("--task", default="digits")
    ap.add_argument("--out", type=Path, default=Path("results/training"))
    listing = "; ".join(f"{i} {n}" for i, n in enumerate(TREATMENTS)).replace("%", "%%")  # argparse formats help
    ap.add_argument("--treatments", default=",".join(str(i) for i in range(len(DEFAULT))),
                    help=f"comma-separated indices into: {listing}")  # fmt: skip
    args = ap.parse_args(argv)
    names = [tuple(TREATMENTS)[int(i)] for i in args.treatments.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    total = args.rounds * len(names)
    for name in names:
        drop, bound, deadline = TREATMENTS[name]
        for rnd in range(args.rounds):
            print(f"[{len(rows) + 1}/{total}] {name}, round {rnd + 1}", file=sys.stderr, flush=True)
            res = one_round(args.task, args.iterations, drop, bound, deadline, seed=rnd + 1)
            rows.append({"treatment": name, "round": rnd + 1, **res})
            print(f"    final accuracy {res['final_accuracy']:.3f}, lost {res['lost_chunks']}/{res['chunks']} chunks, "
                  f"iteration {res['iteration_ms']:.1f} ms", file=sys.stderr, flush=True)  # fmt: skip
    cols = ["treatment", "round", "final_accuracy", "best_accuracy", "first_iteration_90", "iteration_ms",
            "compute_ms", "comm_ms", "eval_ms", "lost_chunks", "chunks", "retransmits", "wall_s"]  # fmt: skip
    with (args.out / "results.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    lines = [f"{args.task}, 2 workers, {args.iterations} iterations, {args.rounds} rounds: mean [min, max]", "",
             "| treatment | final accuracy | first iteration >= 0.90 | iteration ms (median) | compute ms | comm ms | "
             "lost chunks / pushed |", "|---|---|---|---|---|---|---|"]  # fmt: skip

    def cell(values: list[float], fmt: str) -> str:
        vals = [v for v in values if v is not None]
        if not vals:
            return "never"
        return f"{format(statistics.mean(vals), fmt)} [{format(min(vals), fmt)}, {format(max(vals), fmt)}]"

    for name in names:
        rs = [r for r in rows if r["treatment"] == name]
        lost = cell([r["lost_chunks"] for r in rs], ".0f")
        lines.append(
            f"| {name} | {cell([r['final_accuracy'] for r in rs], '.3f')} | "
            f"{cell([r['first_iteration_90'] for r in rs], '.0f')} | {cell([r['iteration_ms'] for r in rs], '.1f')} | "
            f"{cell([r['compute_ms'] for r in rs], '.1f')} | {cell([r['comm_ms'] for r in rs], '.1f')} | "
            f"{lost} / {rs[0]['chunks']} |"
        )
    (args.out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    _plot(rows, args.out / "accuracy.png", args.task)
    return 0


def _plot(rows: list[dict], path: Path, task: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    palette = ("tab:blue", "tab:orange", "tab:red", "tab:green", "tab:purple")
    colours = dict(zip(TREATMENTS, palette, strict=True))
    for r in rows:
        its, accs = zip(*r["curve"], strict=True)
        ax.plot(its, accs, color=colours[r["treatment"]], alpha=0.7,
                label=r["treatment"] if r["round"] == 1 else None)  # fmt: skip
    ax.set_xlabel("iteration")
    ax.set_ylabel("validation accuracy (worker 0)")
    ax.set_title(f"{task}: 2-worker PS job over the mlfc transport, injected push loss")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
