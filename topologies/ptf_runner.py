"""Run mlfc's PTF tests against a fresh BMv2: veth pairs, simple_switch_grpc, then `ptf`.

    python -m mlfc.topologies.ptf_runner [test-spec ...] [--log-dir DIR]

A test spec is PTF's (module or module.Class, e.g. `test_ecn` or `test_ecn.BelowKminNothingIsMarked`);
none runs them all. Needs root (veths) and BMv2. Exits with PTF's status.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from mlfc.topologies.bmv2 import REPO, Bmv2Switch, bmv2_missing
from mlfc.topologies.veth import veth_pairs

PTF_DIR = REPO / "ptf-tests"
NUM_PORTS = 3


def ptf_missing() -> str | None:
    if os.geteuid() != 0:
        return "PTF tests need root (veth pairs)"
    missing = bmv2_missing()
    if missing:
        return missing
    if not shutil.which("ptf", path=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")):
        return "ptf not installed in this environment (pip install ptf==0.12.0)"
    return None


def run_ptf(specs: list[str], log_dir: Path, timeout: float = 600) -> int:
    log_dir.mkdir(parents=True, exist_ok=True)
    ptf_bin = shutil.which("ptf", path=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    with veth_pairs(NUM_PORTS, prefix="mlfcp") as pairs:
        switch = Bmv2Switch(name="ptf", device_id=1, ports={i: p.switch_side for i, p in enumerate(pairs)})
        with switch:
            params = f"grpc_addr='{switch.grpc_addr}';device_id=1;thrift_port={switch.thrift_port}"
            cmd = [
                sys.executable,
                ptf_bin,
                "--test-dir",
                str(PTF_DIR),
                "--test-params",
                params,
                "--log-file",
                str(log_dir / "ptf.log"),
                *[arg for i, p in enumerate(pairs) for arg in ("--interface", f"0-{i}@{p.test_side}")],
                *specs,
            ]
            return subprocess.run(cmd, cwd=PTF_DIR, timeout=timeout).returncode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("specs", nargs="*", help="PTF test specs (default: all)")
    ap.add_argument("--log-dir", type=Path, default=REPO / "results" / "ptf")
    args = ap.parse_args(argv)
    missing = ptf_missing()
    if missing:
        print(f"cannot run PTF tests: {missing}", file=sys.stderr)
        return 2
    return run_ptf(args.specs, args.log_dir)


if __name__ == "__main__":
    sys.exit(main())
