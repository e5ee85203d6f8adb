"""``mlfc-mltcp``: MLTCP for kernel TCP.

    mlfc-mltcp build [--force]                      compile bpf/ against this kernel
    mlfc-mltcp load [--cc reno,cubic,dctcp] [F and detection options] [--netns NS --default mltcp_reno]
    mlfc-mltcp status [--json]                      registrations, parameters, per-connection state
    mlfc-mltcp set [F and detection options] [--netns NS --default CC]
    mlfc-mltcp unload [--cc reno,cubic,dctcp] [--fallback cubic]
    mlfc-mltcp marker attach|stats|detach --netns NS --dev DEV [--rate BPS --k B --limit B]   tc/eBPF ECN marker

F is mlfc.policy.mltcp's, one value in its text form: --f (e.g. 16:0.5:step=0.1, 2:0.5); --group/--no-group
turns one progress per job (IterationDetection.group) on or off. Parameters not
given keep their defaults (``load``: each family's default F, mlfc.policy.mltcp.default_params, and
IterationDetection(); ``set``: the values loaded now).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from mlfc.hosts.kernel import KernelMltcpError, build, loader, marker, namespaces
from mlfc.policy.mltcp import (
    F_HELP,
    IterationDetection,
    MltcpParams,
    default_params,
    f_argument,
    format_params,
    parse_params,
)


def _policy_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("MLTCP (defaults: mlfc.policy.mltcp)")
    g.add_argument("--f", dest="f_text", metavar="F", type=f_argument, help=F_HELP)
    d = IterationDetection()
    g.add_argument(
        "--idle-rtts", type=float, help=f"idle gap that starts an iteration, in RTTs (default {d.idle_rtts})"
    )
    g.add_argument("--idle-min", type=float, help=f"... and at least this many seconds (default {d.idle_min})")
    g.add_argument(
        "--ewma", type=float, help=f"weight of the last iteration in bytes per iteration (default {d.ewma_weight})"
    )
    g.add_argument("--group", action=argparse.BooleanOptionalAction, default=None,
                   help="one bytes_ratio per job: connections with the same namespace, local address, remote address "
                   f"and port share their progress (default {'on' if d.group else 'off'})")  # fmt: skip


def _namespace_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--netns", action="append", default=[], help="network namespace: an `ip netns` name, "
                   "a path such as /proc/PID/ns/net, or 'root' (repeatable)")  # fmt: skip
    p.add_argument("--default", dest="default_cc", help="congestion control to make the namespaces' default")


def _policy(
    args: argparse.Namespace, base: tuple[MltcpParams | None, IterationDetection]
) -> tuple[MltcpParams | None, IterationDetection]:
    """F and iteration detection from the options, the rest from ``base`` (F None: each family's default)."""
    policy, detection = base
    if args.f_text is not None:
        policy = parse_params(args.f_text)
    detection = IterationDetection(
        args.idle_rtts if args.idle_rtts is not None else detection.idle_rtts,
        args.idle_min if args.idle_min is not None else detection.idle_min,
        args.ewma if args.ewma is not None else detection.ewma_weight,
        args.group if args.group is not None else detection.group,
    )
    return policy, detection


def _formula(p: MltcpParams) -> str:
    if p.linear:
        return f"{p.slope:g} * bytes_ratio + {p.intercept:g}"
    g = {"power": f"bytes_ratio ** {p.exponent:g}", "step": f"step at {p.knee:g}", "sigmoid": f"sigmoid at {p.knee:g}"}
    return f"{p.intercept:g} + {p.slope:g} * {g[p.shape]}"


def _describe(p: MltcpParams, d: IterationDetection) -> str:
    return (
        f"F {format_params(p)} = {_formula(p)}; iteration after "
        f"max({d.idle_rtts:g} RTT, {d.idle_min * 1e3:g} ms) idle; EWMA {d.ewma_weight:g}; "
        + ("one progress per job (--group)" if d.group else "progress per connection")
    )


def _cc_list(text: str | None) -> list[loader.Algorithm]:
    return loader.algorithms([s.strip() for s in text.split(",") if s.strip()] if text else None)


def _apply_namespaces(args: argparse.Namespace) -> None:
    if args.netns and not args.default_cc:
        raise KernelMltcpError("--netns needs --default CC (e.g. --default mltcp_reno)")
    if args.default_cc and not args.netns:
        raise KernelMltcpError("--default needs --netns (use --netns root for the host's namespace)")
    for spec in args.netns:
        ns = namespaces.resolve(spec)
        namespaces.set_default_cc(ns, args.default_cc)
        print(f"{ns.label}: default congestion control {args.default_cc}")


def cmd_build(args: argparse.Namespace) -> int:
    for path in build.build(force=args.force, verbose=True):
        print(f"built {path}")
    return 0


def cmd_load(args: argparse.Namespace) -> int:
    policy, detection = _policy(args, (None, IterationDetection()))
    if args.netns or args.default_cc:  # validate before registering anything
        for spec in args.netns:
            namespaces.resolve(spec)
    algs = _cc_list(args.cc)
    loader.load(algs, policy, detection)
    for alg in algs:
        print(f"{alg.name}: {_describe(policy or default_params(alg.key), detection)}")
    _apply_namespaces(args)
    return 0


def cmd_set(args: argparse.Namespace) -> int:
    algs = _cc_list(args.cc)
    changing = any(v is not None for v in (args.f_text, args.idle_rtts, args.idle_min, args.ewma, args.group))
    if changing:
        for alg in algs:  # each algorithm keeps what is not given, from its own map
            current = [kp for kp in loader.read_params(alg) if kp.params]
            base = (current[0].params, current[0].detection) if current else (None, IterationDetection())
            policy, detection = _policy(args, base)
            policy = policy or default_params(alg.key)
            n = loader.set_params([alg], policy, detection)
            print(f"{alg.name}: parameters written to {n} map(s): {_describe(policy, detection)}")
    elif not args.netns:
        raise KernelMltcpError(
            "nothing to set: give parameters (--f, --idle-rtts, --group ...) and/or --netns NS --default CC"
        )
    _apply_namespaces(args)
    return 0


def cmd_unload(args: argparse.Namespace) -> int:
    for w in loader.unload(_cc_list(args.cc), args.fallback):
        print(f"warning: {w}", file=sys.stderr)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    statuses = loader.status()
    names = {s.name for s in statuses}
    defaults, socks = [], []
    for ns in namespaces.all_namespaces(include_processes=True):
        try:
            cc = namespaces.get_default_cc(ns)
            defaults.append((ns.label, ns.inode, cc))
            socks += namespaces.sockets(ns, names)
        except KernelMltcpError:
            continue
    if args.json:
        out = {
            "algorithms": [dataclasses.asdict(s) for s in statuses],
            "namespaces": [{"namespace": label, "inode": ino, "default": cc} for label, ino, cc in defaults],
            "sockets": [dataclasses.asdict(s) for s in socks],
        }
        json.dump(out, sys.stdout, indent=2, default=str)
        print()
        return 0
    for algorithm in statuses:
        state = "registered" if algorithm.registered else "not registered"
        extra = ", ".join(f"map {i}: {st}" for i, st in algorithm.instances)
        print(f"{algorithm.name}: {state}" + (f" ({extra})" if extra else ""))
        for kp in dict.fromkeys(algorithm.params):  # one line per distinct parameter set
            if kp.params and kp.detection:
                print("  " + _describe(kp.params, kp.detection) + ("" if kp.ready else " (not ready)"))
            else:
                print("  parameters not set (connections run the plain algorithm)")
        if algorithm.stats:
            print("  counters: " + ", ".join(f"{k} {v}" for k, v in algorithm.stats.items()))
        for flow in algorithm.flows:
            print(f"  flow {flow.local} -> {flow.peer} (netns {flow.netns}): {flow.iterations} iterations, "
                  f"{flow.bytes_per_iteration} B/iteration, last {flow.last_iteration_bytes} B at F {flow.last_f:.2f}, "
                  f"cwnd {flow.cwnd}, updated {flow.age_s:.1f} s ago"
                  + (f"; job: {flow.job_iterations} iterations, {flow.job_bytes_per_iteration} B/iteration"
                     if flow.job_iterations else ""))  # fmt: skip
        for job in algorithm.jobs:
            print(f"  job {job.local} -> {job.peer} (netns {job.netns}): {job.iterations} iterations, "
                  f"{job.bytes_per_iteration} B/iteration, last {job.last_iteration_bytes} B at F {job.last_f:.2f}, "
                  f"{job.this_iteration_bytes} B this iteration, idle {job.idle_s:.1f} s")  # fmt: skip
    uses = [d for d in defaults if d[2] in names]
    print("namespaces defaulting to MLTCP: " + (", ".join(f"{label} ({cc})" for label, _, cc in uses) or "none"))
    print(f"sockets using MLTCP: {len(socks)}")
    for so in socks:
        print(f"  {so.namespace}: {so.local} -> {so.peer} {so.state} {so.cc} cwnd {so.cwnd} rtt {so.rtt_ms} ms")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="mlfc-mltcp", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("build", help="compile the BPF programs for this kernel")
    p.add_argument("--force", action="store_true", help="rebuild even if up to date")
    p.set_defaults(fn=cmd_build)
    p = sub.add_parser("load", help="register mltcp_reno / mltcp_cubic / mltcp_dctcp with parameters")
    p.add_argument("--cc", help="comma-separated: reno, cubic, dctcp (default all)")
    _policy_args(p)
    _namespace_args(p)
    p.set_defaults(fn=cmd_load)
    p = sub.add_parser("set", help="change the parameters of what is loaded, or a namespace's default")
    p.add_argument("--cc", help="comma-separated: reno, cubic, dctcp (default all)")
    _policy_args(p)
    _namespace_args(p)
    p.set_defaults(fn=cmd_set)
    p = sub.add_parser("status", help="what is registered, its parameters, connections using it")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_status)
    p = sub.add_parser("unload", help="unregister (namespaces defaulting to it move to --fallback)")
    p.add_argument("--cc", help="comma-separated: reno, cubic, dctcp (default all)")
    p.add_argument("--fallback", default=loader.FALLBACK_CC, help="default for those namespaces (default cubic)")
    p.set_defaults(fn=cmd_unload)
    marker.add_cli(sub)
    args = ap.parse_args(argv)
    try:
        return args.fn(args)
    except KernelMltcpError as exc:
        print(f"mlfc-mltcp: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:  # PolicyError from MltcpParams / IterationDetection
        print(f"mlfc-mltcp: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
