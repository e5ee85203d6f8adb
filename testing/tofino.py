"""Where this machine's open-source Tofino compiler (p4c with its Tofino backend, built into its own
prefix: docs/tofino.md) and the tna.p4 include live, for the tests that use them."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

P4C_TOFINO = os.environ.get("MLFC_P4C_TOFINO", "/opt/p4c-tofino/bin/p4c")
# tna.p4 and the tofino*.p4 it includes: installed beside the compiler, or in a p4c source tree.
TNA_INCLUDES = tuple(
    Path(p)
    for p in (
        os.environ.get("MLFC_TNA_INCLUDE", ""),
        Path(P4C_TOFINO).parent.parent / "share" / "p4c" / "p4include",
        "/opt/src/p4c-1.2.5.16/backends/tofino/bf-p4c/p4include",
    )
    if p
)


def tofino_compiler_missing() -> str | None:
    if shutil.which(P4C_TOFINO) and (Path(P4C_TOFINO).parent / "p4c-barefoot").exists():
        return None
    return f"{P4C_TOFINO} with p4c-barefoot not installed (set MLFC_P4C_TOFINO; docs/tofino.md)"


def tna_include() -> Path | None:
    return next((d for d in TNA_INCLUDES if (d / "tna.p4").is_file()), None)


def stale_committed_outputs() -> str | None:
    """Why the committed Tofino outputs (p4src/build/tofino/) do not meet mlfc/contract.py, or None when
    they do. They are compiled only where the Tofino compiler is (``make p4-tofino``, docs/tofino.md), so a
    change to the contract and p4src/tna/ can land before them; the tests that read them skip with this."""
    from mlfc import contract
    from mlfc.controller.pipeline import Pipeline, PipelineError

    if not contract.TOFINO_P4INFO.is_file():
        return None
    try:
        Pipeline.load_tofino(device_config=False)
    except PipelineError as exc:
        return f"p4src/build/tofino/ predates p4src/tna/ (uncompiled: run make p4-tofino): {exc}"
    return None
