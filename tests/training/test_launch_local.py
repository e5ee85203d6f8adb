"""run_local starts the workers only once the PS holds its port (a worker's free-port pick could take it)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from mlfc.hosts.training import protocol as proto
from mlfc.hosts.training.launch import _wait_listening


def _child(code: str, err: Path) -> subprocess.Popen:
    with err.open("w") as f:
        return subprocess.Popen([sys.executable, "-c", code], stderr=f)


def test_waits_for_the_listening_line(tmp_path: Path):
    err = tmp_path / "ps.err"
    code = f"import sys, time; time.sleep(0.5); print('ps: job 1 {proto.PS_LISTENING} 127.0.0.1:1', file=sys.stderr, flush=True); time.sleep(5)"  # noqa: E501
    p = _child(code, err)
    try:
        t0 = time.monotonic()
        _wait_listening(err, p, time.monotonic() + 10)
        waited = time.monotonic() - t0
        assert proto.PS_LISTENING in err.read_text()
        assert 0.4 <= waited < 4, waited
    finally:
        p.kill()
        p.wait()


def test_returns_when_the_ps_exits_or_the_deadline_passes(tmp_path: Path):
    err = tmp_path / "ps.err"
    p = _child("import sys; sys.exit(3)", err)
    t0 = time.monotonic()
    _wait_listening(err, p, time.monotonic() + 10)
    assert p.poll() == 3 and time.monotonic() - t0 < 5
    q = _child("import time; time.sleep(5)", err)
    try:
        t0 = time.monotonic()
        _wait_listening(err, q, time.monotonic() + 0.3)
        assert 0.25 <= time.monotonic() - t0 < 2
    finally:
        q.kill()
        q.wait()
