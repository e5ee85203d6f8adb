"""A run's leftover check names the processes this run started, not other experiments' on the machine."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from mlfc.lab.cleanup import RUN_TAG_VAR, leftovers, run_tag

# The command line carries a mark leftovers() looks for ("mlfc.refswitch"), as a switch process would.
SLEEPER = [sys.executable, "-c", "import sys, time; time.sleep(60)", "mlfc.refswitch"]


def test_only_processes_carrying_this_runs_tag_count() -> None:
    tag = run_tag()
    foreign_env = {k: v for k, v in os.environ.items() if k != RUN_TAG_VAR}
    ours = subprocess.Popen(SLEEPER)  # inherits the tag, as everything a run starts does
    theirs = subprocess.Popen(SLEEPER, env={**foreign_env, RUN_TAG_VAR: "another-run"})
    untagged = subprocess.Popen(SLEEPER, env=foreign_env)
    try:
        for p in (ours, theirs, untagged):  # until each has exec'd: ps shows the interpreter's own args
            while b"mlfc.refswitch" not in Path(f"/proc/{p.pid}/cmdline").read_bytes():
                time.sleep(0.01)
        found = " ".join(leftovers())
        assert f"process: {ours.pid} " in found
        assert f"process: {theirs.pid} " not in found
        assert f"process: {untagged.pid} " not in found
        assert os.environ[RUN_TAG_VAR] == tag
    finally:
        for p in (ours, theirs, untagged):
            p.kill()
            p.wait()
    assert not [x for x in leftovers() if str(ours.pid) in x]
