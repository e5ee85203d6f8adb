"""BMv2 after a link flap (launch/link_kick.py): a BMv2 whose interface went down forwards nothing, on any
port, until a frame arrives on that interface (p4lang/behavioral-model#1215). Between two switches nobody
sends one, so mlfc's Bmv2Switch sends it from the veth peer when the link is back; without that the
second half of the test sees nothing forwarded."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from refswitch_helpers import forwarded, host_routes, shim_packet
from refswitch_net import wired

from mlfc.controller.sync import SwitchConnection
from mlfc.launch.link_kick import KICK_ETHERTYPE, kick_frame, veth_peer
from mlfc.launch.switches import Bmv2Switch
from mlfc.refswitch.p4info import COMMITTED_DEVICE_CONFIG
from mlfc.testing.refswitch import pipeline
from mlfc.testing.veth import run
from mlfc.testing.waiting import eventually

pytestmark = [
    pytest.mark.bmv2,
    pytest.mark.root,
    pytest.mark.skipif(not COMMITTED_DEVICE_CONFIG.is_file(), reason="p4src/build/mlfc.json missing: run `make p4`"),
]


def _flap(iface: str) -> None:
    run("ip", "link", "set", iface, "down")
    time.sleep(0.5)
    run("ip", "link", "set", iface, "up")
    eventually(lambda: Path(f"/sys/class/net/{iface}/operstate").read_text().strip() == "up", 10, f"{iface} up")


def test_bmv2_forwards_again_after_a_link_flap_on_a_port_nobody_sends_to():
    with (
        wired(3, "bkf") as (ports, wire),
        Bmv2Switch(name="bkf", ports=ports) as sw,
        SwitchConnection(sw.grpc_addr, pipeline=pipeline(), election_id=1) as conn,
    ):
        conn.load_pipeline(force=True)
        conn.write_entries(host_routes())
        pkt = shim_packet(0, 1, job=1)
        wire.send(0, bytes(pkt))
        assert wire.expect(1) == [(1, forwarded(pkt, 1))], "forwards before the flap"
        _flap(ports[2])  # a port that carries none of the test's traffic
        time.sleep(0.5)  # the kick, if any, has been sent (the watcher polls every 0.1 s)
        wire.flush()  # the kick frame itself arrives on port 2 and is dropped (not IPv4)
        wire.send(0, bytes(pkt))
        assert wire.expect(1) == [(1, forwarded(pkt, 1))], "forwards after the flap of another port"
        assert sw.link_kicks == 1


def test_the_kick_is_sent_from_the_veth_peer_and_is_no_traffic():
    frame = kick_frame(b"\x02\x00\x00\x00\x00\x01")
    assert len(frame) == 60 and int.from_bytes(frame[12:14], "big") == KICK_ETHERTYPE
    with wired(1, "bkp") as (ports, _wire):
        peer = veth_peer(ports[0])
        assert peer is not None and peer != ports[0]
        assert veth_peer(peer) == ports[0]
    assert veth_peer("lo") is None
