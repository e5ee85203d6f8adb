"""mlfc-transport: send or receive tagged gradient tensors and print a summary.

    mlfc-transport recv --bind 10.77.1.2:19728 --count 10
    mlfc-transport send --to 10.77.1.2:19728 --bytes 25000000 --job 7 --cc cubic --mltcp --tensors 10
    mlfc-transport build        # the per-chunk loops in C (mlfc.hosts.fastpath; `make install` runs it)

Tensors are float32 random gradients (importance from magnitude, see mlfc.hosts.importance). Each
run sends ``--iterations`` iterations of ``--tensors`` tensors of ``--bytes`` bytes; with --mltcp the
sender declares the iteration size to MLTCP at each iteration start. ``--json`` prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from typing import Any

import numpy as np

from mlfc.hosts import fastpath
from mlfc.hosts.cc import ALGORITHMS
from mlfc.hosts.transport import (
    DEFAULT_CHUNK,
    PeerTimeout,
    Receiver,
    ReceiverConfig,
    Sender,
    SenderConfig,
    TransportError,
    parse_endpoint,
)
from mlfc.policy.mltcp import F_HELP, f_argument, resolve_params


def _jobs(text: str | None) -> frozenset[int] | None:
    return None if text is None else frozenset(int(j) for j in text.split(",") if j)


def _emit(summary: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(summary), flush=True)
    else:
        for key, value in summary.items():
            print(f"{key:>22}: {value:.6g}" if isinstance(value, float) else f"{key:>22}: {value}", flush=True)


def cmd_recv(args: argparse.Namespace) -> int:
    cfg = ReceiverConfig(
        deadline=args.deadline,
        cnp_interval=args.cnp_interval,
        jobs=_jobs(args.jobs),
        gro=args.gro,
        compiled=args.compiled,
    )
    cpu0 = time.process_time()
    got = 0
    nbytes = 0
    zero_filled = 0
    first = last = None
    with Receiver(parse_endpoint(args.bind), cfg) as rx:
        if args.ready:
            print("ready", flush=True)
        try:
            while args.count is None or got < args.count:
                try:
                    d = rx.recv(timeout=args.idle_exit if got else args.start_timeout)
                except TimeoutError:
                    break
                got += 1
                nbytes += d.loss.total_bytes
                zero_filled += d.loss.zero_filled_bytes
                first = d.first_packet if first is None else min(first, d.first_packet)
                last = d.finished
                if not args.json and args.verbose:
                    print(f"job {d.job_id} it {d.iteration} tensor {d.tensor_id}: {d.loss.total_bytes} B, "
                          f"zero-filled {len(d.loss.missing_chunks)} chunks, CE {d.ce_chunks}", flush=True)  # fmt: skip
        except KeyboardInterrupt:
            pass
        st = rx.stats
    span = (last - first) if first is not None and last is not None else 0.0
    cpu = time.process_time() - cpu0
    _emit(
        {
            "tensors": got,
            "bytes": nbytes,
            "seconds": span,
            # CLOCK_MONOTONIC is the machine's: receivers of concurrent flows share it (aggregate goodput)
            "first_packet_at": first,
            "finished_at": last,
            "goodput_mbps": 8 * nbytes / span / 1e6 if span > 0 else 0.0,
            "zero_filled_bytes": zero_filled,
            "cpu_seconds": cpu,
            "cpu_s_per_gbit": cpu / (8 * nbytes / 1e9) if nbytes else 0.0,
            "datagrams": st.datagrams,
            "packets": st.packets,
            "runs": st.runs,
            "duplicates": st.duplicates,
            "ce_marked": st.ce_marked,
            "acks_sent": st.acks_sent,
            "cnps_sent": st.cnps_sent,
            "malformed": st.malformed,
            "foreign": st.foreign,
            "unknown_job": st.unknown_job,
            "oversized": st.oversized,
        },
        args.json,
    )
    return 0 if got else 1


def cmd_send(args: argparse.Namespace) -> int:
    mltcp = resolve_params(args.f, args.cc) if args.mltcp else None
    cfg = SenderConfig(chunk_size=args.chunk, cc=args.cc, mltcp=mltcp, line_rate=args.line_rate,
                       peer_timeout=args.peer_timeout, gso=args.gso, compiled=args.compiled)  # fmt: skip
    rng = np.random.default_rng(args.seed)
    tensor = rng.standard_normal(max(1, args.bytes // 4)).astype(np.float32).tobytes()[: args.bytes]
    bind = parse_endpoint(args.bind, 0)
    total = 0
    retx = 0
    tolerated = 0
    with Sender(parse_endpoint(args.to), bind, cfg) as tx:
        if args.ready:
            # Concurrent senders start together on "go", not each after its own interpreter start-up.
            print("ready", flush=True)
            if sys.stdin.readline().strip() != "go":
                print("mlfc-transport: no 'go' on stdin", file=sys.stderr)
                return 2
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        try:
            for it in range(args.iterations):
                tx.start_iteration(args.bytes * args.tensors if args.mltcp else None)
                for k in range(args.tensors):
                    r = tx.send_tensor(args.job, args.first_iteration + it, k, tensor,
                                       loss_bound=args.loss_bound, timeout=args.timeout)  # fmt: skip
                    total += r.nbytes
                    retx += r.retransmits
                    tolerated += r.tolerated_chunks
        except PeerTimeout as exc:
            print(f"mlfc-transport: {exc}", file=sys.stderr)
            return 2
        elapsed = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        st = tx.stats
    _emit(
        {
            "cc": args.cc + ("+mltcp" if args.mltcp else ""),
            "bytes": total,
            "seconds": elapsed,
            "goodput_mbps": 8 * total / elapsed / 1e6,
            "cpu_seconds": cpu,
            "cpu_s_per_gbit": cpu / (8 * total / 1e9),
            "chunks_sent": st.chunks_sent,
            "sendmsg_calls": st.send_calls,
            "gso_sends": st.gso_sends,
            "gso_refused": st.gso_refused,
            "retransmits": retx,
            "tolerated_chunks": tolerated,
            "loss_events": st.loss_events,
            "timeouts": st.timeouts,
            "ece_events": st.ece_events,
            "cnps": st.cnps,
            "srtt_ms": st.srtt * 1e3,
        },
        args.json,
    )
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    try:
        path = fastpath.build(force=args.force)
    except fastpath.FastPathError as exc:
        print(f"mlfc-transport: {exc}", file=sys.stderr)
        return 1
    print(f"mlfc-transport: compiled loops in {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mlfc-transport", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("recv", help="receive tensors")
    r.add_argument("--bind", required=True, help="IP:PORT, port in 19712..19967")
    r.add_argument("--count", type=int, help="exit after this many tensors")
    r.add_argument("--idle-exit", type=float, default=5.0, help="exit after this long without a tensor (s)")
    r.add_argument("--start-timeout", type=float, default=60.0, help="wait this long for the first tensor (s)")
    r.add_argument("--deadline", type=float, default=ReceiverConfig.deadline, help="zero-fill deadline (s)")
    r.add_argument("--cnp-interval", type=float, default=ReceiverConfig.cnp_interval, help="s between CNPs per flow")
    r.add_argument("--jobs", help="comma-separated accepted job ids (default: any)")
    r.add_argument("--no-gro", dest="gro", action="store_false", help="one datagram per read (no UDP GRO)")
    r.add_argument("--no-compiled", dest="compiled", action="store_false",
                   help="the numpy paths even where mlfc.hosts.fastpath is built")  # fmt: skip
    r.add_argument("--ready", action="store_true", help="print 'ready' once bound")
    r.add_argument("--verbose", action="store_true")
    r.add_argument("--json", action="store_true")
    r.set_defaults(func=cmd_recv)
    s = sub.add_parser("send", help="send tensors")
    s.add_argument("--to", required=True, help="receiver IP:PORT")
    s.add_argument("--bind", default="0.0.0.0", help="local IP[:PORT] (port 0/absent: a free shim-range port)")
    s.add_argument("--bytes", type=int, required=True, help="bytes per tensor")
    s.add_argument("--job", type=int, required=True)
    s.add_argument("--cc", choices=ALGORITHMS, default="reno")
    s.add_argument("--mltcp", action="store_true", help="MLTCP augmentation")
    s.add_argument("--f", type=f_argument, default=None, metavar="F", help=F_HELP)
    s.add_argument("--chunk", type=int, default=DEFAULT_CHUNK, help="payload bytes per chunk")
    s.add_argument("--tensors", type=int, default=1, help="tensors per iteration")
    s.add_argument("--iterations", type=int, default=1)
    s.add_argument("--first-iteration", type=int, default=0)
    s.add_argument("--line-rate", type=float, default=1e9, help="DCQCN line rate, bits/s")
    s.add_argument("--loss-bound", type=float, default=0.0, help="fraction of a tensor that may be zero-filled")
    s.add_argument("--timeout", type=float, help="per-tensor timeout (s)")
    s.add_argument("--peer-timeout", type=float, default=SenderConfig.peer_timeout)
    s.add_argument("--no-gso", dest="gso", action="store_false", help="one datagram per send (no UDP GSO)")
    s.add_argument("--no-compiled", dest="compiled", action="store_false",
                   help="the numpy paths even where mlfc.hosts.fastpath is built")  # fmt: skip
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--ready", action="store_true", help="print 'ready' once set up, then send on a 'go' line on stdin")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_send)
    b = sub.add_parser("build", help="compile the per-chunk loops (mlfc.hosts.fastpath; make install does this)")
    b.add_argument("--force", action="store_true", help="rebuild even if this source version is built")
    b.set_defaults(func=cmd_build)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        return args.func(args)
    except (TransportError, ValueError, OSError) as exc:
        print(f"mlfc-transport: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
