"""The lab's bottleneck as a link in bit/s on the reference switch (StackConfig.bottleneck_bps): the
deployment it writes, the calibration probe's rate and the link-utilisation figure in bytes; BMv2 networks
keep bottleneck_pps (no byte rate there)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from mlfc.controller.config import load_config, queue_settings, write_config
from mlfc.controller.queues import QueueSettings
from mlfc.lab.results import IterationRecord
from mlfc.lab.stack import StackConfig, deployment_for, probe_rate_pps, utilisation
from mlfc.lab.validity import CHUNK_BYTES, DATA_FRAME_BYTES, link_utilisation, pps_equivalent
from mlfc.topologies import dumbbell

LINK = 20_000_000  # bit/s


def _ports(topo) -> dict[str, set[int]]:
    ports: dict[str, set[int]] = {name: set() for name in topo.switches}
    for lk in topo.links:
        for n, p in ((lk.a, lk.a_port), (lk.b, lk.b_port)):
            if n in ports:
                ports[n].add(p)
    return ports


def _network(target: str) -> tuple:
    topo = dumbbell(2, 1)
    switches = {
        name: SimpleNamespace(
            interfaces={p: f"{name}-eth{p}" for p in sorted(ports)},
            grpc_addr=f"127.0.0.1:{50051 + i}",
            device_id=i + 1,
            target=target,
            queue_port=9090 + i,
        )
        for i, (name, ports) in enumerate(sorted(_ports(topo).items()))
    }
    return topo, switches


def _cfg(**kw) -> StackConfig:
    return StackConfig(name="t", jobs=(), **kw)


@pytest.mark.parametrize(
    ("target", "bps", "bottleneck"),
    [
        ("refswitch", LINK, QueueSettings(rate_bps=LINK, depth_pkts=64)),
        ("refswitch", None, QueueSettings(1500, 64)),
        ("bmv2", LINK, QueueSettings(1500, 64)),  # BMv2 has no byte rate
    ],
)
def test_the_deployment_shapes_the_bottleneck_in_the_switchs_unit(
    tmp_path: Path, target: str, bps: int | None, bottleneck: QueueSettings
) -> None:
    topo, switches = _network(target)
    cfg = _cfg(bottleneck_bps=bps)
    dep = load_config(write_config(deployment_for(topo, switches, cfg, tmp_path), tmp_path / "deployment.yaml"))
    shaped = set(topo.bottleneck_ports())
    assert shaped, "the dumbbell has a bottleneck"
    for sw in dep.switches:
        for port, q in queue_settings(sw, dep.defaults.queue).items():
            assert q == (bottleneck if (sw.name, port) in shaped else QueueSettings(None, 64)), (sw.name, port)


def test_probe_rate_on_a_link_is_the_probes_frames_per_second() -> None:
    _, ref = _network("refswitch")
    _, bmv2 = _network("bmv2")
    assert probe_rate_pps(_cfg(bottleneck_bps=LINK), ref) == round(LINK / 8 / 1442)
    assert probe_rate_pps(_cfg(bottleneck_bps=LINK), bmv2) == 1500
    assert probe_rate_pps(_cfg(), ref) == 1500
    assert pps_equivalent(12_000_000, 1500) == 1000


def rec(job: int, start: float, push_end: float, packets: int) -> IterationRecord:
    return IterationRecord("t", job, "w0", 0, start - 1, start, push_end + 1, push_end + 1, packets * CHUNK_BYTES,
                           push_end=push_end)  # fmt: skip


def test_utilisation_in_bytes_on_a_link() -> None:
    assert DATA_FRAME_BYTES == 1474, "1400 payload + 32 transport header + 28 UDP/IPv4 + 14 Ethernet"
    # 3000 data frames over 3 busy seconds: 1000 frames/s of 1474 bytes = 11.792 Mbit/s.
    records = [rec(1, 0.0, 2.0, 1500), rec(2, 1.0, 3.0, 1500)]
    assert link_utilisation(records, rate_bps=11_792_000) == pytest.approx(1.0)
    assert link_utilisation(records, rate_bps=23_584_000) == pytest.approx(0.5)
    assert link_utilisation(records, 1000) == pytest.approx(1.0), "packets/s as before"
    with pytest.raises(ValueError, match="rate_pps or rate_bps"):
        link_utilisation(records, 1000, rate_bps=LINK)
    with pytest.raises(ValueError, match="rate_pps or rate_bps"):
        link_utilisation(records)
    _, ref = _network("refswitch")
    _, bmv2 = _network("bmv2")
    assert utilisation(records, _cfg(bottleneck_bps=11_792_000), ref) == pytest.approx(1.0)
    assert utilisation(records, _cfg(bottleneck_bps=11_792_000, bottleneck_pps=2000), bmv2) == pytest.approx(0.5)


def test_the_frame_size_matches_the_transport() -> None:
    from mlfc.hosts.transport.config import DEFAULT_CHUNK
    from mlfc.hosts.transport.packet import HEADER_LEN
    from mlfc.hosts.transport.sockets import UDP_IP_OVERHEAD

    assert DATA_FRAME_BYTES == DEFAULT_CHUNK + HEADER_LEN + UDP_IP_OVERHEAD + 14
