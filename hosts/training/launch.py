"""Command lines for a real-training job, and a local runner (PS and workers as processes on one host).

A launcher (the lab's job launcher, a script, a test) describes the job once and asks for the argv of
each process; it wraps them as it needs (``mnexec -a PID`` for a Mininet host, ``ip netns exec NS``,
``mlfc-agent ... --``):

    job = TrainingJob(job=1, workers=2, iterations=110, task="digits", loss_bound=0.02)
    ps_argv(job, bind="10.0.1.101")
    worker_argv(job, rank=0, bind="10.0.1.1", ps="10.0.1.101", start_at=t0)

Fixed ports by default (the lab's layout: PS 0x4D10, worker pull 0x4D20, worker push 0x4D30, PS pull
flows 0x4D40 + rank); ``ports="any"`` lets the other sockets pick free shim ports (several jobs or
workers on one address, e.g. loopback: give each PS its own ``port``). ``run_local`` does that on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from mlfc.hosts.training import protocol as proto
from mlfc.hosts.transport import bind_shim_socket
from mlfc.hosts.transport.recovery import DEFAULT_TOLERATED_LOSS
from mlfc.policy.withhold import WithholdPolicy
from mlfc.processes import terminate


@dataclass(frozen=True)
class TrainingJob:
    job: int
    workers: int
    iterations: int
    task: str = "digits"
    width: int | None = None
    batch_size: int | None = None
    lr: float | None = None
    momentum: float = 0.9
    seed: int = 0
    loss_bound: float = 0.0
    protect_fraction: float = 0.25
    loss_feedback: bool = True  # what the PS zero-filled goes out again with the next push (error feedback)
    withhold: bool = False  # the network-decided withheld share (worker --withhold; mlfc.policy.withhold)
    withhold_signal: str = WithholdPolicy().signal  # its congestion signal (--withhold-signal)
    precision: bool = False  # shed the withheld share by precision first (worker --precision; mlfc.policy.precision)
    pull_loss_bound: float = 0.0  # approximate pulls (PS --pull-loss-bound; hosts/training/pull_copies.py)
    pull_precision: bool = False  # and at a lower precision first (PS --pull-precision)
    repair_drops: bool = False  # tolerate only what is shed by plan (worker --repair-drops, PS --pull-repair-drops)
    eval_every: int = 5
    compute_s: float = 0.0  # pad real compute up to this (0: none)
    compress: str = "none"  # rigid push compression: none | fp16 | topk:F (hosts/training/compress.py)
    cc: str = "reno"
    mltcp: bool = False
    f: str | None = None  # MLTCP's F in the text form (mlfc.policy.mltcp format_params); None: the cc's default
    line_rate: float = 100e6
    tolerated_loss: str = DEFAULT_TOLERATED_LOSS  # SenderConfig.tolerated_loss: the window's reaction
    deadline: float = 0.02
    timeout: float = 60.0
    peer_timeout: float = 10.0
    checkpoint: str | None = None  # PS: its checkpoint file (resumes from it when restarted)
    checkpoint_every: int = 1
    extra_ps: tuple[str, ...] = ()
    extra_worker: tuple[str, ...] = ()

    def common(self) -> list[str]:
        args = [
            "--job",
            str(self.job),
            "--task",
            self.task,
            "--iterations",
            str(self.iterations),
            "--cc",
            self.cc,
            "--line-rate",
            str(self.line_rate),
            "--deadline",
            str(self.deadline),
            "--timeout",
            str(self.timeout),
            "--peer-timeout",
            str(self.peer_timeout),
        ]
        if self.tolerated_loss != DEFAULT_TOLERATED_LOSS:
            args += ["--tolerated-loss", self.tolerated_loss]
        if self.withhold_signal != WithholdPolicy().signal:
            args += ["--withhold-signal", self.withhold_signal]
        if self.width is not None:
            args += ["--width", str(self.width)]
        if self.mltcp:
            args.append("--mltcp")
            if self.f is not None:
                args += ["--f", self.f]
        return args


def _python() -> list[str]:
    return [sys.executable, "-m", "mlfc.hosts.training"]


def ps_argv(
    job: TrainingJob, bind: str, *, port: int = proto.PS_PORT, ports: str = "fixed", metrics: str | None = None
) -> list[str]:
    """The PS process. ``ports="any"``: its pull flows use free shim ports; ``port`` 0: so does the push port."""
    args = [
        *_python(),
        "ps",
        *job.common(),
        "--bind",
        bind,
        "--workers",
        str(job.workers),
        "--momentum",
        str(job.momentum),
        "--seed",
        str(job.seed),
    ]
    args += ["--port", str(port)]
    if ports == "any":
        args += ["--tx-port-base", "0"]
    if job.lr is not None:
        args += ["--lr", str(job.lr)]
    if metrics:
        args += ["--metrics", metrics]
    if job.checkpoint:
        args += ["--checkpoint", job.checkpoint, "--checkpoint-every", str(job.checkpoint_every)]
    if job.pull_loss_bound > 0:
        args += ["--pull-loss-bound", str(job.pull_loss_bound)]
    if job.pull_precision:
        args.append("--pull-precision")
    if job.repair_drops and job.pull_loss_bound > 0:
        args.append("--pull-repair-drops")
    return [*args, *job.extra_ps]


def worker_argv(
    job: TrainingJob,
    rank: int,
    bind: str,
    ps: str,
    *,
    ps_port: int = proto.PS_PORT,
    ports: str = "fixed",
    start_at: float = 0.0,
    start_delay: float = 0.0,
) -> list[str]:
    """Worker ``rank``'s process; it prints one JSON record per iteration on stdout."""
    args = [
        *_python(),
        "worker",
        *job.common(),
        "--rank",
        str(rank),
        "--bind",
        bind,
        "--ps",
        f"{ps}:{ps_port}",
        "--loss-bound",
        str(job.loss_bound),
        "--protect-fraction",
        str(job.protect_fraction),
        "--eval-every",
        str(job.eval_every),
        "--compute-s",
        str(job.compute_s),
    ]
    if ports == "any":
        args += ["--rx-port", "0", "--tx-port", "0"]
    if job.batch_size is not None:
        args += ["--batch-size", str(job.batch_size)]
    if job.compress != "none":
        args += ["--compress", job.compress]
    if not job.loss_feedback:
        args.append("--no-loss-feedback")
    if job.withhold:
        args.append("--withhold")
    if job.precision:
        args.append("--precision")
    if job.repair_drops:
        args.append("--repair-drops")
    if start_at:
        args += ["--start-at", str(start_at)]
    if start_delay:
        args += ["--start-delay", str(start_delay)]
    return [*args, *job.extra_worker]


@dataclass
class LocalRun:
    records: list[dict] = field(default_factory=list)  # every worker's per-iteration records
    ps_records: list[dict] = field(default_factory=list)
    summaries: list[dict] = field(default_factory=list)
    returncodes: dict[str, int] = field(default_factory=dict)
    stderr: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return bool(self.returncodes) and all(rc == 0 for rc in self.returncodes.values())

    def final_accuracy(self) -> float | None:
        accs = [r for r in self.records if "accuracy" in r]
        return max(accs, key=lambda r: r["iteration"])["accuracy"] if accs else None


def _reader(stream, into: list[dict], lock: threading.Lock, echo: bool) -> None:
    for line in stream:
        if echo:
            sys.stdout.write(line)
        try:
            row = json.loads(line)
        except ValueError:
            continue
        with lock:
            into.append(row)


PS_START_TIMEOUT = 60.0  # s for a local PS to import its model and bind its port


def _wait_listening(err_path: Path, proc: subprocess.Popen, deadline: float) -> None:
    """Block until the PS's stderr says it listens (``proto.PS_LISTENING``), the PS exits, or ``deadline``
    (monotonic) passes."""
    while time.monotonic() < deadline and proc.poll() is None:
        if proto.PS_LISTENING in err_path.read_text(errors="replace"):
            return
        time.sleep(0.05)


def run_local(
    job: TrainingJob,
    *,
    bind: str = "127.0.0.1",
    timeout: float = 600.0,
    echo: bool = False,
    worker_wrap=None,
    env: dict[str, str] | None = None,
    log_dir: Path | None = None,
) -> LocalRun:
    """PS + ``job.workers`` workers as child processes on ``bind`` (free shim ports). Blocks until they
    exit (or ``timeout``: then they are killed and the run is not ok). ``worker_wrap(rank, argv)`` may
    rewrite a worker's command (e.g. to inject loss). Each process's stderr goes to ``log_dir/NAME.err``
    (a temporary folder when None; its tail is kept in ``LocalRun.stderr``)."""
    run = LocalRun()
    lock = threading.Lock()
    t0 = time.monotonic()
    penv = {**os.environ, **(env or {})}
    procs: dict[str, subprocess.Popen] = {}
    readers: list[threading.Thread] = []
    tmp = None
    if log_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="mlfc-train-")
        log_dir = Path(tmp.name)
    log_dir.mkdir(parents=True, exist_ok=True)

    def start(name: str, argv: list[str], into: list[dict]) -> None:
        with (log_dir / f"{name}.err").open("w") as err:  # the child keeps its own copy of the descriptor
            p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True, env=penv, start_new_session=True)
        procs[name] = p
        th = threading.Thread(target=_reader, args=(p.stdout, into, lock, echo), daemon=True)
        th.start()
        readers.append(th)

    try:
        # A free shim port for the PS, so the workers start with it (they knock until it listens).
        probe = bind_shim_socket(bind, 0)
        port = probe.getsockname()[1]
        probe.close()
        start("ps", ps_argv(job, bind, port=port, ports="any"), run.ps_records)
        # Until the PS holds that port, a worker's own socket could take it (its free-port pick sees it free):
        # the workers start once the PS says it listens (or it has exited: its stderr tells why).
        _wait_listening(log_dir / "ps.err", procs["ps"], min(t0 + timeout, time.monotonic() + PS_START_TIMEOUT))
        for rank in range(job.workers):
            argv = worker_argv(job, rank, bind, bind, ps_port=port, ports="any")
            start(f"w{rank}", worker_wrap(rank, argv) if worker_wrap else argv, run.records)
        end = t0 + timeout
        for name, p in procs.items():
            try:
                run.returncodes[name] = p.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                run.returncodes[name] = -9
                _kill_all(procs)
    finally:
        _kill_all(procs)
        for th in readers:
            th.join(timeout=5)
        for name in procs:
            run.stderr[name] = (log_dir / f"{name}.err").read_text(errors="replace")[-4000:]
        if tmp is not None:
            tmp.cleanup()
    with lock:
        run.summaries = [r for r in run.records + run.ps_records if r.get("summary")]
        run.records = [r for r in run.records if not r.get("summary")]
        run.ps_records = [r for r in run.ps_records if not r.get("summary")]
    run.records.sort(key=lambda r: (r["worker"], r["iteration"]))
    run.seconds = time.monotonic() - t0
    return run


def _kill_all(procs: dict[str, subprocess.Popen]) -> None:
    for p in procs.values():
        terminate(p, signal.SIGKILL, grace_s=5.0)  # a crash: the run is over or timed out
