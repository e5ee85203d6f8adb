"""Ending a child process: the one stop of every process mlfc starts (a job's processes, a local training run's,
the lab's switches and daemons through ``mlfc.launch.process``). Here, in the product, because the product's
own launcher (``mlfc.hosts.training.launch``) stops its processes too and must not import the lab's side."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess


def terminate(
    proc: subprocess.Popen, sig: signal.Signals = signal.SIGTERM, grace_s: float = 5.0, kill_wait_s: float = 5.0
) -> int | None:
    """End ``proc``: ``sig`` to its process group (to the process alone if it leads none), SIGKILL to the
    same after ``grace_s``, then reap it. Returns its exit code (at once if it had already exited); raises
    ``subprocess.TimeoutExpired`` if it outlives SIGKILL by ``kill_wait_s`` (a process stuck in the kernel)."""
    if proc.poll() is None:
        group = leads_group(proc)
        signal_process(proc, sig, group)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            signal_process(proc, signal.SIGKILL, group)
            proc.wait(timeout=kill_wait_s)
    return proc.returncode


def leads_group(proc: subprocess.Popen) -> bool:
    # Only a group leader's group is its own to end (start_new_session); otherwise the group is ours.
    try:
        return os.getpgid(proc.pid) == proc.pid
    except ProcessLookupError:
        return False


def signal_process(proc: subprocess.Popen, sig: signal.Signals, group: bool) -> None:
    """``sig`` to the process group of ``proc`` (``group``) or to the process alone."""
    # Gone meanwhile, or not ours to signal (run as another user): the wait that follows decides.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
