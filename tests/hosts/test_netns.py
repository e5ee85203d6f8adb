"""Real network namespaces and veth pairs (root): the CLI across namespaces, and MLTCP's share through a
tbf bottleneck. Namespaces are created per test under a unique name and deleted even on failure; all
addresses are 10.77.x.y inside them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from mlfc.hosts.transport import Receiver, Sender, SenderConfig, bind_shim_socket
from mlfc.policy.mltcp import MltcpParams
from mlfc.testing.netns import NetnsLab, in_netns

pytestmark = pytest.mark.root


@pytest.fixture
def lab() -> Iterator[tuple[NetnsLab, str, str, str]]:
    with NetnsLab("t") as lab:
        s, r = lab.namespace("s"), lab.namespace("r")
        dev, _ = lab.link(s, "10.77.1.1", r, "10.77.1.2")
        yield lab, s, r, dev
    assert not any(name.startswith(lab.prefix) for name in subprocess.run(
        ["ip", "netns", "list"], capture_output=True, text=True).stdout.split())  # fmt: skip


def test_cli_transfer_between_namespaces(lab):
    lab_, s, r, _ = lab
    cli = [sys.executable, "-m", "mlfc.hosts.transport_cli"]
    recv = ["recv", "--bind", "10.77.1.2:19730", "--count", "3", "--ready", "--json", "--start-timeout", "20"]
    rx = subprocess.Popen([*lab_.exec_args(r), *cli, *recv], stdout=subprocess.PIPE, text=True)
    try:
        assert rx.stdout.readline().strip() == "ready"
        tx = subprocess.run([*lab_.exec_args(s), *cli, "send", "--to", "10.77.1.2:19730", "--bind", "10.77.1.1",
                             "--bytes", "1000000", "--tensors", "3", "--job", "4", "--cc", "cubic", "--mltcp",
                             "--json"], capture_output=True, text=True, timeout=30)  # fmt: skip
        assert tx.returncode == 0, tx.stderr
        sent = json.loads(tx.stdout)
        got = json.loads(rx.communicate(timeout=10)[0])
    finally:
        rx.kill()
    assert sent["bytes"] == got["bytes"] == 3_000_000 and sent["cc"] == "cubic+mltcp"
    assert got["tensors"] == 3 and got["zero_filled_bytes"] == 0 and got["malformed"] == 0


def test_cli_sender_waits_for_go(lab):
    """--ready: the sender sets up, says so, sends nothing until "go", and refuses any other word."""
    lab_, s, r, _ = lab
    cli = [sys.executable, "-m", "mlfc.hosts.transport_cli"]
    recv = ["recv", "--bind", "10.77.1.2:19731", "--count", "1", "--ready", "--json", "--start-timeout", "20"]
    send = ["send", "--to", "10.77.1.2:19731", "--bind", "10.77.1.1", "--bytes", "200000", "--job", "5",
            "--ready", "--json"]  # fmt: skip
    rx = subprocess.Popen([*lab_.exec_args(r), *cli, *recv], stdout=subprocess.PIPE, text=True)
    tx = subprocess.Popen([*lab_.exec_args(s), *cli, *send], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert rx.stdout.readline().strip() == "ready"
        assert tx.stdout.readline().strip() == "ready"
        time.sleep(0.5)
        assert tx.poll() is None  # still waiting
        tx.stdin.write("go\n")
        tx.stdin.flush()
        out, err = tx.communicate(timeout=30)
        assert tx.returncode == 0, err
        got = json.loads(rx.communicate(timeout=10)[0])
        assert json.loads(out)["bytes"] == got["bytes"] == 200000
        assert got["first_packet_at"] > 0
        bad = subprocess.run([*lab_.exec_args(s), *cli, *send], input="stop\n", capture_output=True, text=True,
                             timeout=30)  # fmt: skip
        assert bad.returncode == 2 and "no 'go'" in bad.stderr
    finally:
        rx.kill()
        tx.kill()


@pytest.mark.parametrize("case", ["offload", "no-checksum-offload", "chunk-above-mtu"])
def test_gso_over_a_veth_pair_and_its_fallbacks(lab, case):
    lab_, s, r, dev = lab
    if case == "no-checksum-offload":
        if not shutil.which("ethtool"):
            pytest.skip("ethtool not installed (apt-get install ethtool)")
        lab_.run_in(s, "ethtool", "-K", dev, "tx", "off")  # as the Mininet lab sets its hosts
    chunk = 2000 if case == "chunk-above-mtu" else 1400  # 2028-byte segments do not fit a 1500 MTU
    rx = in_netns(r, lambda: Receiver(("10.77.1.2", 0x4D03)))
    tx = Sender(rx.address, config=SenderConfig(chunk_size=chunk),
                sock=in_netns(s, lambda: bind_shim_socket("10.77.1.1")))  # fmt: skip
    try:
        data = bytes(range(256)) * 20_000
        for k in range(2):
            tx.send_tensor(1, 0, k, data, importance=0)
            assert bytes(rx.recv(timeout=10).data) == data
        st, rst = tx.stats, rx.stats
        if case == "offload":  # batched sends cross the veth whole and are read whole (GRO)
            assert st.gso_sends > 0 and st.gso_refused == 0 and rst.runs > 0 and rst.datagrams < rst.packets
        elif case == "no-checksum-offload":
            # Linux >= 6.11 segments in software with software checksums (older kernels refuse: EIO, fallback);
            # either way the peer device sees one datagram per chunk, as a switch on it must
            assert (st.gso_sends > 0) != (st.gso_refused == 1) and rst.datagrams == rst.packets
        else:  # EINVAL: one datagram per chunk, fragmented by IP as without GSO
            assert st.gso_refused == 1 and st.gso_sends == 0 and rst.datagrams == rst.packets
    finally:
        tx.close()
        rx.close()


def share_of_first(lab, mltcp: MltcpParams | None, size: int) -> float:
    """Two Reno flows through the bottleneck; flow A declares one tensor per iteration (bytes_ratio climbs
    to 1), flow B ten (bytes_ratio stays <= 0.1). Returns A's share of the bytes acknowledged while both
    run, from 40 % of the overlap on (by then F_A - F_B >= 0.36 * slope)."""
    _, s, r, _ = lab
    rxs = [in_netns(r, lambda p=p: Receiver(("10.77.1.2", p))) for p in (0x4D01, 0x4D02)]
    cfg = SenderConfig(cc="reno", mltcp=mltcp, idle_gap=None)
    txs = [Sender(rx.address, config=cfg, sock=in_netns(s, lambda: bind_shim_socket("10.77.1.1"))) for rx in rxs]
    try:
        txs[0].start_iteration(expected_bytes=size)
        txs[1].start_iteration(expected_bytes=10 * size)
        done: list[float | None] = [None, None]
        errors: list[BaseException] = []

        def flow(i: int) -> None:
            try:
                txs[i].send_tensor(1 + i, 0, 0, b"\x01" * size, importance=0, timeout=20)
            except BaseException as exc:
                errors.append(exc)
            done[i] = time.monotonic()

        threads = [threading.Thread(target=flow, args=(i,)) for i in range(2)]
        start = time.monotonic()
        for t in threads:
            t.start()
        trace = []
        while None in done:
            trace.append((time.monotonic() - start, txs[0].stats.bytes_acked, txs[1].stats.bytes_acked))
            time.sleep(0.005)
        for t in threads:
            t.join()
        assert not errors, errors
        for rx in rxs:
            assert rx.recv(timeout=2).loss.complete
        overlap = min(done) - start
        window = [x for x in trace if 0.4 * overlap <= x[0] <= overlap]
        a = window[-1][1] - window[0][1]
        b = window[-1][2] - window[0][2]
        return a / (a + b)
    finally:
        for x in (*txs, *rxs):
            x.close()


@pytest.mark.slow
def test_mltcp_gives_the_flow_further_into_its_iteration_the_larger_share(lab):
    lab_, s, _, dev = lab
    # 50 Mb/s, 30 KB of queue: ~45 loss events per flow per second, so AIMD settles within the test
    lab_.tc(s, "qdisc", "add", "dev", dev, "root", "tbf", "rate", "50mbit", "burst", "15kb", "limit", "30kb")
    size = 3_000_000
    plain = share_of_first(lab, None, size)
    # slope 4 (F in [0.5, 4.5]) makes the effect clear within one second; slope 1 gives ~0.57
    mltcp = share_of_first(lab, MltcpParams(slope=4.0, intercept=0.5), size)
    print(f"share of flow A: plain {plain:.3f}, MLTCP {mltcp:.3f}")
    assert 0.35 < plain < 0.65  # plain Reno: about fair
    assert mltcp > 0.6 and mltcp > plain + 0.08
