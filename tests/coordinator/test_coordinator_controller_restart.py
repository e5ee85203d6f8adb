"""The coordinator against a real controller (``mlfc-controller run``) driving the reference switch: a
controller restarted without a state file comes back with generation 0 and the default entries only, and
the running coordinator puts its latest decision back on the switch (issue 16 item 4). The time from the
controller listening to the switch holding the decision is printed; bench/coordinator_bench.py measures it
over several restarts."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import yaml
from coord_helpers import MD, evaluated, register, report, stub_for, wait_until

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "controller"))  # controller_helpers

from controller_helpers import config_doc, needs_artifacts, target_doc, wait_restored

from mlfc import contract
from mlfc.controller.pipeline import Pipeline
from mlfc.controller.sync import SwitchConnection
from mlfc.launch.daemons import ControllerProcess
from mlfc.launch.process import free_port
from mlfc.launch.switches import RefSwitch
from mlfc.proto import coordinator_pb2 as pb

pytestmark = [needs_artifacts, pytest.mark.slow, pytest.mark.timeout(180)]


def _job_entries(sw: RefSwitch, pipeline: Pipeline) -> set:
    """The job_priority entries the switch holds, read back as a backup client (lower election id)."""
    with SwitchConnection(sw.grpc_addr, sw.device_id, pipeline=pipeline, election_id=1).connect() as conn:
        return set(conn.read_entries([contract.JOB_PRIORITY]))


def test_controller_restarted_without_state_gets_the_decision_back(tmp_path, make_coordinator) -> None:  # type: ignore[no-untyped-def]
    pipeline = Pipeline.load(contract.P4INFO, contract.BMV2_JSON)
    sw = RefSwitch("s1", 1, log_file=tmp_path / "refswitch.log").start()
    doc = config_doc(
        target_doc(sw),
        pipeline={"p4info": str(contract.P4INFO), "device_config": str(contract.BMV2_JSON)},
        listen={"intent": f"127.0.0.1:{free_port()}", "metrics": f"127.0.0.1:{free_port()}"},
        controller={"reconnect_min_s": 0.05, "reconnect_max_s": 0.5},  # no state_file
    )
    config = tmp_path / "deployment.yaml"
    config.write_text(yaml.safe_dump(doc))
    ctl = ControllerProcess(config, tmp_path / "controller.log")
    try:
        ctl.start(timeout=60)
        wait_restored(ctl)
        defaults = _job_entries(sw, pipeline)
        c = make_coordinator(controller=ctl.intent_addr)
        stub = stub_for(c.address)
        for j in (1, 2, 3):
            register(stub, j)
            batch = [report(j, i, 0.9 - 0.8 * (i + 1) ** (-0.2 * j)) for i in range(30)]
            stub.Report(pb.ReportBatch(reports=batch), metadata=MD)
        assert wait_until(lambda: evaluated(stub, {1: 30, 2: 30, 3: 30}))
        assert wait_until(lambda: c.engine.applied_seq == c.engine.latest_seq > 0)
        ctl.client.wait_synced(ctl.client.get().generation)
        held = _job_entries(sw, pipeline)
        assert len(held - defaults) >= 3, "the decision's job entries are on the switch"
        latest = c.engine.latest_decision()[1]
        assert ctl.client.get().intent == latest

        def restored() -> bool:
            # The restarted controller counts generations from 0 again: >= 1 is the coordinator's re-send.
            got = ctl.client.get()
            if got.generation < 1 or got.intent != latest:
                return False
            if any(s.applied_generation < got.generation for s in ctl.client.status().switches):
                return False
            return _job_entries(sw, pipeline) == held

        ctl.stop()
        ctl.start(timeout=60)  # returns once the controller answers: it is listening
        listening = time.monotonic()
        assert wait_until(restored, timeout=20, step=0.05)
        back_s = time.monotonic() - listening
        assert c.sender.resends >= 1  # the coordinator noticed that the controller had lost it
        print(f"decision back on the switch {back_s:.2f} s after the restarted controller listened")
    finally:
        ctl.stop()
        sw.kill()
