"""6. The simulator's speed: 16 jobs x 50 iterations on the 100 Gb/s leaf-spine at a fraction of the
models' bytes, and the wall time at full size projected from it against issue 28's 30-minute limit (also
`bench/sim_bench.py`, part of `make bench`). Events grow in proportion to the scale (the scale sweep
measured it up to full size: docs/data/sim-scale), so the simulation's wall time does too."""

from __future__ import annotations

import time
from dataclasses import dataclass

from mlfc.sim.experiments.common import HOST_MODELS, Context, col, fabric, md_table, run_saved, summary, write_table
from mlfc.sim.experiments.scale import SCALE_MODELS, scale_fabric, scale_jobs
from mlfc.sim.simulation import SimConfig

TARGET_S = 1800  # issue 28: 30 minutes on 2 cores, set-up included


@dataclass(frozen=True)
class BenchRow:
    """bench.csv: the one run."""

    jobs: int = col("jobs")
    iterations: int = col("iterations")
    scale: float = col("scale")
    data_gb: float = col("data GB")
    sim_s: float = col("simulated s")
    wall_s: float = col("wall s (run)")
    total_s: float = col("wall s (with set-up)")
    sim_per_wall: float = col("sim s / wall s")
    events: int = col("events")
    events_per_s: float = col("events/s")
    packets: int = col("switch packets")
    full_size_s: float = col("wall s at full size (projected)")
    target: str = col("target (full size)")


def full_size(total_s: float, sim_wall_s: float, scale: float) -> float:
    """Wall seconds of the same run at full model bytes: the simulation's share grows with the bytes (events
    are proportional to the scale), the set-up (network, ns-3 objects) does not."""
    return total_s - sim_wall_s + sim_wall_s / scale


def benchmark(ctx: Context, jobs_n: int = 16, iterations: int = 50) -> str:
    return measure(ctx, jobs_n, iterations)[1]


def measure(ctx: Context, jobs_n: int = 16, iterations: int = 50) -> tuple[BenchRow, str]:
    """The run, its row (bench.csv) and its summary text."""
    exp = "bench"
    scale = ctx.scale or 0.02
    topo = scale_fabric()
    tcp = HOST_MODELS[ctx.hosts]
    jobs = scale_jobs(topo, jobs_n, scale)
    t0 = time.monotonic()
    r = run_saved(ctx, exp, SimConfig(f"bench-{jobs_n}x{iterations}", topo, jobs, iterations, mltcp=True, tcp=tcp,
                                      seed=ctx.seeds[0], **fabric(tcp)))  # fmt: skip
    total = time.monotonic() - t0
    s = r.stats
    full = full_size(total, s.wall_s, scale)
    gbytes = sum(j.push_bytes * len(j.workers) + j.pull_bytes * len(j.workers) for j in jobs) * iterations / 1e9
    row = BenchRow(
        jobs=jobs_n,
        iterations=iterations,
        scale=scale,
        data_gb=gbytes,
        sim_s=s.sim_s,
        wall_s=s.wall_s,
        total_s=total,
        sim_per_wall=s.sim_per_wall,
        events=s.events,
        events_per_s=s.events_per_s,
        packets=s.packets,
        full_size_s=full,
        target="met" if full < TARGET_S else "missed",
    )
    write_table(ctx.dir(exp) / "bench.csv", BenchRow, [row])
    body = [
        f"{topo.description}; {jobs_n} PS jobs (2 workers + PS, models {', '.join(SCALE_MODELS)} cycled) x "
        f"{iterations} iterations at 100 Gb/s, hosts {ctx.hosts} (MTU {tcp.mtu}), MLTCP-Reno; model bytes and "
        f"compute x {scale:g}. "
        f"Target: 16 jobs x 50 iterations at full model bytes under {TARGET_S / 60:.0f} minutes ({TARGET_S} s) "
        "on 2 cores; the full-size time is the run's simulation time divided by the scale, plus its set-up.",
        "",
        md_table(BenchRow, [row]),
    ]
    return row, summary(ctx, exp, "Simulator speed", body)
