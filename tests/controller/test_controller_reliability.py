"""What a careful user trips over (issue 16), against real switch processes (``[bmv2]`` and ``[ref]``):

* an intent applied while another client holds mastership must say which switch did not get it, and why;
* a switch that stays down for a while must be restored as soon as it listens again, whatever the
  outage length (the reconnect backoff must not grow during the outage);
* the ``pipeline`` probe that ``make shell`` uses to join a managed switch as a read-only backup.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from controller_helpers import INTENT_A, PIPELINE, eventually, expected, needs_artifacts, read_back, wait_restored

from mlfc.controller.sync import SwitchConnection
from mlfc.proto import intent_pb2 as pb

pytestmark = [needs_artifacts, pytest.mark.timeout(120)]


def test_apply_under_a_foreign_primary_names_the_switch_and_why(switch_factory, controller_factory) -> None:
    s1, s2 = switch_factory(device_id=1), switch_factory(device_id=2)
    rival = SwitchConnection(s1.grpc_addr, 1, pipeline=PIPELINE, election_id=1000).connect()
    try:
        assert rival.primary
        ctl = controller_factory([s1, s2])
        ctl.client.wait_synced(0, switches={"s2"})
        reply = ctl.client.apply(INTENT_A, timeout_s=10)
        assert reply.generation == 1
        assert [(u.switch, u.state) for u in reply.unconverged] == [("s1", pb.NOT_PRIMARY)]
        assert "primary" in reply.unconverged[0].reason and "1000" in reply.unconverged[0].reason
        status = {s.name: s for s in ctl.client.status().switches}
        assert status["s1"].state == pb.NOT_PRIMARY and status["s2"].state == pb.IN_SYNC
        out = subprocess.run(
            [sys.executable, "-m", "mlfc.controller.cli", "status", "--addr", ctl.intent_addr],
            capture_output=True, text=True, timeout=30,
        ).stdout  # fmt: skip
        assert "switch s1: NOT_PRIMARY, backup" in out and "primary holds 1000" in out, out
    finally:
        rival.close()
    # Once the rival leaves, the controller wins the role back and converges without a new intent.
    ctl.client.wait_synced(1, timeout_s=20)
    assert read_back(s1) == expected(ctl, INTENT_A, "s1")


def test_a_switch_down_for_seconds_is_restored_as_soon_as_it_listens(switch_factory, controller_factory) -> None:
    """With a long reconnect backoff (6 s) the old agent slept through the switch's return; now a cheap TCP
    probe (every probe_interval_s) notices it, so the restore starts within one probe interval."""
    s1 = switch_factory(device_id=1)
    ctl = controller_factory([s1], reconnect_min_s=6.0, reconnect_max_s=6.0, probe_interval_s=0.05)
    generation = ctl.client.apply(INTENT_A).generation
    ctl.client.wait_synced(generation)
    s1.kill()
    eventually(lambda: not ctl.client.status().switches[0].connected, what="the controller to see the switch gone")
    time.sleep(1.5)  # the outage
    s1.start()  # returns once it listens
    listening = time.monotonic()
    ctl.client.wait_synced(generation, timeout_s=20)
    restored = time.monotonic() - listening
    assert read_back(s1) == expected(ctl, INTENT_A, "s1")
    print(f"entries back {restored * 1000:.0f} ms after the switch listened again")
    assert restored < 3.0, f"restored {restored:.1f} s after listening: the 6 s backoff was not bypassed"


def test_pipeline_probe_tells_a_managed_switch(switch_factory, controller_factory) -> None:
    s1 = switch_factory(device_id=1)
    probe = [sys.executable, "-m", "mlfc.controller.cli", "pipeline", "--grpc-addr", s1.grpc_addr, "--device-id", "1"]
    empty = subprocess.run(probe, capture_output=True, text=True, timeout=30)
    assert empty.returncode == 1 and "no pipeline" in empty.stdout, empty.stdout + empty.stderr
    ctl = controller_factory([s1])
    wait_restored(ctl)
    loaded = subprocess.run(probe, capture_output=True, text=True, timeout=30)
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    assert f"{PIPELINE.cookie:#x}" in loaded.stdout and "primary" in loaded.stdout
    assert ctl.client.status().switches[0].primary, "the probe joined as a backup and left the controller primary"
