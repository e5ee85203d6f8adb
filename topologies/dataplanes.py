"""Which switch runs the dataplane: BMv2 (the product's P4 target) or mlfc's reference switch."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mlfc.topologies.bmv2 import bmv2_binary, bmv2_missing, free_port
from mlfc.topologies.mininet_net import SwitchFactory, bmv2_factory

if TYPE_CHECKING:
    from mlfc.refswitch.switch import RefSwitch


class DataplaneMissing(RuntimeError):
    pass


@dataclass(frozen=True)
class Dataplane:
    name: str  # bmv2 | ref
    label: str
    factory: SwitchFactory
    target: str  # the controller's queue adapter for it
    priorities_only: bool = False  # in `--dataplane both`, run only the treatments that use switch priorities


def ref_factory(name: str, device_id: int, ports: dict[int, str], log_dir: Path | None) -> RefSwitch:
    """A reference-switch process; its ``thrift_port`` is the admin port (same queue command lines), which
    the deployment file passes to the controller's ``refswitch`` target."""
    from mlfc.refswitch.switch import RefSwitch

    log = log_dir / f"{name}.log" if log_dir else None
    return RefSwitch(
        name=name,
        device_id=device_id,
        ports=ports,
        grpc_port=free_port(),
        admin_port=free_port(),
        queue_mode="shared",
        log_file=log,
    )


BMV2 = Dataplane("bmv2", "BMv2 (per-queue rate limits)", bmv2_factory, "bmv2")
REF = Dataplane("ref", "reference switch (one shared port rate)", ref_factory, "refswitch")


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
        return [BMV2, Dataplane(REF.name, REF.label, REF.factory, REF.target, priorities_only=True)]
    return [REF] if missing else [BMV2]
