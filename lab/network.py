"""Build a Mininet network from a Topology, with P4 switches (BMv2 or the reference switch).

Hosts get IPv6 and NIC offloads turned off and static ARP. The bottleneck is set on the switch's
queues (`set_queue_rate`; `set_queue_rate_bps` on the reference switch with the stack's
`bottleneck_bps`), never with Mininet `bw=`: tc shaping sits after the switch, so its
queue would fill instead of the switch's and no packet would ever see a deep switch queue.
Switch processes run in the root namespace; gRPC and Thrift/admin bind 127.0.0.1, one port each.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from mlfc.launch.switches import Bmv2Switch, SwitchProcess
from mlfc.topologies import Topology


class MininetMissing(RuntimeError):
    pass


def mininet_missing() -> str | None:
    for tool in ("mn", "mnexec"):
        if not shutil.which(tool):
            return f"{tool} not found: apt-get install mininet"
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        return "Mininet's Python module is not importable: use a venv made from /usr/bin/python3 (make install)"
    return None


SwitchClass = type[SwitchProcess]

# Two networks on one machine collide on interface names (s1-eth1 ...) and on Mininet's namespaces:
# every mlfc network holds this lock for its lifetime, and a second one waits for it.
NETWORK_LOCK = Path(os.environ.get("MLFC_NETWORK_LOCK", "/tmp/mlfc-mininet.lock"))


@contextlib.contextmanager
def network_lock(path: Path = NETWORK_LOCK) -> Iterator[None]:
    """Exclusive use of the machine's Mininet: waits (saying for whom) while another network runs."""
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "unknown"
            print(f"waiting for another Mininet network on this machine to end ({holder})", file=sys.stderr)
            fcntl.flock(fh, fcntl.LOCK_EX)
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()}: {' '.join(sys.argv)[:200]}\n")
        fh.flush()
        try:
            yield
        finally:
            fh.seek(0)
            fh.truncate()
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def mininet_network(
    topo: Topology, switch_class: SwitchClass = Bmv2Switch, log_dir: Path | None = None
) -> Iterator[tuple[object, dict[str, SwitchProcess]]]:
    """Start the network; yield (Mininet net, running switches by name); tear everything down on exit."""
    missing = mininet_missing()
    if missing:
        raise MininetMissing(missing)
    from mininet.link import Link as MnLink
    from mininet.net import Mininet
    from mininet.node import Host as MnHost
    from mininet.node import Switch as MnSwitch

    with network_lock():

        class ExternalSwitch(MnSwitch):
            """A Mininet switch whose dataplane is a process mlfc starts itself after the links exist."""

            def start(self, controllers) -> None:
                pass

            def stop(self, deleteIntfs: bool = True) -> None:
                super().stop(deleteIntfs)

        net = Mininet(
            controller=None,
            switch=ExternalSwitch,
            host=MnHost,
            link=MnLink,
            autoSetMacs=False,
            autoStaticArp=False,
            build=False,
        )
        handles: dict[str, SwitchProcess] = {}
        try:
            for sw in topo.switches.values():
                net.addSwitch(sw.name, dpid=f"{sw.device_id:016x}")
            for host in topo.hosts.values():
                net.addHost(host.name, ip=f"{host.ip}/8", mac=host.mac)
            for lk in topo.links:
                kwargs = {}
                if lk.a in topo.switches:
                    kwargs["port1"] = lk.a_port
                    kwargs["intfName1"] = f"{lk.a}-eth{lk.a_port}"
                if lk.b in topo.switches:
                    kwargs["port2"] = lk.b_port
                    kwargs["intfName2"] = f"{lk.b}-eth{lk.b_port}"
                net.addLink(lk.a, lk.b, **kwargs)
            net.build()
            net.start()
            for host in net.hosts:
                _quiet_host(host)
            net.staticArp()
            for sw in topo.switches.values():
                for iface in topo.switch_ports(sw.name).values():
                    _quiet_root_iface(iface)
                log = log_dir / f"{sw.name}.log" if log_dir else None
                proc = switch_class(sw.name, sw.device_id, topo.switch_ports(sw.name), log_file=log)
                handles[sw.name] = proc
                proc.start()
            yield net, handles
        finally:
            for proc in reversed(handles.values()):
                with contextlib.suppress(Exception):
                    proc.stop()
            with contextlib.suppress(Exception):
                net.stop()


def _quiet_host(host) -> None:
    for intf in host.intfList():
        name = intf.name
        host.cmd(f"sysctl -qw net.ipv6.conf.{name}.disable_ipv6=1")
        host.cmd(f"ethtool -K {name} rx off tx off sg off tso off gso off gro off >/dev/null 2>&1")
    host.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1")


def _quiet_root_iface(name: str) -> None:
    subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{name}.disable_ipv6=1"], capture_output=True)
    subprocess.run(
        ["ethtool", "-K", name, "rx", "off", "tx", "off", "sg", "off", "tso", "off", "gso", "off", "gro", "off"],
        capture_output=True,
    )
