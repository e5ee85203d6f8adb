"""``python -m mlfc.sim`` / ``mlfc-sim``: run the simulator's experiments (docs/sim.md)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from mlfc.sim import runtime


def _seeds(text: str) -> tuple[int, ...]:
    try:
        seeds = tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds {text!r}: expected comma-separated integers, e.g. 1,2,3") from None
    if not seeds or any(s < 1 for s in seeds):
        raise argparse.ArgumentTypeError("seeds must be positive integers")
    return seeds


def _positive(kind: type) -> object:
    def parse(text: str) -> object:
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not v > 0:
            raise argparse.ArgumentTypeError(f"{text!r} must be > 0")
        return v

    return parse


def _factors(text: str) -> tuple[float, ...]:
    check = _positive(float)
    values = tuple(check(t) for t in text.split(",") if t.strip())  # type: ignore[operator]
    if not values:
        raise argparse.ArgumentTypeError("expected comma-separated factors, e.g. 0.01,0.1")
    return values  # type: ignore[return-value]


def parser() -> argparse.ArgumentParser:
    from mlfc.sim.experiments import EXPERIMENTS

    ap = argparse.ArgumentParser(prog="python -m mlfc.sim", description=__doc__)
    ap.add_argument(
        "experiments",
        nargs="*",
        default=["small"],
        help=f"small (default), all, or any of: {', '.join(EXPERIMENTS)}",
    )
    ap.add_argument("--out", type=Path, default=Path("results/sim"), help="output folder (default results/sim)")
    ap.add_argument("--seeds", type=_seeds, default=None, help="comma-separated seeds (default 1,2,3; small: 1)")
    ap.add_argument(
        "--iterations", type=_positive(int), default=None, help="iterations per run (default: per experiment)"
    )
    ap.add_argument("--scale", type=_positive(float), default=None,
                    help="factor on model bytes and compute times (mltcp-regime: on bytes and link rates, "
                    "default 0.1)")  # fmt: skip
    ap.add_argument("--jobs", type=_seeds, default=None, help="scale: comma-separated job counts (default 4,8,16,32)")
    ap.add_argument(
        "--resume",
        action="store_true",
        help="reuse the iteration records of runs already saved under --out (incast and bench always re-run)",
    )
    ap.add_argument("--cc", default=None, help="scale: comma-separated congestion controls (default reno,cubic)")
    ap.add_argument(
        "--scales",
        type=_factors,
        default=None,
        help="scales: comma-separated factors swept (default 0.005,0.01,0.02,0.05,0.1,0.2,0.5,1)",
    )
    ap.add_argument("--publish", action="store_true",
                    help="scales, mltcp-regime: also write docs/data/sim-scale/ (mltcp-regime/)")  # fmt: skip
    ap.add_argument("--regimes", default=None,
                    help="mltcp-regime: comma-separated queue regimes: shallow, deep, step:K_BDP:QUEUE_BDP "
                    "(default shallow,deep; mlfc.sim.regime)")  # fmt: skip
    ap.add_argument("--rtt-us", type=_positive(float), default=None,
                    help="mltcp-regime: the fabric's base round trip in us (default 100)")  # fmt: skip
    ap.add_argument("--hosts", choices=("jumbo", "tso", "stretch-acks"), default="jumbo",
                    help="scale, scales, bench: the hosts' TCP model (sim/experiments/common.py)")  # fmt: skip
    return ap


def main(argv: list[str] | None = None) -> int:
    from mlfc.sim.experiments import EXPERIMENTS, Context, small

    args = parser().parse_args(argv)
    names = list(EXPERIMENTS) if args.experiments == ["all"] else args.experiments
    unknown = [n for n in names if n != "small" and n not in EXPERIMENTS]
    if unknown:
        print(
            f"unknown experiment(s) {', '.join(unknown)}; choose small, all or {', '.join(EXPERIMENTS)}",
            file=sys.stderr,
        )
        return 2
    reason = runtime.missing()
    if reason:
        print(f"mlfc.sim: {reason}", file=sys.stderr)
        return 2
    cmd = "python -m mlfc.sim " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    ccs = tuple(c.strip() for c in args.cc.split(",")) if args.cc else None
    if ccs and any(c not in ("reno", "cubic") for c in ccs):
        print(f"--cc {args.cc}: the simulator has reno and cubic", file=sys.stderr)
        return 2
    seeds = args.seeds or ((1,) if names == ["small"] else (1, 2, 3))
    ctx = Context(
        args.out,
        seeds,
        args.iterations,
        args.scale,
        cmd,
        jobs=args.jobs,
        ccs=ccs,
        resume=args.resume,
        scales=args.scales,
        publish=args.publish,
        hosts=args.hosts,
        regimes=tuple(r.strip() for r in args.regimes.split(",") if r.strip()) if args.regimes else None,
        rtt_us=args.rtt_us,
    )
    print(f"mlfc.sim: seeds {', '.join(map(str, ctx.seeds))}; results in {args.out}/", file=sys.stderr)
    print("mlfc.sim: loading ns-3 and compiling the C++ parts (~10-40 s) ...", file=sys.stderr, flush=True)
    runtime.load()
    print(f"mlfc.sim: ready in {runtime.load_seconds:.1f} s", file=sys.stderr)
    for name in names:
        text = small(ctx) if name == "small" else EXPERIMENTS[name](ctx)
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
