"""``make deploy-test``: docs/deploy.md's cluster stood up in network namespaces, every daemon started from
the unit files in deploy/systemd with the configuration files in deploy/cluster, one job trained end to end.

Each node (the control host ``ctl``, the switch ``s1``, the job's hosts) gets a namespace and a folder that
stands for its root file system: deploy/cluster/<node>/etc/mlfc copied to <run>/<node>/etc/mlfc, its TLS
files from ``scripts/make-certs.sh`` (one development CA, a certificate per node) and the shared token. A
unit's command line is read as systemd would (lab.deploy.units) with /etc, /var and /run moved under the
node's folder and /usr/local/bin/mlfc-* replaced by this checkout's programs. Host names resolve through
/etc/netns/<namespace>/hosts, which ``ip netns exec`` puts in place of /etc/hosts.

Start-up order (docs/deploy.md): switch, controller, coordinator, then the job (PS, workers). The test
passes when the job ends on every host, the coordinator holds every worker's reports (asked from a training
host, over mutual TLS), the controller holds the switch with the job's entries, and a client without a
certificate is refused by the coordinator with a message that names the cause.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mlfc.lab.deploy.network import ClusterNamespaces, cluster_namespaces, wait_reachable
from mlfc.lab.deploy.units import command_line, read_environment_file, read_unit
from mlfc.launch.process import terminate
from mlfc.topologies.cluster import Cluster, cluster

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
COORDINATOR_PORT = 50061
SWITCH_GRPC_PORT = 9559


@dataclass
class Service:
    """One unit started on one node, as systemd would (its own process group; SIGTERM to stop)."""

    node: str
    unit: str
    argv: list[str]
    log: Path
    proc: subprocess.Popen | None = None

    def start(self, net: ClusterNamespaces, env: dict[str, str]) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                net.exec_prefix(self.node) + self.argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, **env, "PYTHONUNBUFFERED": "1"},
            )

    def check(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise DeployError(f"{self.unit} on {self.node} exited with {self.proc.returncode}:\n{self.tail()}")

    def stop(self) -> int | None:
        return None if self.proc is None else terminate(self.proc)

    def tail(self, n: int = 2500) -> str:
        return self.log.read_text(errors="replace")[-n:] if self.log.exists() else ""


class DeployError(RuntimeError):
    """The deployment did not come up, or the job did not train end to end."""


@dataclass
class DeployReport:
    nodes: dict[str, str]
    job_exit_codes: dict[str, int] = field(default_factory=dict)
    accuracy: dict[str, float] = field(default_factory=dict)
    iterations: int = 0
    coordinator_workers: dict[str, int] = field(default_factory=dict)
    coordinator_reports: int = 0
    decisions_applied: int = 0  # MAIF decisions the controller acknowledged
    switch_entries: int = 0
    switch_job_packets: int = 0  # the job's tagged packets the switch counted
    refused_without_certificate: str = ""
    coordinator_metrics: int = 0  # mlfc_coordinator_* samples its /metrics served
    seconds: float = 0.0


def missing() -> str | None:
    """Why the deploy test cannot run here (None: it can)."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    for tool in ("ip", "openssl"):
        if not shutil.which(tool):
            return f"{tool} not found"
    for artifact in ("p4src/build/mlfc.p4info.txtpb", "p4src/build/mlfc.json"):
        if not (REPO / artifact).exists():
            return f"{artifact} missing (compiled P4 outputs are committed: a broken checkout?)"
    return None


def binaries() -> dict[str, str]:
    """The installed program names the units run -> this checkout's (the venv's console scripts)."""
    bindir = Path(sys.executable).parent
    names = ("mlfc-refswitch", "mlfc-controller", "mlfc-coordinator", "mlfc-train", "mlfc-agent")
    return {name: str(bindir / name) for name in names if (bindir / name).exists()}


def prepare(cl: Cluster, net: ClusterNamespaces, run_dir: Path) -> None:
    """Each node's /etc/mlfc from deploy/cluster, its TLS files, the token, the pipeline and /etc/hosts."""
    certs = run_dir / "certs"
    subprocess.run(
        ["bash", str(REPO / "scripts/make-certs.sh"), str(certs), *cl.nodes()], check=True, capture_output=True
    )
    token = secrets.token_hex(16)
    hosts = "".join(f"{ip}\t{node}\n" for node, ip in cl.management.items())
    for node in cl.nodes():
        etc = run_dir / node / "etc/mlfc"
        shutil.copytree(DEPLOY / "cluster" / node / "etc/mlfc", etc)
        tls = etc / "tls"
        tls.mkdir(mode=0o700)
        shutil.copy(certs / "ca.crt", tls / "ca.crt")
        shutil.copy(certs / f"{node}.crt", tls / "host.crt")
        shutil.copy(certs / f"{node}.key", tls / "host.key")
        (etc / "token").write_text(token + "\n")
        (etc / "token").chmod(0o600)
        (run_dir / node / "var/lib/mlfc").mkdir(parents=True)
        netns_etc = Path("/etc/netns") / net.netns(node)
        netns_etc.mkdir(parents=True, exist_ok=True)
        (netns_etc / "hosts").write_text(f"127.0.0.1\tlocalhost\n{hosts}")
    p4 = run_dir / cl.control / "etc/mlfc/p4"
    p4.mkdir()
    for name in ("mlfc.p4info.txtpb", "mlfc.json"):
        shutil.copy(REPO / "p4src/build" / name, p4 / name)


def service(cl: Cluster, run_dir: Path, node: str, unit_name: str, instance: str = "") -> Service:
    unit_file = DEPLOY / "systemd" / unit_name.replace(f"@{instance}.", "@.")
    argv, _ = command_line(read_unit(unit_file), instance=instance, root=run_dir / node, binaries=binaries())
    return Service(node, unit_name, argv, run_dir / "logs" / f"{node}-{unit_name}.log")


def run(run_dir: Path, *, job: int = 1, workers: int = 2, timeout_s: float = 300.0) -> DeployReport:
    reason = missing()
    if reason:
        raise DeployError(f"deploy test cannot run: {reason}")
    cl = cluster(workers=workers, job=job)
    run_dir.mkdir(parents=True, exist_ok=True)
    report = DeployReport(nodes=dict(cl.management))
    started: list[Service] = []
    t0 = time.monotonic()
    with cluster_namespaces(cl) as net:
        try:
            prepare(cl, net, run_dir)
            env = {"MLFC_DEPLOY_TEST": "1"}
            switch = service(cl, run_dir, "s1", "mlfc-refswitch.service")
            say(f"start {switch.unit} on s1: {' '.join(switch.argv)}")
            switch.start(net, env)
            started.append(switch)
            wait_reachable(net, cl.control, cl.management["s1"], SWITCH_GRPC_PORT, 30)
            for unit in ("mlfc-controller.service", "mlfc-coordinator.service"):
                svc = service(cl, run_dir, cl.control, unit)
                say(f"start {unit} on {cl.control}: {' '.join(svc.argv)}")
                svc.start(net, env)
                started.append(svc)
            wait_reachable(net, cl.topology.job_hosts(job)[0].name, cl.management[cl.control], COORDINATOR_PORT, 30)
            job_services = []
            for host in sorted(cl.topology.job_hosts(job), key=lambda h: h.role != "ps"):
                unit = f"mlfc-{'ps' if host.role == 'ps' else 'worker'}@{job}.service"
                svc = service(cl, run_dir, host.name, unit, str(job))
                say(f"start {unit} on {host.name}: {' '.join(svc.argv)}")
                svc.start(net, env)
                started.append(svc)
                job_services.append(svc)
            _wait_job(job_services, started, timeout_s)
            for svc in job_services:
                assert svc.proc is not None
                report.job_exit_codes[svc.node] = svc.proc.returncode
                summary = _summary(svc.log)
                if summary and "accuracy" in summary and summary.get("accuracy") is not None:
                    report.accuracy[svc.node] = float(summary["accuracy"])
                    report.iterations = int(summary.get("iterations", 0))
            _check_coordinator(cl, net, run_dir, job, report)
            _check_controller(cl, net, run_dir, job, report)
            metrics = read_environment_file(run_dir / cl.control / "etc/mlfc/coordinator.env")["METRICS"]
            report.coordinator_metrics = _scrape(net, cl.control, metrics, "mlfc_coordinator_")
        finally:
            for svc in reversed(started):
                svc.stop()
            for node in cl.nodes():
                shutil.rmtree(Path("/etc/netns") / net.netns(node), ignore_errors=True)
    report.seconds = round(time.monotonic() - t0, 1)
    (run_dir / "report.json").write_text(json.dumps(asdict(report), indent=2) + "\n")
    failures = verdict(report, workers)
    if failures:
        raise DeployError("; ".join(failures) + f" (logs in {run_dir / 'logs'})")
    return report


def verdict(report: DeployReport, workers: int) -> list[str]:
    out = [f"{node} exited with {code}" for node, code in report.job_exit_codes.items() if code != 0]
    if len(report.coordinator_workers) < workers:
        out.append(f"coordinator holds reports of {len(report.coordinator_workers)} of {workers} workers")
    if report.switch_entries <= 0:
        out.append("the controller holds no entries on s1")
    if report.decisions_applied <= 0:
        out.append("no decision of the coordinator was acknowledged by the controller")
    if report.coordinator_metrics <= 0:
        out.append("the coordinator's /metrics served no mlfc_coordinator_* sample")
    if report.switch_job_packets <= 0:
        out.append("the switch counted no packet of the job (did its traffic cross s1?)")
    if not report.refused_without_certificate:
        out.append("a client without a certificate was not refused by the coordinator")
    return out


def _wait_job(job: list[Service], daemons: list[Service], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while any(s.proc is not None and s.proc.poll() is None for s in job):
        for svc in daemons:
            if svc not in job:
                svc.check()
        if time.monotonic() > deadline:
            raise DeployError(f"the job did not end in {timeout_s:g} s:\n" + "\n".join(s.tail(800) for s in job))
        time.sleep(0.5)


def _summary(log: Path) -> dict | None:
    for line in reversed(log.read_text(errors="replace").splitlines()):
        if line.startswith("{") and '"summary"' in line:
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def _cli(net: ClusterNamespaces, node: str, argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(net.exec_prefix(node) + argv, capture_output=True, text=True, timeout=60)


def _check_coordinator(cl: Cluster, net: ClusterNamespaces, run_dir: Path, job: int, report: DeployReport) -> None:
    """Ask the coordinator from a training host over mutual TLS, then without a client certificate."""
    host = cl.topology.job_hosts(job)[0].name
    etc = run_dir / host / "etc/mlfc"
    base = [binaries().get("mlfc-coordinator", "mlfc-coordinator"), "jobs", "--json"]
    addr = ["--coordinator", f"{cl.control}:{COORDINATOR_PORT}", "--token-file", str(etc / "token")]
    tls = ["--tls-ca", str(etc / "tls/ca.crt")]
    mutual = [*tls, "--tls-cert", str(etc / "tls/host.crt"), "--tls-key", str(etc / "tls/host.key")]
    for info in _json_objects(_query(net, host, [*base, *addr, *mutual])):
        if int(info.get("job_id", 0)) == job:
            report.coordinator_reports = int(info.get("reports", 0))
            workers = info.get("workers", [])
            report.coordinator_workers = {str(w.get("rank", 0)): int(w.get("last_iteration", 0)) for w in workers}
    decisions = [base[0], "decisions", "--json", *addr, *mutual]
    acknowledged = [d for d in _json_objects(_query(net, host, decisions)) if float(d.get("applied_at", 0)) > 0]
    report.decisions_applied = len(acknowledged)
    refused = _cli(net, host, base + addr + tls)
    if refused.returncode != 0:
        report.refused_without_certificate = refused.stderr.strip().splitlines()[-1] if refused.stderr else "refused"


def _query(net: ClusterNamespaces, node: str, argv: list[str]) -> str:
    answer = _cli(net, node, argv)
    if answer.returncode != 0:
        raise DeployError(f"{' '.join(argv[:2])} from {node} failed: {answer.stderr.strip()}")
    return answer.stdout


def _scrape(net: ClusterNamespaces, node: str, address: str, prefix: str) -> int:
    """How many samples whose name starts with ``prefix`` the /metrics at ``address`` serves, seen from ``node``."""
    url = f"http://{address}/metrics"
    fetch = f"import urllib.request; print(urllib.request.urlopen({url!r}, timeout=5).read().decode())"
    answer = _cli(net, node, [sys.executable, "-c", fetch])
    return sum(line.startswith(prefix) for line in answer.stdout.splitlines()) if answer.returncode == 0 else 0


def _json_objects(text: str) -> list[dict]:
    """The JSON objects a query command prints one after the other (one per job or decision)."""
    decoder, out, at = json.JSONDecoder(), [], 0
    while (at := _skip_space(text, at)) < len(text):
        obj, at = decoder.raw_decode(text, at)
        out.append(obj)
    return out


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def _check_controller(cl: Cluster, net: ClusterNamespaces, run_dir: Path, job: int, report: DeployReport) -> None:
    """Ask the controller's intent API (mutual TLS, on the control host) what it holds on the switch."""
    etc = run_dir / cl.control / "etc/mlfc"
    tls = ["--tls-ca", str(etc / "tls/ca.crt"), "--tls-cert", str(etc / "tls/host.crt")]
    tls += ["--tls-key", str(etc / "tls/host.key")]
    argv = [binaries().get("mlfc-controller", "mlfc-controller"), "status", "--json", *tls]
    answer = _cli(net, cl.control, argv)
    if answer.returncode != 0:
        raise DeployError(f"mlfc-controller status failed: {answer.stderr.strip()}")
    status = json.loads(answer.stdout)
    for sw in status.get("switches", []):
        if sw.get("name") == "s1" and sw.get("connected"):
            report.switch_entries = sum(int(n) for n in sw.get("entries", {}).values())
    for counters in status.get("jobs", []):
        if int(counters.get("job_id", 0)) == job:
            report.switch_job_packets = int(counters.get("packets", 0))


def say(msg: str) -> None:
    print(msg, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mlfc.lab.deploy", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("results/deploy-test"), help="run folder (%(default)s)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds for the job (%(default)s)")
    args = ap.parse_args(argv)
    out = args.out / time.strftime("%Y%m%d-%H%M%S")
    try:
        report = run(out, workers=args.workers, timeout_s=args.timeout)
    except DeployError as exc:
        print(f"deploy test FAILED: {exc}", file=sys.stderr)
        return 1
    say(json.dumps(asdict(report), indent=2))
    say(f"deploy test passed in {report.seconds:g} s: {out}")
    return 0
