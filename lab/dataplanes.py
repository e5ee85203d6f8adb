"""Which switch runs the dataplane: BMv2 (the product's P4 target) or mlfc's reference switch."""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from mlfc.launch.switches import Bmv2Switch, RefSwitch, SwitchProcess, bmv2_binary, bmv2_missing, thrift_missing


class DataplaneMissing(RuntimeError):
    pass


@dataclass(frozen=True)
class Dataplane:
    name: str  # bmv2 | ref
    label: str
    switch: type[SwitchProcess]
    priorities_only: bool = False  # in `--dataplane both`, run only the treatments that use switch priorities

    @property
    def target(self) -> str:
        """The deployment file's ``target`` for these switches."""
        return self.switch.target


BMV2 = Dataplane("bmv2", "BMv2 (per-queue rate limits)", Bmv2Switch)
REF = Dataplane("ref", "reference switch (one shared port rate)", RefSwitch)


def describe(plane: Dataplane) -> str:
    """The dataplane and, for BMv2, which build runs (results depend on it: docs/toolchain.md)."""
    if plane.name == "bmv2":
        return f"{plane.label}: {shutil.which(bmv2_binary()) or bmv2_binary()}"
    return plane.label


def select(choice: str) -> list[Dataplane]:
    missing = bmv2_missing()
    if choice == "bmv2":
        if missing:
            raise DataplaneMissing(missing)
        return [BMV2]
    if choice == "ref":
        return [REF]
    if choice == "both":
        if missing:
            raise DataplaneMissing(missing)
        return [BMV2, Dataplane(REF.name, REF.label, REF.switch, priorities_only=True)]
    if shutil.which(bmv2_binary()) and shutil.which("simple_switch_CLI") and (broken := thrift_missing()):
        # BMv2 is installed but could not shape a queue: falling back quietly would hide a broken install.
        raise DataplaneMissing(broken)
    return [REF] if missing else [BMV2]
