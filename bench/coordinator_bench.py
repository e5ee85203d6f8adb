"""Coordinator benchmark: sustained reports per second, decision latency from a report that changes
the intent to the intent reaching the controller, and the time a controller restarted without its state
file takes to get the coordinator's decision back onto a switch. Prints figures; asserts nothing.

The coordinator runs as a separate process (``python -m mlfc.coordinator.cli run``, SQLite on a temporary
file, synchronous=FULL unless --sync normal); the clients and a fake IntentService (the controller side,
timestamps taken in this process) run here. The restart part runs a real ``mlfc-controller`` driving an
``mlfc-refswitch`` (it needs the committed p4src/build outputs).

With TLS (default on; --no-tls skips it) the report rates are measured again on two fresh coordinators side by
side, one serving TLS (certificates from scripts/make-certs.sh) and one plain text, alternating between them so
both see the same machine: issue 48's target is TLS >= 50 % of plain text.

    python bench/coordinator_bench.py [--duration 3] [--sync full|normal] [--restarts 10] [--no-tls]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc
from dev_certs import client_tls, make_dev_certs, server_flags, server_tls
from summary import Row, record, verdict

from mlfc.coordinator.client import CoordinatorClient
from mlfc.hosts.agent import Agent
from mlfc.proto import coordinator_pb2 as pb
from mlfc.proto import intent_pb2, intent_pb2_grpc
from mlfc.tls import TlsConfig, add_port

TOKEN = "bench-token"


class FakeController(intent_pb2_grpc.IntentServiceServicer):
    def __init__(self) -> None:
        self.cv = threading.Condition()
        self.intents: list[tuple[float, intent_pb2.Intent]] = []

    def Apply(self, request, context):  # type: ignore[no-untyped-def]
        now = time.perf_counter()
        with self.cv:
            self.intents.append((now, request))
            self.cv.notify_all()
        return intent_pb2.ApplyReply(generation=len(self.intents))

    def wait_for(self, start_index: int, pred, timeout: float = 5.0) -> float | None:  # type: ignore[no-untyped-def]
        """Receipt time of the first intent at or after ``start_index`` satisfying ``pred``."""
        end = time.monotonic() + timeout
        with self.cv:
            while True:
                for t, intent in self.intents[start_index:]:
                    if pred(intent):
                        return t
                left = end - time.monotonic()
                if left <= 0:
                    return None
                self.cv.wait(left)


def start_coordinator(
    tmp: Path, controller: str, sync: str, tls_flags: list[str] | None = None, db: str = "coord.sqlite"
) -> tuple[subprocess.Popen[str], str]:
    """``tls_flags``: serve TLS (and reach the controller over TLS) with these --tls-* flags."""
    (tmp / "token").write_text(TOKEN)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlfc.coordinator.cli",
            "run",
            "--db",
            str(tmp / db),
            "--listen",
            "127.0.0.1:0",
            "--controller",
            controller,
            "--token-file",
            str(tmp / "token"),
            "--sync",
            sync,
            *(tls_flags or []),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "listening on" not in line:
        raise SystemExit(f"coordinator did not start: {line!r}")
    return proc, line.rsplit(" ", 1)[1].strip()


def register(client: CoordinatorClient, job_id: int, workers: int) -> None:
    spec = pb.JobSpec(job_id=job_id, name=f"bench{job_id}", workers=[pb.Worker(rank=r) for r in range(workers)])
    client.register(pb.RegisterRequest(job=spec, instance=f"bench-{job_id}"))


def rep(job: int, worker: int, it: int, metric: float | None) -> pb.IterationReport:
    r = pb.IterationReport(
        job_id=job,
        worker=worker,
        iteration=it,
        compute_seconds=0.1,
        comm_seconds=0.05,
        bytes=1_000_000,
        timestamp=time.time(),
    )
    if metric is not None:
        r.metric = metric
    return r


def throughput(
    address: str, first_job: int, jobs: int, batch: int, duration: float, clients: int = 2, tls: TlsConfig | None = None
) -> float:
    """Reports/s committed with ``clients`` threads sending pre-built batches of ``batch`` reports."""
    stub = CoordinatorClient(address, token=TOKEN, timeout_s=10, tls=tls)
    ids = list(range(first_job, first_job + jobs))
    for j in ids:
        register(stub, j, workers=4)
    # Pre-build the batches so that building protos does not compete with the coordinator for CPU. Reports
    # of one job must arrive in order, so each client owns its own jobs.
    need = int(40_000 * duration / batch) + 10 if batch > 1 else int(3000 * duration)
    per_client: list[list[pb.ReportBatch]] = [[] for _ in range(clients)]
    its = dict.fromkeys(ids, 0)
    for c in range(clients):
        own = ids[c::clients]
        for n in range(need):
            j = own[n % len(own)]
            reports = []
            for _ in range(batch):
                it = its[j]
                its[j] += 1
                w, i = it % 4, it // 4
                reports.append(rep(j, w, i, 0.9 - 0.8 * (i + 1) ** -0.5 if w == 0 else None))
            per_client[c].append(pb.ReportBatch(reports=reports))
    counts = [0] * clients
    stop = threading.Event()

    def run(c: int) -> None:
        s = CoordinatorClient(address, token=TOKEN, timeout_s=10, tls=tls)
        for b in per_client[c]:
            if stop.is_set():
                return
            counts[c] += s.report(b).accepted

    threads = [threading.Thread(target=run, args=(c,)) for c in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(duration)
    stop.set()
    for t in threads:
        t.join()
    return sum(counts) / (time.perf_counter() - t0)


def agent_throughput(address: str, job: int, n: int) -> tuple[float, float]:
    """End to end through the agent library: (report() calls/s, committed reports/s)."""
    agent = Agent(job, coordinator=address, token=TOKEN, buffer_size=n + 1, batch_size=1024)
    t0 = time.perf_counter()
    for i in range(n):
        agent.report(i, 0.9 - 0.8 * (i + 1) ** -0.5, compute_s=0.1, comm_s=0.05, bytes=1_000_000)
    t_calls = time.perf_counter() - t0
    agent.flush(timeout=120)
    t_all = time.perf_counter() - t0
    agent.finish(timeout=5)
    return n / t_calls, agent.stats().sent / t_all


def decision_latency(address: str, fake: FakeController, rounds: int, base_job: int) -> list[float]:
    """A plateaued 2-worker job whose worker 0 runs 3 iterations ahead (window appears) and then worker 1
    catches up (window goes): each Report call changes the intent. Returns latencies in seconds."""
    stub = CoordinatorClient(address, token=TOKEN, timeout_s=10)
    s, t = base_job, base_job + 1
    register(stub, s, workers=2)
    register(stub, t, workers=1)
    plateau = [rep(s, 0, i, 0.85 - 0.75 * math.exp(-0.08 * i)) for i in range(200)]
    stub.report(pb.ReportBatch(reports=plateau + [rep(s, 1, i, None) for i in range(200)]))
    stub.report(pb.ReportBatch(reports=[rep(t, 0, i, 0.95 - 0.9 * (i + 1) ** -0.35) for i in range(200)]))

    def windows(intent: intent_pb2.Intent) -> int:
        return sum(len(j.windows) for j in intent.jobs if j.job_id == s)

    assert fake.wait_for(0, lambda i: any(j.job_id == t for j in i.jobs) and windows(i) == 0) is not None
    time.sleep(0.2)
    out = []
    n = 200
    for _ in range(rounds):
        for worker, want in ((0, 1), (1, 0)):
            idx = len(fake.intents)
            batch = [rep(s, worker, n + k, 0.85 if worker == 0 else None) for k in range(3)]
            t0 = time.perf_counter()
            stub.report(pb.ReportBatch(reports=batch))
            t1 = fake.wait_for(idx, lambda i, want=want: windows(i) == want)
            if t1 is not None:
                out.append(t1 - t0)
            time.sleep(0.02)
        n += 3
    return out


def background_load(address: str, first_job: int, rate: float, stop: threading.Event) -> None:
    stub = CoordinatorClient(address, token=TOKEN, timeout_s=10)
    jobs = [first_job, first_job + 1]
    for j in jobs:
        register(stub, j, workers=1)
    batch, it, period = 100, 0, 100 / rate
    nxt = time.perf_counter()
    while not stop.is_set():
        for j in jobs:
            stub.report(pb.ReportBatch(reports=[rep(j, 0, it + k, None) for k in range(batch // 2)]))
        it += batch // 2
        nxt += period
        time.sleep(max(0.0, nxt - time.perf_counter()))


def restored(ctl, intent: intent_pb2.Intent) -> bool:  # type: ignore[no-untyped-def]
    """The restarted controller (generations from 0 again) holds ``intent`` and every switch applied it."""
    got = ctl.client.get()
    if got.generation < 1 or got.intent != intent:
        return False
    return all(s.applied_generation >= got.generation for s in ctl.client.status().switches)


def controller_restarts(tmp: Path, sync: str, restarts: int) -> list[float]:
    """Seconds from a restarted controller (no state file) answering to the switch holding the coordinator's
    decision again: a backup P4Runtime client reads the switch's job entries back."""
    import yaml

    from mlfc import contract
    from mlfc.controller.pipeline import Pipeline
    from mlfc.controller.sync import SwitchConnection
    from mlfc.launch.daemons import ControllerProcess
    from mlfc.launch.process import free_port
    from mlfc.launch.switches import RefSwitch

    pipeline = Pipeline.load()
    with RefSwitch("bench-s1", 1, log_file=tmp / "refswitch.log") as sw:
        doc = {
            "switches": [
                {"name": "s1", "grpc_addr": sw.grpc_addr, "device_id": 1, "target": "refswitch",
                 "thrift_port": sw.queue_port, "ports": [1, 2]}
            ],
            "pipeline": {"p4info": str(contract.P4INFO), "device_config": str(contract.BMV2_JSON)},
            "listen": {"intent": f"127.0.0.1:{free_port()}", "metrics": f"127.0.0.1:{free_port()}"},
            "controller": {"reconnect_min_s": 0.05, "reconnect_max_s": 0.5},
        }  # fmt: skip
        (tmp / "deployment.yaml").write_text(yaml.safe_dump(doc))
        ctl = ControllerProcess(tmp / "deployment.yaml", tmp / "controller.log", log_level="WARNING").start()
        coord = None
        try:
            ctl.client.wait_synced(0)
            coord, address = start_coordinator(tmp, ctl.intent_addr, sync)
            stub = CoordinatorClient(address, token=TOKEN, timeout_s=10)
            for j in (1, 2, 3):
                register(stub, j, workers=1)
                curve = [rep(j, 0, i, 0.9 - 0.8 * (i + 1) ** (-0.2 * j)) for i in range(30)]
                stub.report(pb.ReportBatch(reports=curve))

            def job_entries() -> set:
                with SwitchConnection(sw.grpc_addr, 1, pipeline=pipeline, election_id=1).connect() as conn:
                    return set(conn.read_entries([contract.JOB_PRIORITY]))

            deadline = time.monotonic() + 30
            while len(ctl.client.get().intent.jobs) < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(1.0)  # let the decisions settle
            held_intent = ctl.client.get().intent
            ctl.client.wait_synced(ctl.client.get().generation)
            held = job_entries()
            out = []
            for _ in range(restarts):
                ctl.stop()
                ctl.start()
                t0 = time.monotonic()
                while time.monotonic() - t0 < 30:
                    if restored(ctl, held_intent) and job_entries() == held:
                        out.append(time.monotonic() - t0)
                        break
                    time.sleep(0.02)
            return out
        finally:
            if coord is not None:
                coord.terminate()
                coord.wait(timeout=10)
            ctl.stop()


BATCHES = (1, 16, 128, 512)
TLS_SHARE_TARGET = 0.5  # issue 48: the report rate over TLS, as a share of plain text's in the same run


def tls_throughput(tmp: Path, sync: str, duration: float, trials: int = 3) -> None:
    """The report rates over TLS against plain text's, in the same conditions: two fresh coordinators (one
    serving TLS, its fake controller too; one plain) run side by side and the measurements alternate between
    them, ``trials`` each per batch size; the medians are compared."""
    certs = make_dev_certs(tmp / "certs", "coord", "ctl")
    fake = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    intent_pb2_grpc.add_IntentServiceServicer_to_server(FakeController(), fake)
    tls_port = add_port(fake, "127.0.0.1:0", server_tls(certs, "ctl"))
    plain_port = add_port(fake, "127.0.0.1:0", None)
    fake.start()
    procs = []
    try:
        proc, plain_addr = start_coordinator(tmp, f"127.0.0.1:{plain_port}", sync, None, "plain.sqlite")
        procs.append(proc)
        proc, tls_addr = start_coordinator(
            tmp, f"127.0.0.1:{tls_port}", sync, server_flags(certs, "coord"), "tls.sqlite"
        )
        procs.append(proc)
        print(f"\nreports/s over TLS against plain text (two fresh coordinators, alternating, median of {trials}):")
        job = 1000
        for batch in BATCHES:
            rates: dict[str, list[float]] = {"plain": [], "tls": []}
            for _ in range(trials):
                for kind, address, tls in (("plain", plain_addr, None), ("tls", tls_addr, client_tls(certs))):
                    rates[kind].append(throughput(address, job, 8, batch, duration, tls=tls))
                    job += 8
            plain, rate = statistics.median(rates["plain"]), statistics.median(rates["tls"])
            share = rate / plain
            print(f"  batch {batch:4d} reports/RPC: plain {plain:10,.0f}, TLS {rate:10,.0f} reports/s = {share:5.0%}")
            # issue 48's target: over TLS at least half the plain-text rate, measured in the same run
            record(Row(f"coordinator: reports/s over TLS, batch {batch} reports/RPC", f"{rate:,.0f} reports/s",
                       f"plain text {plain:,.0f} reports/s", f"{share:.0%}", ">= 50 % of plain text",
                       verdict(share >= TLS_SHARE_TARGET), rate, "reports/s", plain, round(share, 3)))  # fmt: skip
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=10)
        fake.stop(0)


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=3.0, help="seconds per throughput run")
    ap.add_argument("--rounds", type=int, default=50, help="latency rounds (2 intent changes each)")
    ap.add_argument("--sync", choices=("full", "normal"), default="full")
    ap.add_argument("--restarts", type=int, default=10, help="controller restarts without state (0: skip)")
    ap.add_argument("--no-tls", dest="tls", action="store_false", help="skip the report rates over TLS")
    args = ap.parse_args()

    fake = FakeController()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    intent_pb2_grpc.add_IntentServiceServicer_to_server(fake, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    with tempfile.TemporaryDirectory() as tmp:
        proc, address = start_coordinator(Path(tmp), f"127.0.0.1:{port}", args.sync)
        try:
            print(
                f"coordinator bench: {os.cpu_count()} CPUs, SQLite synchronous={args.sync.upper()}, "
                f"coordinator in its own process, clients + fake controller in this one"
            )
            print("\nreports/s sustained (2 client threads, 8 jobs x 4 workers, metric on worker 0):")
            job = 1
            for batch in BATCHES:
                rate = throughput(address, job, 8, batch, args.duration)
                job += 8
                print(f"  batch {batch:4d} reports/RPC: {rate:10,.0f} reports/s")
            calls, committed = agent_throughput(address, 1000, 50_000)
            print(
                f"  Agent library, 50,000 reports: report() {calls:,.0f} calls/s, "
                f"committed end to end {committed:,.0f} reports/s"
            )

            lat = decision_latency(address, fake, args.rounds, 2000)
            print(f"\ndecision latency, report changing the intent -> Apply received ({len(lat)} samples, idle):")
            print(
                f"  median {statistics.median(lat) * 1e3:.2f} ms, p90 {pct(lat, 0.9) * 1e3:.2f} ms, "
                f"max {max(lat) * 1e3:.2f} ms"
            )
            stop = threading.Event()
            bg = threading.Thread(target=background_load, args=(address, 3000, 5000.0, stop))
            bg.start()
            time.sleep(0.5)
            try:
                lat = decision_latency(address, fake, args.rounds, 2100)
            finally:
                stop.set()
                bg.join()
            print(f"decision latency under a 5,000 reports/s background load ({len(lat)} samples):")
            print(
                f"  median {statistics.median(lat) * 1e3:.2f} ms, p90 {pct(lat, 0.9) * 1e3:.2f} ms, "
                f"max {max(lat) * 1e3:.2f} ms"
            )
        finally:
            proc.terminate()
            proc.wait(timeout=10)
            server.stop(0)
    if args.tls:
        with tempfile.TemporaryDirectory() as tmp:
            tls_throughput(Path(tmp), args.sync, args.duration)
    if args.restarts:
        with tempfile.TemporaryDirectory() as tmp:
            back = controller_restarts(Path(tmp), args.sync, args.restarts)
        print(f"\ncontroller restarted without state_file, {args.restarts} times (mlfc-controller + mlfc-refswitch):")
        if back:
            print(
                f"  decision back on the switch after the controller listens: median {statistics.median(back):.2f} s, "
                f"max {max(back):.2f} s ({len(back)} of {args.restarts} restarts recovered within 30 s)"
            )
        else:
            print("  not recovered within 30 s in any restart")


if __name__ == "__main__":
    main()
