"""A short real-training job through the reference switch (root): PS and two workers in their own network
namespaces, each joined by a veth to a port of mlfc-refswitch running mlfc's pipeline, which routes the
tagged pushes and pulls. Needs torch (the job) and root (namespaces); no Mininet (the lab's Mininet
builder lives in the lab; tests/e2e runs real training through it)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from mlfc import contract
from mlfc.controller.entries import Lpm, entry
from mlfc.controller.sync import SwitchConnection
from mlfc.hosts.training.launch import TrainingJob, ps_argv, worker_argv
from mlfc.launch.switches import RefSwitch
from mlfc.testing.netns import NetnsLab, run

pytestmark = [pytest.mark.root, pytest.mark.slow]
for _module, _why in (("torch", "torch==2.13.0"), ("sklearn", "scikit-learn")):
    if importlib.util.find_spec(_module) is None:
        pytest.skip(f"{_why} not installed: `make install` brings the train extra", allow_module_level=True)

SWITCH_MAC = "00:aa:bb:00:00:01"
HOSTS = {"ps": (1, "10.77.9.100", "00:00:00:00:09:64"), "w0": (2, "10.77.9.1", "00:00:00:00:09:01"),
         "w1": (3, "10.77.9.2", "00:00:00:00:09:02")}  # fmt: skip
ITERATIONS = 50  # digits: 0.755 here on loopback, and the same through the switch (nothing is zero-filled)
JOB = 4


def _mac(text: str) -> int:
    return int(text.replace(":", ""), 16)


def _ip(text: str) -> int:
    a, b, c, d = (int(x) for x in text.split("."))
    return (a << 24) | (b << 16) | (c << 8) | d


@contextmanager
def _network() -> Iterator[tuple[NetnsLab, dict[str, str], RefSwitch]]:
    """Three namespaces, one veth each into the root namespace (switch side), the switch on those."""
    with NetnsLab("trn") as lab:
        names, ports = {}, {}
        for short, (port, ip, mac) in HOSTS.items():
            ns = lab.namespace(short)
            names[short] = ns
            sw_if, host_if = f"t{lab.prefix[-6:-1]}{port}s", "eth0"
            run("ip", "link", "add", sw_if, "type", "veth", "peer", "name", host_if, "netns", ns)
            run("sysctl", "-qw", f"net.ipv6.conf.{sw_if}.disable_ipv6=1", check=False)
            run("ip", "link", "set", sw_if, "up")
            run("ip", "-n", ns, "link", "set", host_if, "address", mac)
            run("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", host_if)
            run("ip", "-n", ns, "link", "set", host_if, "up")
            for other, (_, oip, _) in HOSTS.items():  # the switch routes: every peer is behind its MAC
                if other != short:
                    run("ip", "-n", ns, "neigh", "add", oip, "lladdr", SWITCH_MAC, "dev", host_if, "nud", "permanent")
            # veth offloads would leave checksums unfilled in what the switch sees
            for feature in ("tx", "rx", "gso", "tso", "gro"):
                run("ip", "netns", "exec", ns, "ethtool", "-K", host_if, feature, "off", check=False)
                run("ethtool", "-K", sw_if, feature, "off", check=False)
            ports[port] = sw_if
        with RefSwitch(name="trn", ports=ports, seed=3) as sw:
            yield lab, names, sw


def test_two_worker_digits_job_through_the_reference_switch():
    if not shutil.which("ethtool"):
        pytest.skip("ethtool not installed (veth offloads)")
    job = TrainingJob(job=JOB, workers=2, iterations=ITERATIONS, task="digits", timeout=90)
    with _network() as (lab, ns, sw), SwitchConnection(sw.grpc_addr, 1, election_id=1) as client:
        client.load_pipeline()
        client.write_entries([
            entry(contract.ROUTES_V4, {contract.IPV4_DST: Lpm(_ip(ip), 32)}, contract.SET_NEXT_HOP,
                  {"port": port, "src_mac": _mac(SWITCH_MAC), "dst_mac": _mac(mac), "rate_class": 0})
            for port, ip, mac in HOSTS.values()
        ])  # fmt: skip
        ps_ip = HOSTS["ps"][1]
        procs = {"ps": subprocess.Popen([*lab.exec_args(ns["ps"]), *ps_argv(job, ps_ip)], stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)}  # fmt: skip
        for rank in (0, 1):
            argv = worker_argv(job, rank, HOSTS[f"w{rank}"][1], ps_ip)
            procs[f"w{rank}"] = subprocess.Popen([*lab.exec_args(ns[f"w{rank}"]), *argv], stdout=subprocess.PIPE,
                                                 stderr=subprocess.PIPE, text=True)  # fmt: skip
        outs = {}
        try:
            for name, p in procs.items():
                outs[name] = p.communicate(timeout=300)
        finally:
            for p in procs.values():
                if p.poll() is None:
                    p.kill()
                    p.wait()
        codes = {name: p.returncode for name, p in procs.items()}
        assert codes == {"ps": 0, "w0": 0, "w1": 0}, {n: o[1][-1500:] for n, o in outs.items()}
        packets = client.read_counter(contract.JOB_PACKETS, JOB)[0]
    recs = [json.loads(line) for line in outs["w0"][0].splitlines() if line.startswith("{")]
    its = [r for r in recs if not r.get("summary")]
    assert [r["iteration"] for r in its] == list(range(ITERATIONS))
    acc = [r["accuracy"] for r in its if "accuracy" in r][-1]
    comm = sorted(r["comm_s"] for r in its)
    print(f"through the reference switch: accuracy {acc:.3f} after {ITERATIONS} iterations in "
          f"{its[-1]['end'] - its[0]['start']:.1f} s, median comm {comm[len(comm) // 2] * 1000:.1f} ms, "
          f"{packets} job packets counted by the switch")  # fmt: skip
    assert acc >= 0.7
    # every push and pull crossed the switch: at least the data chunks of both directions of both workers
    chunks_per_iteration = 2 * sum(r["chunks"] for r in its[:1]) * 2
    assert packets >= ITERATIONS * chunks_per_iteration
