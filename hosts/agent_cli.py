"""``mlfc-agent``: run a training command and report the metrics it prints to the coordinator.

    mlfc-agent --job 7 --token-file /run/mlfc/token --worker 0=10.0.0.1 --worker 1=10.0.0.2 \\
        --bytes-per-iteration 25000000 -- python train.py --lr 0.1

The child's stdout is passed through unchanged. A line is a report when it is
  * a JSON object with an ``iteration`` (or ``iter``/``step``) key, e.g.
    ``{"iteration": 12, "accuracy": 0.53, "compute_s": 0.12, "comm_s": 0.05, "bytes": 25000000}``, or
  * ``key=value`` (or ``key: value``) pairs, e.g. ``iter=12 acc=0.53 compute=0.12 comm=0.05 bytes=25000000``, or
  * a match of ``--pattern`` with named groups ``iteration`` and optionally ``metric``, ``compute``,
    ``comm``, ``bytes``, ``worker``.
Lines the agent cannot use (no iteration, NaN metric, iteration not increasing) are reported on stderr and
skipped. The exit status is the child's (128 + signal if it was killed).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from prometheus_client import CollectorRegistry

from mlfc.policy.mltcp import F_HELP, f_argument, parse_params
from mlfc.tls import add_tls_arguments, tls_from_args

from .agent import DEFAULT_COORDINATOR, Agent, Flow, Worker
from .agent_metrics import AgentMetrics, IterationSample, start_metrics_server

_KV = re.compile(r"([A-Za-z_]+)\s*[=:]\s*([^\s,;]+)")
_ITER_KEYS = ("iteration", "iter", "step")
_METRIC_KEYS = {"accuracy": ("accuracy", "acc", "metric"), "loss": ("loss", "metric")}
_FIELDS = {"compute": ("compute_s", "compute"), "comm": ("comm_s", "comm"), "bytes": ("bytes",), "worker": ("worker",)}
# What a training worker's record says beyond the report, for --metrics-listen (hosts/agent_metrics.py): optional,
# a value that does not parse is left out rather than costing the line its report.
_EXTRAS = {"sent_bytes": int, "chunks": int, "withheld_chunks": int, "bytes_ratio": float, "mltcp_f": float}


def parse_line(line: str, metric: str, pattern: re.Pattern[str] | None = None) -> dict[str, Any] | None:
    """The report a line carries: keys iteration, metric, compute, comm, bytes, worker (absent ones missing)."""
    raw: dict[str, str] = {}
    if pattern is not None:
        m = pattern.search(line)
        if not m:
            return None
        raw = {k: v for k, v in m.groupdict().items() if v is not None}
    else:
        s = line.strip()
        if s.startswith("{"):
            try:
                obj = json.loads(s)
            except ValueError:
                obj = None
            if isinstance(obj, dict):
                raw = {str(k).lower(): str(v) for k, v in obj.items()}
        if not raw:
            raw = {k.lower(): v for k, v in _KV.findall(line)}
        out = {}
        for k in _ITER_KEYS:
            if k in raw:
                out["iteration"] = raw[k]
                break
        for k in _METRIC_KEYS[metric]:
            if k in raw:
                out["metric"] = raw[k]
                break
        for name, keys in _FIELDS.items():
            for k in keys:
                if k in raw:
                    out[name] = raw[k]
                    break
        out.update({k: raw[k] for k in _EXTRAS if k in raw})
        raw = out
    if "iteration" not in raw:
        return None
    try:
        rep: dict[str, Any] = {"iteration": int(raw["iteration"])}
        if "metric" in raw:
            rep["metric"] = float(raw["metric"])
        for name in ("compute", "comm"):
            if name in raw:
                rep[name] = float(raw[name])
        for name in ("bytes", "worker"):
            if name in raw:
                rep[name] = int(raw[name])
    except ValueError:
        return None
    for name, kind in _EXTRAS.items():
        try:
            value = kind(raw[name]) if name in raw else None
        except ValueError:
            value = None
        if value is not None and 0 <= value < math.inf:
            rep[name] = value
    return rep


def _worker(spec: str) -> tuple[int, str]:
    rank, _, addr = spec.partition("=")
    if not rank.isdigit():
        raise argparse.ArgumentTypeError(f"--worker {spec!r}: expected RANK=ADDRESS, e.g. 0=10.0.0.1")
    return int(rank), addr


def _flow(spec: str) -> tuple[int, Flow]:
    rank, sep, rest = spec.partition(":")
    parts = rest.split(",")
    if not sep or not rank.isdigit() or not 1 <= len(parts) <= 5:
        raise argparse.ArgumentTypeError(f"--flow {spec!r}: expected RANK:SRC,DST[,PROTO[,SPORT[,DPORT]]]")
    parts += [""] * (5 - len(parts))
    try:
        nums = [int(p) if p else 0 for p in parts[2:]]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--flow {spec!r}: protocol and ports must be integers") from None
    return int(rank), Flow(parts[0], parts[1], *nums)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mlfc-agent", description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--job", type=int, required=True, help="job id 1..65535 (the shim's job_id)")
    p.add_argument("--coordinator", default=DEFAULT_COORDINATOR, help="coordinator address (%(default)s)")
    p.add_argument("--token-file", required=True, help="file holding the coordinator's token")
    p.add_argument("--name", default="", help="job name shown by the coordinator")
    p.add_argument("--metric", choices=("accuracy", "loss"), default="accuracy")
    p.add_argument(
        "--worker", type=_worker, action="append", default=[], metavar="RANK=ADDR", help="a worker of the job (repeat)"
    )
    p.add_argument(
        "--flow",
        type=_flow,
        action="append",
        default=[],
        metavar="RANK:SRC,DST[,PROTO[,SPORT[,DPORT]]]",
        help="an untagged flow of a worker (repeat)",
    )
    p.add_argument("--bytes-per-iteration", type=int, default=0)
    p.add_argument("--final-iteration", type=int, default=0, help="number of the last iteration (0 unknown)")
    p.add_argument("--report-worker", type=int, default=0, help="worker rank of lines without a worker key")
    p.add_argument("--no-register", action="store_true", help="only report (another agent registers the job)")
    p.add_argument("--replace", action="store_true", help="take over a job registered by another agent")
    p.add_argument("--pattern", help="regex with named groups iteration, metric, compute, comm, bytes, worker")
    p.add_argument("--buffer", type=int, default=10_000, help="reports buffered while the coordinator is down")
    p.add_argument("--finish-timeout", type=float, default=5.0, help="seconds to flush at exit")
    p.add_argument(
        "--ack-log",
        default=None,
        metavar="FILE",
        help="append one JSON line per batch the coordinator answered: {job, committed, reports: [[worker, "
        "iteration], ...]} (an audit of what was acknowledged; survives this agent being killed)",
    )
    p.add_argument(
        "--metrics-listen",
        metavar="HOST:PORT",
        help="serve Prometheus /metrics here (port 0: any free port, printed on stderr; loopback unless "
        "--allow-remote; docs/metrics.md); omit for none",
    )
    p.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --metrics-listen address")
    p.add_argument(
        "--mltcp-f",
        type=f_argument,
        metavar="F",
        help="derive the metrics' F from bytes_ratio for lines that carry no mltcp_f: " + F_HELP.split(" (")[0],
    )
    p.add_argument("-v", "--verbose", action="store_true")
    add_tls_arguments(p, "client")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    return p


def _ack_logger(path: str, job: int):
    out = open(path, "a", buffering=1)  # noqa: SIM115  # one line per write, open for the agent's lifetime

    def log_ack(reports, committed: bool) -> None:
        row = {"job": job, "time": time.time(), "committed": committed,
               "reports": [[r.worker, r.iteration] for r in reports]}  # fmt: skip
        out.write(json.dumps(row) + "\n")

    return log_ack


def _start_metrics(agent: Agent, args: argparse.Namespace) -> tuple[AgentMetrics | None, object | None]:
    """The agent's metrics and their server, with --metrics-listen; (None, None) without."""
    if not args.metrics_listen:
        return None, None
    mltcp = parse_params(args.mltcp_f) if args.mltcp_f else None
    metrics = AgentMetrics(agent, CollectorRegistry(), args.bytes_per_iteration, mltcp)
    server, port = start_metrics_server(metrics, args.metrics_listen, args.allow_remote)
    print(f"mlfc-agent: metrics on {args.metrics_listen.rpartition(':')[0]}:{port}", file=sys.stderr, flush=True)
    return metrics, server


def _sample(rep: dict[str, Any], default_worker: int) -> IterationSample:
    """The metrics' view of a parsed line (parse_line's keys)."""
    extras = {k: rep[k] for k in _EXTRAS if k in rep}
    return IterationSample(
        worker=rep.get("worker", default_worker),
        iteration=rep["iteration"],
        bytes=rep.get("bytes", 0),
        compute_s=rep.get("compute", 0.0),
        comm_s=rep.get("comm", 0.0),
        **extras,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="mlfc-agent: %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        print("mlfc-agent: no command given (mlfc-agent ... -- COMMAND [ARGS...])", file=sys.stderr)
        return 2
    pattern = re.compile(args.pattern) if args.pattern else None
    flows: dict[int, list[Flow]] = {}
    for rank, flow in args.flow:
        flows.setdefault(rank, []).append(flow)
    workers = [Worker(rank, addr, flows=flows.pop(rank, [])) for rank, addr in args.worker]
    workers += [Worker(rank, flows=fl) for rank, fl in flows.items()]
    try:
        agent = Agent(
            args.job,
            coordinator=args.coordinator,
            token_file=args.token_file,
            name=args.name,
            metric=args.metric,
            workers=workers,
            bytes_per_iteration=args.bytes_per_iteration,
            final_iteration=args.final_iteration,
            register=not args.no_register,
            replace=args.replace,
            worker=args.report_worker,
            buffer_size=args.buffer,
            finish_timeout_s=args.finish_timeout,
            on_ack=_ack_logger(args.ack_log, args.job) if args.ack_log else None,
            tls=tls_from_args(args),
        )
    except (OSError, ValueError) as e:
        print(f"mlfc-agent: {e}", file=sys.stderr)
        return 2
    try:
        metrics, metrics_server = _start_metrics(agent, args)
    except (OSError, ValueError) as e:
        print(f"mlfc-agent: metrics: {e}", file=sys.stderr)
        agent.close()
        return 2
    agent.start()
    try:
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, bufsize=1)
    except OSError as e:
        print(f"mlfc-agent: cannot run {cmd[0]!r}: {e}", file=sys.stderr)
        agent.close()
        return 127

    def forward(signum: int, _frame: object) -> None:
        child.send_signal(signum)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, forward)
    assert child.stdout is not None
    for line in child.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        rep = parse_line(line, args.metric, pattern)
        if rep is None:
            continue
        try:
            agent.report(
                rep["iteration"],
                rep.get("metric"),
                worker=rep.get("worker"),
                compute_s=rep.get("compute", 0.0),
                comm_s=rep.get("comm", 0.0),
                bytes=rep.get("bytes", 0),
            )
        except ValueError as e:
            print(f"mlfc-agent: skipped line {line.strip()!r}: {e}", file=sys.stderr)
            continue
        if metrics is not None:
            metrics.observe(_sample(rep, args.report_worker))
    rc = child.wait()
    code = 128 - rc if rc < 0 else rc
    delivered = agent.finish("" if rc == 0 else f"command exited with status {code}")
    st = agent.stats()
    print(
        f"mlfc-agent: job {args.job}: {st.sent} report(s) committed, {st.duplicates} duplicate(s), "
        f"{st.dropped} dropped (buffer full), {st.rejected} rejected, {st.buffered} undelivered"
        + ("" if delivered else f"; last error: {st.last_error or 'flush timed out'}"),
        file=sys.stderr,
    )
    if metrics_server is not None:
        metrics_server.shutdown()  # type: ignore[attr-defined]
    return code


if __name__ == "__main__":
    sys.exit(main())
