"""mlfc's own daemons as child processes: the controller, the coordinator, and any command line.

with ControllerProcess(config_path) as ctl:      # ready once its intent API answers
    ctl.client.apply(intent)
    ctl.client.wait_synced()
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from mlfc.controller.client import IntentClient
from mlfc.controller.config import DeploymentConfig, load_config
from mlfc.launch.process import ManagedProcess, listening

VENV_BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    """An mlfc console script of this environment (``mlfc-controller``, ``mlfc-agent``, ...)."""
    path = VENV_BIN / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if not found:
        raise FileNotFoundError(f"{name} not found: run `make install`")
    return found


class CommandProcess(ManagedProcess):
    """Any long-running command; ready when its ``ports`` listen (none given: as soon as it runs)."""

    def __init__(self, name: str, cmd: list[str], log_file: Path, ports: list[int] | None = None) -> None:
        super().__init__(name, log_file)
        self.cmd = cmd
        self.program = Path(cmd[0]).name
        self._ports = list(ports or [])

    def command(self) -> list[str]:
        return self.cmd

    def ports(self) -> list[int]:
        return self._ports


class ControllerProcess(ManagedProcess):
    """``mlfc-controller run --config FILE``; ready once its intent API answers Status."""

    program = "mlfc-controller"
    stop_grace_s = 10.0

    def __init__(self, config_path: Path | str, log_file: Path | str | None = None, log_level: str = "INFO") -> None:
        self.config_path = Path(config_path)
        self.config: DeploymentConfig = load_config(self.config_path)
        super().__init__("controller", Path(log_file) if log_file else self.config_path.with_suffix(".log"))
        self.log_level = log_level
        self.client = IntentClient(self.intent_addr)

    @property
    def intent_addr(self) -> str:
        return self.config.controller.intent_addr

    def command(self) -> list[str]:
        return [sys.executable, "-m", "mlfc.controller.cli", "run", "--config", str(self.config_path),
                "--log-level", self.log_level]  # fmt: skip

    def ports(self) -> list[int]:
        return [int(self.intent_addr.rsplit(":", 1)[1])]

    def ready(self) -> bool:
        if not listening(self.ports()[0], self.intent_addr.rsplit(":", 1)[0]):
            return False
        try:
            self.client.status(timeout_s=0.5)
        except Exception:
            return False
        return True
