"""Run ``mlfc-controller run`` as a child process and talk to it (e2e runner, tests, benchmarks).

with ControllerProcess(config_path) as ctl:
    ctl.wait_synced()                          # every switch connected, primary, holding the defaults
    reply = ctl.apply(intent)                  # -> ApplyReply
    ctl.wait_synced(reply.generation)
    print(ctl.status())
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc

from mlfc.controller.config import DeploymentConfig, load_config
from mlfc.proto import intent_pb2 as pb
from mlfc.proto import intent_pb2_grpc as pb_grpc


class ControllerProcess:
    def __init__(self, config_path: Path | str, log_path: Path | str | None = None, log_level: str = "INFO") -> None:
        self.config_path = Path(config_path)
        self.config: DeploymentConfig = load_config(self.config_path)
        self.log_path = Path(log_path) if log_path else self.config_path.with_suffix(".log")
        self.log_level = log_level
        self.proc: subprocess.Popen[bytes] | None = None
        self._channel: grpc.Channel | None = None
        self.stub: pb_grpc.IntentServiceStub | None = None

    @property
    def intent_addr(self) -> str:
        return self.config.controller.intent_addr

    def start(self, timeout_s: float = 15.0) -> ControllerProcess:
        cmd = [
            sys.executable,
            "-m",
            "mlfc.controller.cli",
            "run",
            "--config",
            str(self.config_path),
            "--log-level",
            self.log_level,
        ]
        with self.log_path.open("ab") as out:
            self.proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        self._channel = grpc.insecure_channel(self.intent_addr)
        atexit.register(self.stop)  # no orphaned process if the caller forgets to stop it
        self.stub = pb_grpc.IntentServiceStub(self._channel)
        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mlfc-controller exited with {self.proc.returncode}: {self.tail()}")
            try:
                self.stub.Status(pb.StatusRequest(), timeout=0.5)
                return self
            except grpc.RpcError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"mlfc-controller did not answer on {self.intent_addr}: {self.tail()}") from None
                time.sleep(0.05)

    def stop(self) -> int | None:
        """SIGTERM (clean shutdown), SIGKILL if it hangs; returns the exit code."""
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        code = self.proc.returncode
        self.proc = None
        return code

    def __enter__(self) -> ControllerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def _stub(self) -> pb_grpc.IntentServiceStub:
        if self.stub is None:
            raise RuntimeError("controller not started")
        return self.stub

    def apply(self, intent: pb.Intent, timeout_s: float = 30.0) -> pb.ApplyReply:
        return self._stub().Apply(intent, timeout=timeout_s)

    def get(self) -> pb.GetReply:
        return self._stub().Get(pb.GetRequest(), timeout=5)

    def status(self) -> pb.StatusReply:
        return self._stub().Status(pb.StatusRequest(), timeout=5)

    def wait_synced(self, generation: int | None = None, timeout_s: float = 20.0) -> pb.StatusReply:
        """Until every switch is connected, primary and holds ``generation`` (default: the current one)."""
        deadline = time.monotonic() + timeout_s
        while True:
            st = self.status()
            want = st.generation if generation is None else generation
            if all(s.connected and s.primary and s.applied_generation >= want and s.pipeline for s in st.switches):
                return st
            if time.monotonic() > deadline:
                raise TimeoutError(f"switches not in sync with generation {want}: {st}")
            time.sleep(0.05)

    def tail(self, n: int = 3000) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-n:]
        return ""
