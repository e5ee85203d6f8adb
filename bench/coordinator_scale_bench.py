"""Coordinator scaling curves (issue 18, item 3): figures printed, tables + plot written, nothing asserted.

    python bench/coordinator_scale_bench.py [--jobs 10,100,1000,10000] [--agents 1,10,100] [--out results/bench]

1. MAIF decision time and memory against the number of active jobs. Each size runs in a fresh child process:
   an engine (coordinator/engine.py) on a SQLite file, N jobs of 2 workers registered and given a learning
   curve of --points metric points each, then
   * cold: the first evaluation, every curve fitted and every job new to the ranker;
   * all new: the same again with the fits cached (what ranking jobs the ranker has no memory of costs,
     as after a coordinator restart or a burst of new jobs);
   * warm: after one decision, evaluations with nothing changed (fits cached, jobs known: the steady state);
   * one job changed: a report on one job, then an evaluation (one refit + ranking);
   * decide: evaluation + the intent it makes + persisting it (what the decision loop does);
   memory is the child's resident set after loading and after the first decision, less its resident set
   before the engine was made. The intent is then compiled by the controller against mlfc.p4's tables:
   whether a switch could hold it.
2. Reports/s committed with 1, 10 and 100 agents (mlfc.hosts.agent.Agent, one job each, in this process)
   sending to the coordinator in its own process (``python -m mlfc.coordinator.cli run``, SQLite
   synchronous=FULL) for --seconds each; the controller is a stub in this process.
"""

from __future__ import annotations

import argparse
import json
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
import psutil
from coordinator_bench import TOKEN, FakeController, start_coordinator
from scaling import Curve, markdown_table, plot_curves, verdicts_table, write_csv
from summary import Row, record

from mlfc.proto import coordinator_pb2 as pb
from mlfc.proto import intent_pb2_grpc

REPO = Path(__file__).resolve().parents[1]
WORKERS = 2
RANKING_TARGET_S = 0.5  # issue 28: MAIF ranking of 10,000 jobs


def curve_point(job: int, i: int) -> float:
    """A saturating accuracy curve, a different exponent per job so that the ranking has work to do."""
    return 0.95 - 0.85 * (i + 1) ** -(0.15 + (job % 37) / 60)


def load_jobs(engine, n: int, points: int) -> None:  # type: ignore[no-untyped-def]
    now = time.time()
    for j in range(1, n + 1):
        spec = pb.JobSpec(job_id=j, name=f"scale{j}", workers=[pb.Worker(rank=r) for r in range(WORKERS)])
        engine.register(pb.RegisterRequest(job=spec, instance=f"scale-{j}"))
        reports = [
            pb.IterationReport(job_id=j, worker=w, iteration=i, compute_seconds=0.1, comm_seconds=0.05,
                               bytes=1_000_000, timestamp=now, **({"metric": curve_point(j, i)} if w == 0 else {}))
            for i in range(points)
            for w in range(WORKERS)
        ]  # fmt: skip
        engine.report(pb.ReportBatch(reports=reports))


def maif_point(n: int, points: int, repeats: int) -> dict:
    """Run in a child: one size, fresh process (clean memory figures)."""
    from mlfc import contract
    from mlfc.controller import compile as cc
    from mlfc.controller.config import DeploymentConfig, SwitchConfig
    from mlfc.controller.errors import ValidationError
    from mlfc.controller.pipeline import Pipeline
    from mlfc.coordinator import convert
    from mlfc.coordinator.engine import Engine
    from mlfc.coordinator.store import Store

    proc = psutil.Process()
    with tempfile.TemporaryDirectory(prefix="mlfc-maif-") as tmp:
        rss0 = proc.memory_info().rss
        store = Store(Path(tmp) / "coord.sqlite", synchronous="NORMAL")
        engine = Engine(store)
        t0 = time.perf_counter()
        load_jobs(engine, n, points)
        load_s = time.perf_counter() - t0
        rss_loaded = proc.memory_info().rss
        t0 = time.perf_counter()
        decision = engine.evaluate()
        cold_s = time.perf_counter() - t0
        rss_decided = proc.memory_info().rss
        # Fits cached but no decision yet: every job is new to the ranker (as after a restart).
        t0 = time.perf_counter()
        engine.evaluate()
        new_s = time.perf_counter() - t0
        engine.decide()  # the ranker now remembers every job (steady state)
        warm = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            engine.evaluate()
            warm.append(time.perf_counter() - t0)
        one = []
        for k in range(repeats):
            it = points + k
            engine.report(pb.ReportBatch(reports=[
                pb.IterationReport(job_id=1, worker=w, iteration=it, compute_seconds=0.1, comm_seconds=0.05,
                                   bytes=1_000_000, timestamp=time.time(),
                                   **({"metric": curve_point(1, it)} if w == 0 else {}))
                for w in range(WORKERS)
            ]))  # fmt: skip
            t0 = time.perf_counter()
            engine.evaluate()
            one.append(time.perf_counter() - t0)
        decide = []
        for k in range(repeats):
            it = points + repeats + k
            engine.report(pb.ReportBatch(reports=[
                pb.IterationReport(job_id=1 + k % n, worker=w, iteration=it, compute_seconds=0.1,
                                   comm_seconds=0.05, bytes=1_000_000, timestamp=time.time(),
                                   **({"metric": curve_point(1 + k % n, it)} if w == 0 else {}))
                for w in range(WORKERS)
            ]))  # fmt: skip
            t0 = time.perf_counter()
            engine.decide()
            decide.append(time.perf_counter() - t0)
        intent = convert.intent_of(decision)
        config = DeploymentConfig(switches=(SwitchConfig("s1", "127.0.0.1:1"),))
        try:
            compiled = cc.compile_intent(intent, config, Pipeline.load())
            fits = f"fits ({compiled.entries_per_switch} entries per switch)"
        except ValidationError as exc:
            fits = f"does not fit: {exc}"
        store.close()
    return {
        "jobs": n, "points_per_job": points, "load_s": load_s, "cold_s": cold_s, "new_s": new_s,
        "warm_s": statistics.median(warm), "one_changed_s": statistics.median(one),
        "decide_s": statistics.median(decide), "rss_loaded_mib": (rss_loaded - rss0) / 2**20,
        "rss_decided_mib": (rss_decided - rss0) / 2**20, "intent_bytes": intent.ByteSize(),
        "switch_fit": fits, "job_priority_size": contract.JOB_PRIORITY_SIZE,
    }  # fmt: skip


def maif_curve(sizes: list[int], points: int, repeats: int) -> list[dict]:
    rows = []
    for n in sizes:
        res = subprocess.run(
            [sys.executable, __file__, "--maif-one", str(n), "--points", str(points), "--repeats", str(repeats)],
            capture_output=True, text=True, timeout=3600,
        )  # fmt: skip
        if res.returncode != 0:
            raise RuntimeError(f"MAIF point {n} failed: {res.stderr.strip()[-1500:]}")
        r = json.loads(res.stdout.strip().splitlines()[-1])
        rows.append(r)
        print(
            f"  {n:6d} jobs: cold {r['cold_s'] * 1e3:9.1f} ms, all new {r['new_s'] * 1e3:9.1f} ms,"
            f" warm {r['warm_s'] * 1e3:8.2f} ms, one changed"
            f" {r['one_changed_s'] * 1e3:8.2f} ms, decide {r['decide_s'] * 1e3:8.2f} ms;"
            f" memory +{r['rss_decided_mib']:.1f} MiB; intent {r['intent_bytes']:,} B, on a switch: {r['switch_fit']}",
            flush=True,
        )
    return rows


def agents_point(address: str, agents: int, seconds: float, first_job: int) -> dict:
    """``agents`` Agent objects, one job each, reporting as fast as they can queue for ``seconds``."""
    from mlfc.hosts.agent import Agent

    pool = [Agent(first_job + a, coordinator=address, token=TOKEN, buffer_size=200_000, batch_size=512).start()
            for a in range(agents)]  # fmt: skip
    stop = threading.Event()
    queued = [0] * agents

    def drive(k: int) -> None:
        # One driver thread per slice of agents: report() only queues, the agents' own threads send.
        mine = range(k, agents, DRIVERS)
        it = dict.fromkeys(mine, 0)
        while not stop.is_set():
            for a in mine:
                ag = pool[a]
                for _ in range(64):
                    i = it[a]
                    ag.report(i, curve_point(a, i), compute_s=0.1, comm_s=0.05, bytes=1_000_000)
                    it[a] = i + 1
                queued[a] = it[a]
                backlog = it[a] - ag.stats().sent
                if backlog > 20_000:  # keep the buffers bounded: the agent is behind
                    time.sleep(0.001)

    sent0 = 0
    threads = [threading.Thread(target=drive, args=(k,), daemon=True) for k in range(min(DRIVERS, agents))]
    for t in threads:
        t.start()
    time.sleep(0.5)  # warm-up: registrations done, batches flowing
    sent0 = sum(a.stats().sent for a in pool)
    t0 = time.perf_counter()
    time.sleep(seconds)
    sent1 = sum(a.stats().sent for a in pool)
    dt = time.perf_counter() - t0
    stop.set()
    for t in threads:
        t.join()
    for a in pool:
        a.close()
    return {"agents": agents, "reports_per_s": (sent1 - sent0) / dt, "seconds": dt}


DRIVERS = 2


def agents_curve(counts: list[int], seconds: float) -> list[dict]:
    fake = FakeController()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    intent_pb2_grpc.add_IntentServiceServicer_to_server(fake, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    rows = []
    with tempfile.TemporaryDirectory(prefix="mlfc-agents-") as tmp:
        proc, address = start_coordinator(Path(tmp), f"127.0.0.1:{port}", "full")
        try:
            first = 1
            for n in counts:
                c0, w0 = psutil.Process(proc.pid).cpu_times(), time.perf_counter()
                r = agents_point(address, n, seconds, first)
                c1, w1 = psutil.Process(proc.pid).cpu_times(), time.perf_counter()
                # averaged over the whole point (registrations, warm-up and close included)
                r["coordinator_cpu"] = ((c1.user + c1.system) - (c0.user + c0.system)) / (w1 - w0)
                first += n
                rows.append(r)
                print(
                    f"  {n:4d} agents: {r['reports_per_s']:9,.0f} reports/s committed"
                    f" (coordinator process at {r['coordinator_cpu'] * 100:.0f} % of a core)",
                    flush=True,
                )
        finally:
            proc.terminate()
            proc.wait(timeout=10)
            server.stop(0)
    return rows


def report(maif: list[dict], agents: list[dict], out: Path | None) -> None:
    mh = ["jobs", "first decision ms (all fits, all new)", "all new, fits cached ms", "warm ms (fits cached)",
          "one job changed ms", "decide+persist ms", "memory MiB", "intent bytes", "on mlfc.p4"]  # fmt: skip
    keys = ("cold_s", "new_s", "warm_s", "one_changed_s", "decide_s")
    mrows = [[r["jobs"], *(r[k] * 1e3 for k in keys), r["rss_decided_mib"], r["intent_bytes"], r["switch_fit"]]
             for r in maif]  # fmt: skip
    ah = ["agents", "reports/s committed", "coordinator CPU (cores)"]
    arows = [[r["agents"], r["reports_per_s"], r["coordinator_cpu"]] for r in agents]
    if maif:
        print("\n" + markdown_table(mh, mrows))
    if agents:
        print("\n" + markdown_table(ah, arows))
    curves = []
    if maif:
        for key, label in (
            ("cold_s", "first decision (all fits, all jobs new)"),
            ("new_s", "all jobs new to the ranker, fits cached"),
            ("warm_s", "steady decision (fits cached, jobs known)"),
            ("one_changed_s", "decision after one job's report"),
            ("decide_s", "decide + persist"),
        ):
            curves.append(Curve(f"MAIF {label} vs jobs", "jobs", "seconds",
                                tuple((r["jobs"], r[key]) for r in maif)))  # fmt: skip
        curves.append(Curve("coordinator memory vs jobs", "jobs", "MiB",
                            tuple((r["jobs"], max(r["rss_decided_mib"], 0.01)) for r in maif)))  # fmt: skip
    if agents:
        curves.append(Curve("reports/s vs agents", "agents", "reports/s",
                            tuple((r["agents"], r["reports_per_s"]) for r in agents), cost=False))  # fmt: skip
    if curves:
        print("\n" + verdicts_table(curves))
    if maif:
        too_big = [r for r in maif if not r["switch_fit"].startswith("fits")]
        if too_big:
            print(
                f"\nfirst limit: the switch, not the coordinator. From {too_big[0]['jobs']:,} jobs the decision's"
                f" intent no longer fits mlfc.p4's job_priority table ({maif[0]['job_priority_size']:,} entries): "
                f"{too_big[0]['switch_fit']}"
            )
        big = maif[-1]
        # Issue 28's target is the ranking: every job new to the ranker with its fit cached (curve fits are
        # linear, cached, and refitted only when a curve changes); the first decision, fits included, beside it.
        judged = big["jobs"] >= 10_000  # the target is for 10,000 jobs
        met = big["new_s"] < RANKING_TARGET_S
        record(Row(f"coordinator: MAIF ranking, {big['jobs']:,} jobs all new (fits cached)",
                   f"{big['new_s'] * 1e3:,.0f} ms (first decision with every fit {big['cold_s'] * 1e3:,.0f} ms, "
                   f"steady {big['warm_s'] * 1e3:,.1f} ms, +{big['rss_decided_mib']:.0f} MiB)",
                   target=f"< {RANKING_TARGET_S:g} s" if judged else "none",
                   verdict=("met" if met else "missed") if judged else "-",
                   value=big["new_s"], unit="s"))  # fmt: skip
    if agents:
        best = max(agents, key=lambda r: r["reports_per_s"])
        record(Row(f"coordinator: reports/s, {best['agents']} agents (best of {len(agents)} counts)",
                   f"{best['reports_per_s']:,.0f} reports/s", value=best["reports_per_s"],
                   unit="reports/s"))  # fmt: skip
    if out:
        if maif:
            write_csv(out / "coordinator_maif.csv", mh, mrows)
        if agents:
            write_csv(out / "coordinator_agents.csv", ah, arows)
        text = (markdown_table(mh, mrows) + "\n\n" if maif else "") + (
            markdown_table(ah, arows) + "\n\n" if agents else ""
        )
        (out / "coordinator_scale.md").write_text(text + verdicts_table(curves) + "\n")
        plot_curves(out / "coordinator_scale.png", curves, "coordinator scaling")
        print(f"wrote {out}/coordinator_scale.md, coordinator_maif.csv, coordinator_agents.csv, coordinator_scale.png")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", default="10,100,1000,10000", help="active job counts for the MAIF curve")
    ap.add_argument("--points", type=int, default=60, help="metric points per job")
    ap.add_argument("--repeats", type=int, default=5, help="warm / one-changed / decide repetitions (median)")
    ap.add_argument("--agents", default="1,10,100", help="agent counts for the reports/s curve")
    ap.add_argument("--seconds", type=float, default=4.0, help="seconds per agent count")
    ap.add_argument("--out", type=Path, default=REPO / "results" / "bench")
    ap.add_argument("--quick", action="store_true", help="jobs 10,100,1000,10000 with 20 points; 2 s per agent count")
    ap.add_argument("--maif-one", type=int, help=argparse.SUPPRESS)  # internal: one size in a child process
    args = ap.parse_args(argv)
    if args.maif_one:
        print(json.dumps(maif_point(args.maif_one, args.points, args.repeats)))
        return 0
    if args.quick:
        args.points, args.seconds, args.repeats = 20, 2.0, 3
    print(f"coordinator scaling: {os.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    sizes = [int(x) for x in args.jobs.split(",") if x]
    print(f"\nMAIF decision vs active jobs ({WORKERS} workers, {args.points} metric points each):", flush=True)
    maif = maif_curve(sizes, args.points, args.repeats) if sizes else []
    counts = [int(x) for x in args.agents.split(",") if x]
    print(f"\nreports/s committed vs agents ({args.seconds:g} s each, agents in one client process):", flush=True)
    agents = agents_curve(counts, args.seconds) if counts else []
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    report(maif, agents, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
