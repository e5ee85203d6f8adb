"""Finding what a run left behind (processes, interfaces); a run's teardown on SIGTERM. (Ending a process:
``mlfc.processes.terminate``.)"""

from __future__ import annotations

import os
import signal
import subprocess
import time

# Every process a run starts inherits this variable (set on the first leftovers() call, before the run
# starts anything): a process is this run's only if it carries our value. Other checkouts' and other
# sessions' experiments on the same machine come and go meanwhile and are not ours to judge.
RUN_TAG_VAR = "MLFC_RUN_TAG"

# What an mlfc run starts that must not survive it.
_PROCESS_MARKS = ("simple_switch_grpc", "mlfc.lab.emulator", "mlfc.hosts.training", "mlfc-refswitch", "mlfc.refswitch")


def leftovers() -> list[str]:
    """Processes, namespaces or interfaces an mlfc run could have left behind."""
    tag = run_tag()
    found = []
    ps = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True).stdout.splitlines()
    for line in ps[1:]:
        if any(k in line for k in _PROCESS_MARKS) and "pytest" not in line and _tagged(line.split()[0], tag):
            found.append(f"process: {line.strip()}")
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    for line in links.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if "-eth" in name and (name.startswith("s") or name.startswith("leaf") or name.startswith("spine")):
            found.append(f"interface: {name}")
    return found


def run_tag() -> str:
    """This process's run tag, inherited by everything it starts from now on."""
    return os.environ.setdefault(RUN_TAG_VAR, f"{os.getpid()}-{time.time_ns()}")


def _tagged(pid: str, tag: str) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = fh.read().split(b"\0")
    except OSError:
        return False  # gone meanwhile, or not ours to read
    return f"{RUN_TAG_VAR}={tag}".encode() in env


def interrupt_on_sigterm() -> None:
    """SIGTERM raises KeyboardInterrupt, so a run's teardown (switches, namespaces, jobs) runs on it as on
    Ctrl-C."""

    def _interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, _interrupt)
