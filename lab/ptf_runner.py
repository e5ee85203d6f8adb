"""Run mlfc's PTF tests against a fresh switch: veth pairs, the switch, then `ptf`.

    python -m mlfc.lab.ptf_runner [test-spec ...] [--dataplane bmv2|ref] [--log-dir DIR]

A test spec is PTF's (module or module.Class, e.g. `test_ecn` or `test_ecn.BelowKminNothingIsMarked`);
none runs them all. `--dataplane bmv2` (default) runs simple_switch_grpc; `ref` runs mlfc's reference
switch (docs/refswitch.md), whose queue commands go to its admin port. Needs root (veths), and BMv2
for `bmv2`. Exits with PTF's status.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from mlfc import contract
from mlfc.launch.switches import Bmv2Switch, RefSwitch, bmv2_missing
from mlfc.testing.veth import unique_prefix, veth_pairs

PTF_DIR = contract.REPO_ROOT / "ptf-tests"
NUM_PORTS = 3
DATAPLANES = ("bmv2", "ref")
# The refswitch's own model (one rate per port). The PTF tests only cap the low class's queue
# (`set_queue_rate R 1 1`), which in shared mode is a cap inside an unlimited port rate: the same
# behaviour as BMv2's per-queue limiter for them. `per-queue` is BMv2's model exactly.
REF_QUEUE_MODE = "shared"


def _ptf_bin() -> str | None:
    return shutil.which("ptf", path=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))


def ptf_missing(dataplane: str = "bmv2") -> str | None:
    if os.geteuid() != 0:
        return "PTF tests need root (veth pairs)"
    if dataplane == "bmv2":
        missing = bmv2_missing()
        if missing:
            return missing
    if not _ptf_bin():
        return "ptf not installed in this environment (pip install ptf==0.12.0)"
    return None


def _switch(dataplane: str, ports: dict[int, str], log_dir: Path, queue_mode: str):
    if dataplane == "bmv2":
        return Bmv2Switch(name="ptf", device_id=1, ports=ports)
    if dataplane == "ref":
        return RefSwitch(
            name="ptf", device_id=1, ports=ports, queue_mode=queue_mode, log_file=log_dir / "refswitch.log"
        )
    raise ValueError(f"dataplane {dataplane!r} is not one of {', '.join(DATAPLANES)}")


def run_ptf(
    specs: list[str],
    log_dir: Path,
    timeout: float = 600,
    dataplane: str = "bmv2",
    queue_mode: str = REF_QUEUE_MODE,
    report: Path | None = None,
) -> int:
    """Run PTF ``specs`` against a fresh ``dataplane`` switch (``queue_mode``: the refswitch's only).

    ``report``: a file for PTF's own console output (its unittest summary with the failing
    assertion), which otherwise goes to this process's stdout.
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    ptf_bin = _ptf_bin()
    if ptf_bin is None:
        raise FileNotFoundError("ptf")
    with veth_pairs(NUM_PORTS, prefix=unique_prefix("mlfcp")) as pairs:
        switch = _switch(dataplane, {i: p.switch_side for i, p in enumerate(pairs)}, log_dir, queue_mode)
        with switch:
            # queue_port: where queue commands go (Thrift, or the refswitch's admin port); target tells
            # mlfc_switch.TestSwitch which protocol that port speaks.
            params = (
                f"grpc_addr='{switch.grpc_addr}';device_id=1;queue_port={switch.queue_port};target='{switch.target}'"
            )
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
            if report is None:
                return subprocess.run(cmd, cwd=PTF_DIR, timeout=timeout).returncode
            with report.open("w") as out:
                run = subprocess.run(cmd, cwd=PTF_DIR, timeout=timeout, stdout=out, stderr=subprocess.STDOUT)
            return run.returncode


def failure_summary(log_dir: Path, report: Path, tail_chars: int = 3000) -> str:
    """What a failed run said: PTF's unittest report (tracebacks), then the end of ptf.log."""
    said = report.read_text(errors="replace") if report.exists() else "(no PTF report)"
    log_file = log_dir / "ptf.log"
    log = log_file.read_text(errors="replace")[-tail_chars:] if log_file.exists() else "(no ptf.log)"
    return f"PTF report:\n{said}\nend of ptf.log:\n{log}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("specs", nargs="*", help="PTF test specs (default: all)")
    ap.add_argument(
        "--dataplane",
        choices=DATAPLANES,
        default="bmv2",
        help="bmv2: simple_switch_grpc (default); ref: mlfc's reference switch",
    )
    ap.add_argument(
        "--ref-queue-mode",
        choices=("shared", "per-queue"),
        default=REF_QUEUE_MODE,
        help="the reference switch's queue model (default %(default)s)",
    )
    ap.add_argument("--log-dir", type=Path, default=contract.REPO_ROOT / "results" / "ptf")
    args = ap.parse_args(argv)
    missing = ptf_missing(args.dataplane)
    if missing:
        print(f"cannot run PTF tests: {missing}", file=sys.stderr)
        return 2
    return run_ptf(args.specs, args.log_dir, dataplane=args.dataplane, queue_mode=args.ref_queue_mode)


if __name__ == "__main__":
    sys.exit(main())
