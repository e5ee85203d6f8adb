"""A fake-clock model of the lab's two-compatible mix under Reno or CUBIC with MLTCP, to rank F's shapes
before spending lab time on them. Prints figures; nothing is asserted.

    python bench/mltcp_model.py                                  # the default shapes, Reno, four seeds
    python bench/mltcp_model.py --cc cubic --f 2:0.5 --f 2:0.5:power=0.5 --seeds 6 --jobs 2

Jobs as in the lab's emulator (lab/scenarios.py MEDIUM): compute 0.6 s (+-2 % jitter), push 420 kB (300
chunks of 1428 B) worker -> PS, then pull 420 kB PS -> worker, each by its own ``mlfc.hosts.cc`` controller
(the real Reno/CUBIC, F from ``mlfc.policy.mltcp``). Each link direction is one FIFO of 64 packets drained at
1,500 packets/s with the lab's ECN profile at enqueue; a full queue drops (a loss event, retransmitted).
ACKs return 0.5-2.5 ms after the dequeue; at most one window reduction per round trip (RFC 3168 / the
transport); a phase that starts after more than the 50 ms minimum RTO idle restarts the window (RFC 5681
4.1, as the transport does). Senders are window-limited at a 100 Mb/s host rate. Every job starts its
first iteration at t = 0, as in the lab. No CPU contention: the model ranks shapes for the network's
dynamics, not for a loaded machine.
"""

from __future__ import annotations

import argparse
import random
import statistics
from collections import deque
from types import SimpleNamespace

from mlfc.hosts.cc import Cubic, Mltcp, Reno
from mlfc.policy.ecn import EcnProfile, mark_probability
from mlfc.policy.mltcp import MltcpParams, format_params, parse_params

PPS = 1500
CHUNK = 1428
DEPTH = 64
DT = 1e-4
LINE_PPS = 100e6 / 8 / CHUNK
MIN_RTO = 0.05
DEFAULT_F = ("2:0.5", "4:0.5", "2:0.5:power=0.5", "4:0.25:power=0.5", "4:0.25:step=0.2", "4:0.5:sigmoid=0.2")


class Flow:
    def __init__(self, cc: str, params: MltcpParams | None) -> None:
        self.progress = SimpleNamespace(ratio=0.0)
        mltcp = None if params is None else Mltcp(params, self.progress)
        self.cc = Reno(CHUNK, mltcp) if cc == "reno" else Cubic(CHUNK, mltcp)
        self.todo = self.total = self.sent = self.acked = self.inflight = 0
        self.credit = 0.0
        self.srtt = 0.005
        self.last_cut = -1.0
        self.last_active: float | None = None

    def start(self, chunks: int, now: float) -> None:
        if self.last_active is not None and now - self.last_active > max(MIN_RTO, 4 * self.srtt):
            self.cc.on_idle_restart(now)
        self.todo = self.total = chunks
        self.sent = self.acked = 0
        self.progress.ratio = 0.0

    def may_cut(self, now: float) -> bool:
        if now - self.last_cut < self.srtt:
            return False
        self.last_cut = now
        return True


def run(
    cc: str,
    params: MltcpParams | None,
    seed: int,
    jobs: int = 2,
    iterations: int = 16,
    push_bytes: int = 420_000,
    compute: float = 0.6,
) -> list[list[tuple]]:
    """Per job, per iteration: (start, push_start, push_end, end); push and pull of ``push_bytes`` each."""
    rng = random.Random(seed)
    profile = EcnProfile()
    chunks = push_bytes // 1400
    state = [
        {"push": Flow(cc, params), "pull": Flow(cc, params), "phase": "compute", "until": compute, "it": []}
        for _ in range(jobs)
    ]
    for job in state:
        job["cur"] = [0.0, 0.0, 0.0]
    queues: list[deque] = [deque(), deque()]
    serve = [0.0, 0.0]
    events: list[tuple[float, Flow, str, float]] = []
    now = 0.0
    while min(len(j["it"]) for j in state) < iterations and now < 200:
        now += DT
        for job in state:
            if job["phase"] == "compute" and now >= job["until"]:
                job["phase"] = "push"
                job["cur"][1] = now
                job["push"].start(chunks, now)
            for direction, flow in enumerate((job["push"], job["pull"])):
                if flow.todo <= 0:
                    continue
                flow.credit = min(4.0, flow.credit + LINE_PPS * DT)
                while flow.credit >= 1 and flow.todo > 0 and flow.inflight < flow.cc.cwnd / CHUNK:
                    flow.credit -= 1
                    flow.todo -= 1
                    flow.inflight += 1
                    flow.sent += 1
                    flow.progress.ratio = min(1.0, flow.sent / flow.total)
                    q = queues[direction]
                    if len(q) >= DEPTH:  # tail drop: seen about a queue's delay later, then resent
                        events.append((now + 1e-3 + len(q) / PPS, flow, "loss", now))
                        continue
                    q.append((flow, rng.random() < mark_probability(profile, len(q)), now))
        for direction in (0, 1):
            serve[direction] += PPS * DT
            while serve[direction] >= 1 and queues[direction]:
                serve[direction] -= 1
                flow, ce, sent_at = queues[direction].popleft()
                events.append((now + 1e-3 * (0.5 + 2 * rng.random()), flow, "ce" if ce else "ok", sent_at))
            if not queues[direction]:
                serve[direction] = min(serve[direction], 1.0)
        pending = []
        for t, flow, kind, sent_at in events:
            if t > now:
                pending.append((t, flow, kind, sent_at))
                continue
            flow.inflight -= 1
            flow.last_active = now
            if kind == "loss":
                flow.todo += 1
                flow.sent -= 1
                if flow.may_cut(now):
                    flow.cc.on_loss(now)
                continue
            rtt = now - sent_at
            flow.srtt = 0.875 * flow.srtt + 0.125 * rtt
            flow.acked += 1
            flow.cc.on_ack(CHUNK, rtt, kind == "ce" and flow.may_cut(now), now)
        events = pending
        for job in state:
            if job["phase"] == "push" and job["push"].acked >= chunks:
                job["phase"] = "pull"
                job["cur"][2] = now
                job["pull"].start(chunks, now)
            elif job["phase"] == "pull" and job["pull"].acked >= chunks:
                job["it"].append((*job["cur"], now))
                job["cur"] = [now, 0.0, 0.0]
                job["phase"] = "compute"
                job["until"] = now + compute * (1 + rng.gauss(0, 0.02))
    return [j["it"] for j in state]


def overlapped(its: list[list[tuple]], job: int, k: int) -> bool:
    """Job's push k overlaps another job's push (or pull its pull) by >= 20 % of its communication."""
    _, ps, pe, e = its[job][k]
    ov = 0.0
    for other, seq in enumerate(its):
        if other != job:
            for _, ops, ope, oe in seq:
                ov += max(0.0, min(pe, ope) - max(ps, ops)) + max(0.0, min(e, oe) - max(pe, ope))
    return ov >= 0.2 * (e - ps)


def summary(its: list[list[tuple]]) -> tuple[float, float, int | None]:
    """Mean and max iteration time (the first left out, as in the lab) and the interleaved-from iteration."""
    times = [e - s for seq in its for s, _, _, e in seq[1:]]
    n = min(len(seq) for seq in its)
    bad = [any(overlapped(its, j, k) for j in range(len(its))) for k in range(n)]
    frm = next((k for k in range(n) if not any(bad[k:])), None)
    return statistics.fmean(times), max(times), frm


def plot_shapes(path: str, points: list[MltcpParams]) -> None:
    """F against bytes_ratio for each point (docs/img/mltcp-f-shapes.png)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mlfc.policy.mltcp import mltcp_factor

    xs = [i / 400 for i in range(401)]
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    for params in points:
        ax.plot(xs, [mltcp_factor(x, params) for x in xs], label=format_params(params))
    ax.set_yscale("log")
    ax.set_xlabel("bytes_ratio (share of the iteration's bytes sent)")
    ax.set_ylabel("F (additive increase x F)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cc", default="reno", choices=("reno", "cubic"))
    ap.add_argument("--f", action="append", help="F points SLOPE:INTERCEPT[:SHAPE=ARG] (default: a shape set)")
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=16)
    ap.add_argument("--push-bytes", type=int, default=420_000, help="push (and pull) per iteration (MEDIUM)")
    ap.add_argument("--compute", type=float, default=0.6, help="compute seconds per iteration (MEDIUM)")
    ap.add_argument("--plot-shapes", metavar="PNG", help="only plot F of the --f points against bytes_ratio")
    args = ap.parse_args(argv)
    if args.plot_shapes:
        plot_shapes(args.plot_shapes, [parse_params(t) for t in args.f or DEFAULT_F])
        return 0
    shape = {"iterations": args.iterations, "push_bytes": args.push_bytes, "compute": args.compute}
    solo = summary(run(args.cc, None, 0, jobs=1, **shape))[0]
    print(f"{args.cc}, {args.jobs} jobs, alone {solo:.3f} s; per F: mean (min..max) over {args.seeds} seeds")
    base_avg = None
    for text in [None, *(args.f or DEFAULT_F)]:
        params = None if text is None else parse_params(text)
        res = [summary(run(args.cc, params, seed, args.jobs, **shape)) for seed in range(args.seeds)]
        avg = statistics.fmean(r[0] for r in res)
        p99 = statistics.fmean(r[1] for r in res)
        base_avg = base_avg or avg
        gains = [(base_avg / r[0] - 1) / (base_avg / solo - 1) for r in res]
        print(
            f"{'off' if params is None else format_params(params):>20}  avg {avg:.3f}  max {p99:.3f}  "
            f"gain {100 * statistics.fmean(gains):.0f} % ({100 * min(gains):.0f}..{100 * max(gains):.0f})  "
            f"(ideal {base_avg / solo:.2f})  "
            f"interleaved from {'/'.join('-' if r[2] is None else str(r[2]) for r in res)}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
