"""Several versions of the transport in one run: one flow each, trial by trial in rotating order, beside
iperf3 TCP on the same veth pair, so designs are compared under the same machine state (this 2-core
virtual machine's own rate moves by a third between runs). Needs root.

    python bench/transport_designs.py --design vectorised=6aa7e79 --design acks=3671f8c --design compiled=HEAD \\
        --trials 5 --publish    # docs/data/transport-designs (summary.json + every trial); make figures

Each design is a commit checked out as a git worktree (in a temporary directory, removed at the end) and
run through PYTHONPATH with pyproject's folder mapping (mlfc.hosts = hosts/, ...), from outside the
source tree; `mlfc-transport build` compiles the C loops where the commit has them. Prints per design
and controller the median goodput, its range, CPU per Gb at both ends and the median ratio to iperf3
TCP measured in the same trial; the CSV has every trial. ``--publish`` writes one row per design and
controller (every trial's goodput and ratio) to docs/data/transport-designs, which docs/results.md's
table is generated from.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

from transport_bench import RX_IP, TARGET_GBPS, TARGET_OF_TCP, TX_IP, iperf_trial, mlfc_trial

from mlfc.lab import summaries
from mlfc.lab.bench_figures import TRANSPORT_DESIGNS_SCHEMA
from mlfc.testing.netns import NetnsLab

ROOT = Path(__file__).resolve().parent.parent


def stage(rev: str, where: Path) -> tuple[str, Path]:
    """A worktree of ``rev`` and an import root whose ``mlfc`` maps the folders as pyproject says: returns
    (the full commit, the import root)."""
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", rev], capture_output=True, text=True,
                            check=True).stdout.strip()  # fmt: skip
    tree = where / f"tree-{commit[:10]}"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(tree), commit], check=True)
    mapping = tomllib.loads((tree / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    top = where / f"import-{commit[:10]}" / "mlfc"
    top.mkdir(parents=True)
    for entry in (tree / mapping["mlfc"]).iterdir():
        (top / entry.name).symlink_to(entry)
    for package, folder in mapping.items():
        parts = package.split(".")
        if len(parts) == 2:  # mlfc.<x> = <folder>; deeper packages live inside their parent's folder
            (top / parts[1]).symlink_to(tree / folder)
    return commit, top.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--design", action="append", required=True, metavar="NAME=REV", help="repeatable, 2 or more")
    ap.add_argument(
        "--cc",
        action="append",
        choices=["reno", "cubic", "dcqcn", "dctcp"],
        help="repeatable; default reno, cubic, dcqcn",
    )
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--bytes", type=int, default=25_000_000)
    ap.add_argument("--tensors", type=int, default=16)
    ap.add_argument("--iperf-seconds", type=float, default=3.0)
    ap.add_argument("--csv", type=Path, help="write every trial here")
    ap.add_argument("--publish", action="store_true", help="rows and trials into docs/data/transport-designs")
    args = ap.parse_args()
    designs = [d.split("=", 1) for d in args.design]
    if len(designs) < 2 or any(len(d) != 2 or not d[0] or not d[1] for d in designs):
        ap.error("--design NAME=REV, at least two")
    if os.geteuid() != 0:
        print("transport_designs: needs root (network namespaces)", file=sys.stderr)
        return 1
    ccs = args.cc or ["reno", "cubic", "dcqcn"]
    rows: list[dict] = []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="mlfc-designs-") as tmp:
        staged = {}
        try:
            for name, rev in designs:
                commit, root = stage(rev, Path(tmp))
                env = dict(os.environ, PYTHONPATH=str(root))
                built = subprocess.run([sys.executable, "-m", "mlfc.hosts.transport_cli", "build"], env=env,
                                       cwd="/", capture_output=True, text=True)  # fmt: skip
                staged[name] = (commit, env)
                print(f"{name}: {commit[:10]}, compiled loops: {'built' if built.returncode == 0 else 'none'}")
            print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
            with NetnsLab("designs") as lab:
                a, b = lab.namespace("a"), lab.namespace("b")
                lab.link(a, TX_IP, b, RX_IP)
                for trial in range(args.trials):
                    tcp = iperf_trial(lab, a, b, False, args.iperf_seconds)["gbps"]
                    print(f"trial {trial + 1}/{args.trials}: iperf3 TCP {tcp:.2f} Gb/s", flush=True)
                    shift = trial % len(designs)  # each design takes each place in turn
                    order = [(cc, designs[(i + shift) % len(designs)][0]) for cc in ccs for i in range(len(designs))]
                    for cc, name in order:
                        commit, env = staged[name]
                        r = mlfc_trial(lab, a, b, cc, 1400, args.bytes, args.tensors, True, env=env)
                        rows.append({"trial": trial + 1, "cc": cc, "design": name, "commit": commit[:10],
                                     "gbps": round(r["gbps"], 4), "tx_cpu_s_per_gbit": round(r["tx_cpu"], 4),
                                     "rx_cpu_s_per_gbit": round(r["rx_cpu"], 4), "iperf3_tcp_gbps": round(tcp, 4),
                                     "of_tcp": round(r["gbps"] / tcp, 4)})  # fmt: skip
                        print(f"  {cc} {name}: {r['gbps']:.2f} Gb/s ({r['gbps'] / tcp:.2f} of TCP)", flush=True)
        finally:
            for name, _ in designs:
                if name in staged:
                    tree = Path(tmp) / f"tree-{staged[name][0][:10]}"
                    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    print("| controller | design | goodput Gb/s (median) | range | of iperf3 TCP (median) | CPU s/Gb tx / rx |")
    print("|---|---|---|---|---|---|")
    for cc in ccs:
        for name, _ in designs:
            mine = [r for r in rows if r["cc"] == cc and r["design"] == name]
            g = [r["gbps"] for r in mine]
            print(f"| {cc} | {name} | {statistics.median(g):.2f} | {min(g):.2f}-{max(g):.2f} | "
                  f"{statistics.median(r['of_tcp'] for r in mine):.2f} | "
                  f"{statistics.median(r['tx_cpu_s_per_gbit'] for r in mine):.3f} / "
                  f"{statistics.median(r['rx_cpu_s_per_gbit'] for r in mine):.3f} |")  # fmt: skip
    csv_path = args.csv or (Path(tempfile.gettempdir()) / f"transport-designs-{os.getpid()}.csv")
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    with csv_path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"\n{len(rows)} trials in {csv_path}")
    if args.publish:
        day = time.strftime("%Y-%m-%d")
        published = [
            {"design": name, "position": position, "commit": staged[name][0], "cc": cc,
             "gbps": [r["gbps"] for r in rows if (r["cc"], r["design"]) == (cc, name)],
             "of_tcp": [r["of_tcp"] for r in rows if (r["cc"], r["design"]) == (cc, name)],
             "tx_cpu_s_per_gbit": statistics.median(r["tx_cpu_s_per_gbit"] for r in rows
                                                    if (r["cc"], r["design"]) == (cc, name)),
             "rx_cpu_s_per_gbit": statistics.median(r["rx_cpu_s_per_gbit"] for r in rows
                                                    if (r["cc"], r["design"]) == (cc, name)),
             "target_gbps": TARGET_GBPS, "target_of_tcp": TARGET_OF_TCP}
            for position, (name, _) in enumerate(designs) for cc in ccs
        ]  # fmt: skip
        meta = {"schema": TRANSPORT_DESIGNS_SCHEMA, "date": day, "trials": args.trials,
                "bytes": args.bytes, "tensors": args.tensors, "load_before": [round(x, 2) for x in load_before],
                "load_after": [round(x, 2) for x in os.getloadavg()],
                "command": "python bench/transport_designs.py " + " ".join(sys.argv[1:])}  # fmt: skip
        path = summaries.publish("transport-designs", published, key=("design", "cc"),
                               runs=[(csv_path, f"trials-{day}.csv")], meta=meta)  # fmt: skip
        print(f"published {len(published)} rows to {path}; `make figures` regenerates docs/results.md's table")
    return 0


if __name__ == "__main__":
    sys.exit(main())
