"""Two mlfc networks on one machine would collide on interface names: the second waits for the first."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from mlfc.lab.network import network_lock

HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from mlfc.lab.network import network_lock
    lock, marks = Path(sys.argv[1]), Path(sys.argv[2])
    with network_lock(lock):
        marks.write_text("held\\n")
        time.sleep(1.0)
        with marks.open("a") as f:
            f.write("released\\n")
    """
)


def test_second_network_waits_for_the_first_and_is_told_why(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    lock, marks = tmp_path / "net.lock", tmp_path / "marks"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock), str(marks)])
    try:
        while not marks.exists():
            assert holder.poll() is None, "the holder died"
            time.sleep(0.02)
        with network_lock(lock):
            assert marks.read_text().splitlines() == ["held", "released"]  # entered only after the release
            assert f"pid {os.getpid()}" in lock.read_text()
        assert "waiting for another Mininet network" in capsys.readouterr().err
        assert lock.read_text() == ""  # no stale holder named once released
    finally:
        holder.wait(timeout=10)
