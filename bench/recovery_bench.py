"""How fast the controller restores a switch after an outage, by outage length.

    python bench/recovery_bench.py [--switch ref|bmv2] [--outages 0,1,3,6] [--rounds 3]

For each outage: the controller holds an intent on one switch; the switch is killed (SIGKILL), stays down
for the outage, and is started again on the same ports. The figure is the time from the moment the switch
listens again until the controller reports it in sync with the intent's generation (pipeline loaded,
queues set, every entry written: the read-back is the controller's own). Printed as a table: min, median
and max over the rounds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

from mlfc import contract
from mlfc.launch.daemons import ControllerProcess
from mlfc.launch.process import free_port
from mlfc.launch.switches import SWITCHES
from mlfc.proto import intent_pb2 as pb

INTENT = pb.Intent(
    source="recovery-bench",
    jobs=[pb.JobIntent(job_id=j, priority=1 + j % 5, windows=[pb.IterationWindow(first=0, last=9, priority=6)])
          for j in range(1, 41)],
)  # fmt: skip


def deployment(tmp: Path, sw) -> Path:
    doc = {
        "pipeline": {"p4info": str(contract.P4INFO), "device_config": str(contract.BMV2_JSON)},
        "listen": {"intent": f"127.0.0.1:{free_port()}", "metrics": f"127.0.0.1:{free_port()}"},
        "switches": [
            {
                "name": "s1",
                "grpc_addr": sw.grpc_addr,
                "target": sw.target,
                "thrift_port": sw.queue_port,
                "ports": [{"port": 1, "rate_pps": 1000}, 2],
            }
        ],
    }
    path = tmp / "deployment.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def measure(kind: str, outages: list[float], rounds: int) -> dict[float, list[float]]:
    out: dict[float, list[float]] = {o: [] for o in outages}
    with tempfile.TemporaryDirectory(prefix="mlfc-recovery-") as tmpdir:
        tmp = Path(tmpdir)
        sw = SWITCHES[kind]("s1", 1, log_file=tmp / "switch.log")
        sw.start()
        ctl = ControllerProcess(deployment(tmp, sw), tmp / "controller.log", log_level="WARNING")
        try:
            ctl.start()
            generation = ctl.client.apply(INTENT).generation
            ctl.client.wait_synced(generation, timeout_s=30)
            for rnd in range(rounds):
                for outage in outages:
                    sw.kill()
                    deadline = time.monotonic() + 10
                    while ctl.client.status().switches[0].connected and time.monotonic() < deadline:
                        time.sleep(0.02)
                    time.sleep(outage)
                    sw.start()
                    listening = time.monotonic()
                    ctl.client.wait_synced(generation, timeout_s=60)
                    took = time.monotonic() - listening
                    out[outage].append(took)
                    print(f"  round {rnd + 1}: outage {outage:g} s -> in sync {took * 1000:.0f} ms after listening")
        finally:
            ctl.stop()
            sw.kill()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--switch", choices=sorted(SWITCHES), default="ref")
    ap.add_argument("--outages", default="0,1,3,6", help="seconds down, comma-separated")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    outages = [float(x) for x in args.outages.split(",")]
    print(f"recovery after an outage ({args.switch}, {len(INTENT.jobs)} jobs, {args.rounds} rounds)")
    res = measure(args.switch, outages, args.rounds)
    print("\n| outage s | in sync after listening: min / median / max ms | target |")
    print("|---|---|---|")
    for outage, times in res.items():
        ms = sorted(t * 1000 for t in times)
        print(f"| {outage:g} | {ms[0]:.0f} / {statistics.median(ms):.0f} / {ms[-1]:.0f} | < 1000 |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
