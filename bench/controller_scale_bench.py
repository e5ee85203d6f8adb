"""Controller scaling curves (issue 18, item 3): figures printed, tables + plot written, nothing asserted.

    python bench/controller_scale_bench.py [--switches 1,2,4,8] [--entries 1000,3000,5500]
        [--kind ref] [--bmv2-switches 1,2] [--restarts 2] [--out results/bench] [--quick]

1. Converge: the daemon (``mlfc-controller run``, a child process) drives S switches; an intent compiling
   to N entries per switch is applied from the empty intent and the Apply call returns once every switch
   holds it (apply_timeout_s is raised so that the reply means "converged"). Entries/s = S x N / time;
   the delete back to the empty intent is timed too. Daemon resident memory after each point.
2. Restart: one switch holding N entries is killed (SIGKILL) and started again on the same ports; time from
   the switch listening again to the controller reporting it in sync (pipeline, every entry rewritten).
3. Controller CPU beyond a switch's capacity: compile + encode + diff of 1k / 10k / 50k entries in this
   process (no switch), and the daemon's answer to an intent that does not fit.
4. Anchor: p4runtime-shell (its own venv, ``make shell-venv``) writing the same entries one by one to a fresh
   switch, against the daemon's batched writes of them.

Table sizes: the committed mlfc.p4 holds at most 7,680 entries per switch (mlfc/contract.py: routes 1024,
flows 1024, job_priority 1024, ecn_profile 4096, congestion levels 256, drop thresholds 256), so the switch
curves stop below that; 10k and 50k entries per switch are measured on the controller's own CPU path (3.)
and the daemon's refusal is printed. A deployment may compile larger tables (mlfc/pipeline_sizes.py):
bench/refswitch_bench.py writes 50,000 entries into one switch at such sizes.

Reference switches (``mlfc-refswitch``) by default: two cores cannot carry eight BMv2 processes, and the
curve is about the controller. With BMv2 installed the 1- and 2-switch points are also run on BMv2.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
import psutil
import yaml
from scaling import Curve, markdown_table, plot_curves, verdicts_table, write_csv
from summary import Row, record

from mlfc import contract
from mlfc.controller import compile as cc
from mlfc.controller import reconcile
from mlfc.controller.config import DeploymentConfig, load_config
from mlfc.controller.entries import Exact, Lpm, Range, TableEntry, Ternary
from mlfc.controller.pipeline import Pipeline
from mlfc.launch.daemons import ControllerProcess
from mlfc.launch.process import free_port
from mlfc.launch.switches import SWITCHES, bmv2_missing
from mlfc.policy.ecn import EcnProfile
from mlfc.proto import intent_pb2 as pb

REPO = Path(__file__).resolve().parents[1]
SHELL_PY = REPO / ".venv-shell" / "bin" / "python"
JOB_SHARE = 0.4  # of the entries: jobs (a job entry, a window and two flows each); the rest ECN profiles
MAX_JOBS_FITTING = 500  # 2 job_priority + 2 flows entries per job: both tables (1024) stay inside their size
ECN_STEPS = 120  # depth steps per port profile: about as many ecn_profile entries per port


# ---- intents of a given size ---------------------------------------------------------------------


def ecn_profile(steps: int) -> pb.EcnProfile:
    return pb.EcnProfile(kmin=1, kmax=1 + steps, pmax=1.0)


def ecn_entries_for(steps: int) -> int:
    """Entries one port's profile of ``steps`` compiles to (the compiler is the source of truth)."""
    return len(cc.ecn_entries({1: EcnProfile(kmin=1, kmax=1 + steps, pmax=1.0)}))


def sized_intent(n: int, config: DeploymentConfig, max_jobs: int | None = MAX_JOBS_FITTING) -> pb.Intent:
    """An intent that compiles to about ``n`` entries per switch of ``config``: jobs with a window and two
    flows, the rest per-port ECN profiles. ``max_jobs=None`` lets jobs grow past the switch's table sizes
    (for the CPU-only curve)."""
    jobs = int(n * JOB_SHARE) // 4
    if max_jobs is not None:
        jobs = min(jobs, max_jobs)
    intent = pb.Intent(source=f"scale-{n}")
    for j in range(1, jobs + 1):
        dst = f"10.{(j >> 8) & 0xFF}.{j & 0xFF}.0/24"
        intent.jobs.append(
            pb.JobIntent(
                job_id=j,
                priority=1 + j % 5,
                windows=[pb.IterationWindow(first=0, last=9, priority=6)],
                flows=[pb.Flow(dst=dst, protocol=17), pb.Flow(dst=dst, protocol=6)],
            )
        )
    left = n - cc.compile_intent(intent, config).entries_per_switch
    port = 1
    while port <= contract.MAX_PORT:
        steps = ECN_STEPS
        while steps > 1 and ecn_entries_for(steps) > left:
            steps -= 1
        if ecn_entries_for(steps) > left:
            break
        intent.ecn.append(pb.PortEcn(port=port, profile=ecn_profile(steps)))
        left -= ecn_entries_for(steps)
        port += 1
    return intent


def deployment(tmp: Path, switches: list, name: str = "deployment.yaml") -> Path:
    doc = {
        "pipeline": {"p4info": str(contract.P4INFO), "device_config": str(contract.BMV2_JSON)},
        "listen": {"intent": f"127.0.0.1:{free_port()}", "metrics": f"127.0.0.1:{free_port()}"},
        # Apply's reply then means "every switch converged"; audits are out of the way of the timings.
        "controller": {"apply_timeout_s": 300.0, "audit_interval_s": 3600.0, "reconnect_min_s": 0.05,
                       "reconnect_max_s": 0.5, "probe_interval_s": 0.05},
        "switches": [
            {"name": f"s{i + 1}", "grpc_addr": sw.grpc_addr, "device_id": sw.device_id, "target": sw.target,
             "thrift_port": sw.queue_port}
            for i, sw in enumerate(switches)
        ],
    }  # fmt: skip
    path = tmp / name
    path.write_text(yaml.safe_dump(doc))
    return path


def entries_per_switch(intent: pb.Intent, config: DeploymentConfig) -> int:
    return cc.compile_intent(intent, config).entries_per_switch


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its children so far."""
    proc = psutil.Process(pid)
    t = proc.cpu_times()
    return t.user + t.system + sum(c.cpu_times().user + c.cpu_times().system for c in proc.children(recursive=True))


def rss_mib(pid: int) -> tuple[float, float]:
    """(resident now, peak) in MiB."""
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    peak_kb = int(next(line.split()[1] for line in status if line.startswith("VmHWM")))
    return psutil.Process(pid).memory_info().rss / 2**20, peak_kb / 1024


# ---- 1. converge on S switches ---------------------------------------------------------------------


def converge_curve(kind: str, n_switches: int, sizes: list[int], tmp: Path, restarts: int) -> list[dict]:
    """One controller, ``n_switches`` switches of ``kind``; every size applied from empty. With ``restarts``,
    switch s1 is also killed and restarted at every size (the reconcile-after-restart curve)."""
    rows = []
    switches = [SWITCHES[kind](f"s{i + 1}", 1, log_file=tmp / f"{kind}-s{i + 1}.log") for i in range(n_switches)]
    try:
        for sw in switches:
            sw.start()
        cfg = deployment(tmp, switches, f"deploy-{kind}-{n_switches}.yaml")
        with ControllerProcess(cfg, tmp / f"controller-{kind}-{n_switches}.log", log_level="WARNING") as ctl:
            ctl.client.wait_synced(0, timeout_s=60)
            idle_rss, _ = rss_mib(ctl.pid)
            config = load_config(cfg)
            for n in sizes:
                intent = sized_intent(n, config)
                per_switch = entries_per_switch(intent, config)
                cpu0 = cpu_seconds(ctl.pid), sum(cpu_seconds(sw.pid) for sw in switches)
                t0 = time.perf_counter()
                reply = ctl.client.apply(intent, timeout_s=600)
                install_s = time.perf_counter() - t0
                daemon_cpu = cpu_seconds(ctl.pid) - cpu0[0]
                switch_cpu = sum(cpu_seconds(sw.pid) for sw in switches) - cpu0[1]
                if reply.unconverged:
                    raise RuntimeError(f"{kind} x{n_switches}, {n}: not converged: {reply.unconverged}")
                ctl.client.wait_synced(reply.generation, timeout_s=60)
                rss, peak = rss_mib(ctl.pid)
                restart_ms = [restart_once(ctl, switches[0], reply.generation) for _ in range(restarts)]
                t0 = time.perf_counter()
                back = ctl.client.apply(pb.Intent(source="empty"), timeout_s=600)
                delete_s = time.perf_counter() - t0
                if back.unconverged:
                    raise RuntimeError(f"{kind} x{n_switches}: delete not converged: {back.unconverged}")
                row = {
                    "kind": kind, "switches": n_switches, "entries_per_switch": per_switch,
                    "entries_total": per_switch * n_switches, "install_s": install_s,
                    "entries_per_s": per_switch * n_switches / install_s, "delete_s": delete_s,
                    "daemon_rss_mib": rss, "daemon_peak_mib": peak, "daemon_idle_mib": idle_rss,
                    "restart_ms": statistics.median(restart_ms) if restart_ms else float("nan"),
                    "daemon_cpu_s": daemon_cpu, "switch_cpu_s": switch_cpu,
                }  # fmt: skip
                rows.append(row)
                extra = f", restart -> in sync {row['restart_ms']:.0f} ms (median of {restarts})" if restarts else ""
                print(
                    f"  {kind} x{n_switches}: {per_switch:5d} entries/switch: converged in {install_s:6.2f} s"
                    f" = {row['entries_per_s']:7,.0f} entries/s (CPU: daemon {daemon_cpu:.2f} s, switches"
                    f" {switch_cpu:.2f} s); delete {delete_s:5.2f} s;"
                    f" daemon {rss:.0f} MiB (idle {idle_rss:.0f}){extra}",
                    flush=True,
                )
    finally:
        for sw in switches:
            sw.kill()
    return rows


def restart_once(ctl: ControllerProcess, sw, generation: int) -> float:  # type: ignore[no-untyped-def]
    """Crash ``sw`` and start it again; ms from it listening to the controller having it in sync."""
    sw.kill()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        st = next(s for s in ctl.client.status().switches if s.name == sw.name)
        if not st.connected:
            break
        time.sleep(0.02)
    sw.start()
    listening = time.monotonic()
    ctl.client.wait_synced(generation, timeout_s=300)
    return (time.monotonic() - listening) * 1000


# ---- 3. the controller's own CPU path past the table sizes ----------------------------------------


def cpu_curve(sizes: list[int], tmp: Path) -> list[dict]:
    """compile (validate + policy -> entries), encode (entries -> P4Runtime protos) and diff (against a
    read-back that differs in half the entries) for one switch, in this process."""
    pipeline = Pipeline.load()
    cfg = load_config(deployment(tmp, [SWITCHES["ref"]("s1", 1)], "cpu.yaml"))
    rows = []
    for n in sizes:
        intent = sized_intent(n, cfg, max_jobs=None)
        gc.collect()
        t0 = time.perf_counter()
        compiled = cc.compile_intent(intent, cfg)  # no pipeline: no capacity check
        compile_s = time.perf_counter() - t0
        entries = compiled.entries["s1"]
        t0 = time.perf_counter()
        for e in entries:
            pipeline.encode(e)
        encode_s = time.perf_counter() - t0
        actual = [e if i % 2 else _changed(e) for i, e in enumerate(entries)]
        t0 = time.perf_counter()
        d = reconcile.diff(entries, actual)
        diff_s = time.perf_counter() - t0
        rows.append({"entries": len(entries), "compile_s": compile_s, "encode_s": encode_s, "diff_s": diff_s,
                     "diff_updates": len(d)})  # fmt: skip
        print(
            f"  {len(entries):6d} entries: compile {compile_s * 1000:7.1f} ms, encode {encode_s * 1000:7.1f} ms"
            f" ({len(entries) / encode_s:,.0f}/s), diff {diff_s * 1000:6.1f} ms ({len(d)} updates)",
            flush=True,
        )
    return rows


def _changed(e: TableEntry) -> TableEntry:
    """``e`` with another action value: the diff must modify it."""
    params = tuple((k, v ^ 1) for k, v in e.params) if e.params else e.params
    if params == e.params:
        return TableEntry(e.table, e.match, e.action, e.params, e.priority + 1)  # a different key instead
    return TableEntry(e.table, e.match, e.action, params, e.priority)


def refusal(n: int, tmp: Path) -> str:
    """What the daemon answers to an intent of ``n`` entries per switch (more than mlfc.p4 holds)."""
    sw = SWITCHES["ref"]("s1", 1, log_file=tmp / "refusal-switch.log")
    with sw:
        cfg = deployment(tmp, [sw], "refusal.yaml")
        with ControllerProcess(cfg, tmp / "refusal-controller.log", log_level="WARNING") as ctl:
            ctl.client.wait_synced(0, timeout_s=60)
            try:
                ctl.client.apply(sized_intent(n, load_config(cfg), max_jobs=None), timeout_s=120)
            except grpc.RpcError as exc:
                return f"{exc.code().name}: {exc.details()}"  # type: ignore[attr-defined]
            return "accepted (unexpected: the intent exceeds the tables)"


# ---- 4. anchor: p4runtime-shell, one entry per Write ----------------------------------------------


def shell_spec(e: TableEntry) -> dict:
    """An entry as p4runtime-shell's TableEntry API takes it (strings per match kind)."""
    match = {}
    for name, m in e.match:
        if isinstance(m, Exact):
            match[name] = str(m.value)
        elif isinstance(m, Lpm):
            match[name] = f"{m.value}/{m.prefix_len}"
        elif isinstance(m, Ternary):
            match[name] = f"{m.value}&&&{m.mask}"
        elif isinstance(m, Range):
            match[name] = f"{m.lo}..{m.hi}"
        else:
            raise TypeError(f"unknown match kind {m!r}")
    return {"table": e.table, "action": e.action, "match": match, "params": {k: str(v) for k, v in e.params},
            "priority": e.priority}  # fmt: skip


def shell_anchor(kind: str, n: int, tmp: Path) -> dict | None:
    """Entries/s of p4runtime-shell inserting the entries of ``sized_intent(n)`` one by one into a fresh
    switch, and of the daemon applying the same intent to another fresh switch of the same kind."""
    if not SHELL_PY.exists():
        print("  p4runtime-shell anchor skipped: .venv-shell missing (make shell-venv)")
        return None
    with SWITCHES[kind]("anchor", 1, log_file=tmp / "anchor-shell-switch.log") as sw:
        cfg = deployment(tmp, [sw], "anchor.yaml")
        intent = sized_intent(n, load_config(cfg))
        entries = cc.compile_intent(intent, load_config(cfg)).entries["s1"]
        spec = tmp / "shell-entries.json"
        spec.write_text(json.dumps([shell_spec(e) for e in entries]))
        res = subprocess.run(
            [str(SHELL_PY), str(Path(__file__).with_name("p4rt_shell_writer.py")), "--grpc-addr", sw.grpc_addr,
             "--p4info", str(contract.P4INFO), "--config", str(contract.BMV2_JSON), "--entries", str(spec)],
            capture_output=True, text=True, timeout=1800,
        )  # fmt: skip
        if res.returncode != 0:
            print(f"  p4runtime-shell anchor failed: {res.stderr.strip()[-800:]}")
            return None
        shell = json.loads(res.stdout.strip().splitlines()[-1])
    with SWITCHES[kind]("anchor", 1, log_file=tmp / "anchor-ctl-switch.log") as sw:
        cfg = deployment(tmp, [sw], "anchor-ctl.yaml")
        with ControllerProcess(cfg, tmp / "anchor-controller.log", log_level="WARNING") as ctl:
            ctl.client.wait_synced(0, timeout_s=60)
            t0 = time.perf_counter()
            reply = ctl.client.apply(intent, timeout_s=600)
            ctl_s = time.perf_counter() - t0
            if reply.unconverged:
                raise RuntimeError(f"anchor: daemon did not converge: {reply.unconverged}")
    out = {"kind": kind, "entries": len(entries), "shell_s": shell["seconds"], "ctl_s": ctl_s,
           "shell_per_s": len(entries) / shell["seconds"], "ctl_per_s": len(entries) / ctl_s}  # fmt: skip
    print(
        f"  {kind}, {len(entries)} entries: p4runtime-shell one by one {out['shell_per_s']:,.0f} entries/s"
        f" ({shell['seconds']:.2f} s); mlfc-controller {out['ctl_per_s']:,.0f} entries/s ({ctl_s:.2f} s);"
        f" ratio {out['ctl_per_s'] / out['shell_per_s']:.1f}x",
        flush=True,
    )
    return out


# ---- report ---------------------------------------------------------------------------------------


def report(conv: list[dict], cpu: list[dict], anchor: dict | None, refused: str, out: Path | None) -> None:
    header = ["switch", "switches", "entries/switch", "entries total", "converge s", "entries/s",
              "daemon CPU s", "switches' CPU s", "delete s", "daemon RSS MiB", "daemon peak MiB",
              "restart -> in sync ms"]  # fmt: skip
    rows = [[r["kind"], r["switches"], r["entries_per_switch"], r["entries_total"], r["install_s"],
             r["entries_per_s"], r["daemon_cpu_s"], r["switch_cpu_s"], r["delete_s"], r["daemon_rss_mib"],
             r["daemon_peak_mib"], r["restart_ms"]] for r in conv]  # fmt: skip
    print("\n" + markdown_table(header, rows))
    cpu_header = ["entries", "compile ms", "encode ms", "diff ms", "encode entries/s"]
    cpu_rows = [[r["entries"], r["compile_s"] * 1e3, r["encode_s"] * 1e3, r["diff_s"] * 1e3,
                 r["entries"] / r["encode_s"]] for r in cpu]  # fmt: skip
    print("\ncontroller CPU path, one switch's entries, no switch attached:\n" + markdown_table(cpu_header, cpu_rows))
    print(f"\nan intent of {cpu[-1]['entries'] if cpu else '?'} entries per switch sent to the daemon: {refused}")

    curves = []
    for kind in sorted({r["kind"] for r in conv}):
        mine = [r for r in conv if r["kind"] == kind]
        biggest = max(r["entries_per_switch"] for r in mine)
        at_big = [r for r in mine if r["entries_per_switch"] == biggest]
        curves.append(Curve(f"{kind}: converge {biggest} entries/switch vs switches", "switches", "seconds",
                            tuple((r["switches"], r["install_s"]) for r in at_big)))  # fmt: skip
        curves.append(Curve(f"{kind}: entries/s vs switches ({biggest}/switch)", "switches", "entries/s",
                            tuple((r["switches"], r["entries_per_s"]) for r in at_big), cost=False))  # fmt: skip
        one = [r for r in mine if r["switches"] == 1]
        curves.append(Curve(f"{kind}: converge on 1 switch vs entries", "entries/switch", "seconds",
                            tuple((r["entries_per_switch"], r["install_s"]) for r in one)))  # fmt: skip
        restarted = [r for r in one if r["restart_ms"] == r["restart_ms"]]
        if restarted:
            curves.append(Curve(f"{kind}: reconcile after switch restart vs entries held", "entries held", "ms",
                                tuple((r["entries_per_switch"], r["restart_ms"]) for r in restarted)))  # fmt: skip
        grown = tuple((r["entries_total"], max(0.1, r["daemon_rss_mib"] - r["daemon_idle_mib"])) for r in mine)
        curves.append(Curve(f"{kind}: daemon RSS above idle vs entries held", "entries held (all switches)",
                            "MiB", grown))  # fmt: skip
    if cpu:
        total = tuple((r["entries"], r["compile_s"] + r["encode_s"] + r["diff_s"]) for r in cpu)
        curves.append(Curve("controller CPU: compile+encode+diff vs entries", "entries", "seconds", total))
    print("\n" + verdicts_table(curves))
    for kind in sorted({r["kind"] for r in conv}):
        big = max((r for r in conv if r["kind"] == kind), key=lambda r: r["entries_total"])
        busy = (big["daemon_cpu_s"] + big["switch_cpu_s"]) / big["install_s"]
        who = "the switches" if big["switch_cpu_s"] > big["daemon_cpu_s"] else "the daemon"
        print(
            f"{kind}, {big['switches']} switches x {big['entries_per_switch']} entries: daemon"
            f" {big['daemon_cpu_s']:.1f} s CPU, switches {big['switch_cpu_s']:.1f} s CPU in {big['install_s']:.1f} s"
            f" = {busy:.1f} of {os.cpu_count()} cores busy; most of the work is {who}"
        )
    print(
        f"\nfirst limit: the switch's tables. mlfc.p4 holds {capacity():,} entries per switch and the daemon refuses"
        " more (above); below that, converge time is set by the switch's write rate (see entries/s vs switches)."
    )
    if anchor:
        ratio = anchor["ctl_per_s"] / anchor["shell_per_s"]
        record(
            Row(
                f"controller: {anchor['entries']} entries into one {anchor['kind']} switch",
                f"{anchor['ctl_per_s']:,.0f} entries/s",
                f"p4runtime-shell one by one {anchor['shell_per_s']:,.0f} entries/s",
                f"{ratio:.1f}x",
                value=anchor["ctl_per_s"],
                unit="entries/s",
                anchor_value=anchor["shell_per_s"],
                ratio_value=ratio,
            )
        )
    for kind in sorted({r["kind"] for r in conv}):
        best = max((r for r in conv if r["kind"] == kind), key=lambda r: (r["switches"], r["entries_per_switch"]))
        record(Row(f"controller: converge {best['entries_total']:,} entries on {best['switches']} {kind} switches",
                   f"{best['install_s']:.2f} s ({best['entries_per_s']:,.0f} entries/s)",
                   value=best["install_s"], unit="s"))  # fmt: skip
    if out:
        write_csv(out / "controller_scale.csv", header, rows)
        write_csv(out / "controller_cpu.csv", cpu_header, cpu_rows)
        (out / "controller_scale.md").write_text(
            markdown_table(header, rows) + "\n\n" + markdown_table(cpu_header, cpu_rows) + "\n\n"
            + verdicts_table(curves) + "\n"
        )  # fmt: skip
        plot_curves(out / "controller_scale.png", curves, "mlfc-controller scaling")
        print(f"wrote {out}/controller_scale.md, controller_scale.csv, controller_cpu.csv, controller_scale.png")


def capacity() -> int:
    return sum(t.size for t in contract.TABLES.values())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--switches", default="1,2,4,8", help="switch counts (reference switches)")
    ap.add_argument(
        "--entries", default="1000,3000,5500", help="entries per switch (at most ~5,900 fit the generated intent)"
    )
    ap.add_argument("--kind", choices=sorted(SWITCHES), default="ref", help="switch for the switch-count curve")
    ap.add_argument("--bmv2-switches", default="1,2", help="also run these switch counts on BMv2 ('' to skip)")
    ap.add_argument("--cpu-entries", default="1000,10000,50000", help="entries for the CPU-only curve")
    ap.add_argument("--restarts", type=int, default=2, help="switch restarts per size on the 1-switch run")
    ap.add_argument("--anchor-entries", type=int, default=1000, help="entries for the p4runtime-shell anchor")
    ap.add_argument("--out", type=Path, default=REPO / "results" / "bench", help="tables and plot here")
    ap.add_argument("--quick", action="store_true", help="switches 1,2,4; entries 1000,3000; 1 restart")
    args = ap.parse_args(argv)
    if args.quick:
        args.switches, args.entries, args.restarts, args.cpu_entries = "1,2,4", "1000,3000", 1, "1000,10000,50000"
        args.bmv2_switches = "1" if args.bmv2_switches else ""
    logging.getLogger("finsy").setLevel(logging.ERROR)
    counts = [int(x) for x in args.switches.split(",") if x]
    sizes = [int(x) for x in args.entries.split(",") if x]
    print(f"controller scaling: {os.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    conv: list[dict] = []
    anchor = None
    with tempfile.TemporaryDirectory(prefix="mlfc-ctlscale-") as tmpdir:
        tmp = Path(tmpdir)
        print("\ncontroller CPU path (compile, encode, diff), beyond the table sizes:", flush=True)
        cpu = cpu_curve([int(x) for x in args.cpu_entries.split(",") if x], tmp)
        refused = refusal(max(10_000, cpu[-1]["entries"] if cpu else 10_000), tmp)
        print(f"  the daemon, given more than fits: {refused}")
        print(f"\nconverge from the empty intent ({args.kind} switches {counts}, entries/switch {sizes}):", flush=True)
        for s in counts:
            conv += converge_curve(args.kind, s, sizes, tmp, args.restarts if s == 1 else 0)
        bmv2_counts = [int(x) for x in args.bmv2_switches.split(",") if x]
        missing = bmv2_missing()
        if bmv2_counts and missing:
            print(f"BMv2 points skipped: {missing}")
        elif bmv2_counts and args.kind != "bmv2":
            print(f"\nthe same on BMv2 (switches {bmv2_counts}):", flush=True)
            for s in bmv2_counts:
                conv += converge_curve("bmv2", s, sizes, tmp, args.restarts if s == 1 else 0)
        print("\nanchor: p4runtime-shell writing the same entries one by one:", flush=True)
        anchor = shell_anchor("bmv2" if not missing else "ref", args.anchor_entries, tmp)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    report(conv, cpu, anchor, refused, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
