"""A fake-clock model of the lab's two-compatible mix under DCQCN, to see why a rule does or does not
interleave before spending lab time on it. Prints figures; nothing is asserted.

    python bench/dcqcn_model.py                       # every rule, plain and MLTCP 2:0.5, four seeds
    python bench/dcqcn_model.py --rule mlfc --slope 4 --intercept 0.5 --seeds 2

Two jobs, each a worker and a PS with one ``mlfc.hosts.cc.Dcqcn`` sender per direction (100 Mb/s host
rate, as the lab's emulator). Per iteration: compute 0.6 s (+-2 % jitter), push 420 kB (300 chunks of
1428 B) worker -> PS, then pull 420 kB PS -> worker, each direction one FIFO of 64 packets drained at
1,500 packets/s with the lab's ECN profile (mlfc.policy.ecn) applied at enqueue; a drop is a loss event.
Feedback (ACK, CE -> CNP, at most one per 50 us per flow as the receiver) takes 0.5-2.5 ms; the sender
paces at its rate in 0.1 ms steps. Solo, an iteration takes 1.0 s: that is the ideal.

Rules (the controller as of this commit is ``mlfc``):
  paper       cut on every CNP, the paper's MLTCP (F x R_AI, F x R_HAI only)
  cut         paper + MLTCP's cut exponent 1/F
  cut+rec     cut + fast recovery closing 1 - 2^-F of the gap (F halvings)
  cut+rec+N   cut+rec and at most one cut per N (the first rule tried in the lab)
  mlfc        cut and at most one cut per N (hosts/cc/dcqcn.py)
  line-reset  paper + every phase restarts at the line rate (as a NIC that released its rate limiter)
"""

from __future__ import annotations

import argparse
import random
import statistics
from collections import deque
from types import SimpleNamespace

from mlfc.hosts.cc import Dcqcn, DcqcnParams, Mltcp
from mlfc.policy.ecn import EcnProfile, mark_probability
from mlfc.policy.mltcp import MltcpParams

PPS = 1500
CHUNK = 1428
DEPTH = 64
DT = 1e-4
RULES = ("paper", "cut", "cut+rec", "cut+rec+N", "mlfc", "line-reset")


def controller(rule: str, mltcp: Mltcp | None, line: float) -> Dcqcn:
    """A Dcqcn whose cut, recovery and idle behaviour follow ``rule``."""

    gated = rule in ("mlfc", "cut+rec+N")  # at most one cut per N
    cut_f = rule not in ("paper", "line-reset")  # the cut exponent 1/F
    recovery_f = rule in ("cut+rec", "cut+rec+N")  # F halvings per fast-recovery step

    class Rule(Dcqcn):
        def _may_cut(self, now: float) -> bool:
            return super()._may_cut(now) if gated else True

        def _cut(self, now: float) -> None:
            f = self.mltcp
            if not cut_f:
                self.mltcp = None  # the cut without F
            super()._cut(now)
            self.mltcp = f

        def _increase(self) -> None:
            p, f = self.params, self.factor()  # F on R_AI, R_HAI as in the paper and hosts/cc/dcqcn.py
            if max(self.t_count, self.bc_count) > p.fast_recovery_steps:
                low = min(self.t_count, self.bc_count)
                step = (low - p.fast_recovery_steps) * p.r_hai if low > p.fast_recovery_steps else p.r_ai
                self.rt = min(self.rt + f * step, p.line_rate)
            keep = 2.0**-f if recovery_f else 0.5
            self.rc = min(self.rt - (self.rt - self.rc) * keep, p.line_rate)

        def on_idle_restart(self, now: float) -> None:
            if rule == "line-reset":
                self.rc = self.rt = self.params.line_rate

    return Rule(CHUNK, mltcp, DcqcnParams(line_rate=line), now=0.0)


class Flow:
    def __init__(self, rule: str, params: MltcpParams | None, line: float) -> None:
        self.progress = SimpleNamespace(ratio=0.0)
        self.cc = controller(rule, None if params is None else Mltcp(params, self.progress), line)
        self.todo = self.total = self.sent = self.acked = 0
        self.credit = 0.0
        self.last_cnp = -1.0
        self.last_active: float | None = None

    def start(self, chunks: int, now: float) -> None:
        if self.last_active is not None and now - self.last_active > 0.05:
            self.cc.on_idle_restart(now)
        self.todo = self.total = chunks
        self.sent = self.acked = 0
        self.credit = 0.0


def run(rule: str, params: MltcpParams | None, seed: int, iterations: int = 20, line: float = 100e6) -> float:
    """Mean iteration time of both jobs (the first iteration left out, as the lab does)."""
    rng = random.Random(seed)
    profile = EcnProfile()
    chunks, compute = 420_000 // 1400, 0.6
    jobs = [
        {"push": Flow(rule, params, line), "pull": Flow(rule, params, line), "phase": "compute", "until": compute}
        for _ in range(2)
    ]
    for job in jobs:
        job["starts"] = [0.0]
    queues: list[deque] = [deque(), deque()]
    serve = [0.0, 0.0]
    events: list[tuple[float, Flow, str]] = []
    now = 0.0
    while min(len(j["starts"]) for j in jobs) <= iterations and now < 300:
        now += DT
        for job in jobs:
            if job["phase"] == "compute" and now >= job["until"]:
                job["phase"] = "push"
                job["push"].start(chunks, now)
            for direction, flow in enumerate((job["push"], job["pull"])):
                flow.cc.on_timer(now)
                if flow.todo <= 0:
                    continue
                flow.credit = min(16.0, flow.credit + flow.cc.pacing_rate * DT / CHUNK)
                while flow.credit >= 1 and flow.todo > 0:
                    flow.credit -= 1
                    q = queues[direction]
                    flow.cc.on_sent(CHUNK, now)
                    if len(q) >= DEPTH:  # tail drop: a loss, seen about a queue's delay later
                        events.append((now + 1e-3 + len(q) / PPS, flow, "loss"))
                        continue
                    flow.todo -= 1
                    flow.sent += 1
                    flow.progress.ratio = flow.sent / flow.total
                    q.append((flow, rng.random() < mark_probability(profile, len(q))))
        for direction in (0, 1):
            serve[direction] += PPS * DT
            while serve[direction] >= 1 and queues[direction]:
                serve[direction] -= 1
                flow, ce = queues[direction].popleft()
                events.append((now + 1e-3 * (0.5 + 2 * rng.random()), flow, "ce" if ce else "ok"))
            if not queues[direction]:
                serve[direction] = min(serve[direction], 1.0)
        pending = []
        for t, flow, kind in events:
            if t > now:
                pending.append((t, flow, kind))
            elif kind == "loss":
                flow.cc.on_loss(now)
            else:
                if kind == "ce" and now - flow.last_cnp >= 50e-6:
                    flow.last_cnp = now
                    flow.cc.on_cnp(now)
                flow.acked += 1
                flow.last_active = now
        events = pending
        for job in jobs:
            if job["phase"] == "push" and job["push"].acked >= chunks:
                job["phase"] = "pull"
                job["pull"].start(chunks, now)
            elif job["phase"] == "pull" and job["pull"].acked >= chunks:
                job["starts"].append(now)
                job["phase"] = "compute"
                job["until"] = now + compute * (1 + rng.gauss(0, 0.02))
    times = [b - a for j in jobs for a, b in zip(j["starts"][1:], j["starts"][2:], strict=False)]
    return statistics.fmean(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rule", action="append", choices=RULES, help="rule(s) to model (default: all)")
    ap.add_argument("--slope", type=float, default=MltcpParams().slope)
    ap.add_argument("--intercept", type=float, default=MltcpParams().intercept)
    ap.add_argument("--seeds", type=int, default=4)
    args = ap.parse_args(argv)
    mltcp = MltcpParams(args.slope, args.intercept)
    print(f"{'rule':<11} {'MLTCP':>8}  mean iteration s over {args.seeds} seeds (ideal 1.000)  per seed")
    for rule in args.rule or RULES:
        for params in (None, mltcp):
            per_seed = [run(rule, params, seed) for seed in range(args.seeds)]
            label = "off" if params is None else f"{params.slope:g}:{params.intercept:g}"
            print(f"{rule:<11} {label:>8}  {statistics.fmean(per_seed):.3f}  "
                  + " ".join(f"{t:.3f}" for t in per_seed), flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
