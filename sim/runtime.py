"""Loading ns-3 (PyPI ``ns3``, cppyy bindings) and JIT-compiling mlfc's C++ parts, once per process.

``ns3``'s own ``from ns import ns`` includes every module's headers (Wi-Fi, LTE, ...), ~40 s on a busy
2-core machine, and exits the interpreter when the package is missing. mlfc needs six modules, so it
loads those libraries and headers itself (~10 s), then compiles ``cpp/mlfc_sim.h``. ``missing()``
says why the simulator cannot run without importing anything heavy.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import threading
import time
from pathlib import Path
from types import SimpleNamespace

NS3_REQUIREMENT = "ns3==3.44.post0"
NS3_VERSION = "3.44"
INSTALL_HINT = f"install it with `make install-sim` (pip install '.[sim]', i.e. {NS3_REQUIREMENT})"
# Libraries in dependency order, and the module headers mlfc's C++ includes.
_LIBRARIES = ("core", "stats", "network", "bridge", "traffic-control", "internet", "point-to-point")
_HEADERS = ("core", "network", "internet", "point-to-point", "traffic-control")
CPP_SOURCE = Path(__file__).with_name("cpp") / "mlfc_sim.h"

_lock = threading.Lock()
_loaded: SimpleNamespace | None = None
load_seconds = 0.0


def _ns3_prefix() -> Path | None:
    spec = importlib.util.find_spec("ns3")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def missing() -> str | None:
    """Why the simulator cannot run here (None: it can). Imports neither ns-3 nor cppyy."""
    prefix = _ns3_prefix()
    if prefix is None:
        return f"ns-3 Python package not installed: {INSTALL_HINT}"
    if importlib.util.find_spec("cppyy") is None:
        return f"cppyy (ns-3's binding layer) not installed: {INSTALL_HINT}"
    core = glob.glob(str(prefix / "lib*" / "libns3*-core.so"))
    if not core:
        return f"ns-3 libraries not found under {prefix}: reinstall with `make install-sim`"
    if f"libns{NS3_VERSION}-" not in os.path.basename(core[0]):
        return f"ns-3 {os.path.basename(core[0])} found, mlfc.sim is built for {NS3_VERSION}: {INSTALL_HINT}"
    return None


def load() -> SimpleNamespace:
    """``ns`` (namespace ns3) and ``mlfc`` (namespace mlfcsim), compiled on first call."""
    global _loaded, load_seconds
    with _lock:
        if _loaded is not None:
            return _loaded
        reason = missing()
        if reason:
            raise RuntimeError(reason)
        t0 = time.monotonic()
        prefix = _ns3_prefix()
        assert prefix is not None
        import cppyy
        import libcppyy  # shipped with cppyy: ns-3's Ptr<T> as a smart pointer

        libcppyy.AddSmartPtrType("Ptr")
        libdir = next(p for p in (prefix / "lib64", prefix / "lib") if p.is_dir())
        cppyy.add_library_path(str(libdir))
        cppyy.add_include_path(str(prefix / "include"))
        # Libraries first, headers second: the other order leaves cling unable to run nstime.h's
        # static initialiser ("Failed to materialize symbols").
        for lib in _LIBRARIES:
            cppyy.load_library(f"libns{NS3_VERSION}-{lib}.so")
        for module in _HEADERS:
            cppyy.include(f"ns3/{module}-module.h")
        cppyy.add_include_path(str(CPP_SOURCE.parent))
        cppyy.include(str(CPP_SOURCE))
        _loaded = SimpleNamespace(ns=cppyy.gbl.ns3, mlfc=cppyy.gbl.mlfcsim, cppyy=cppyy)
        load_seconds = time.monotonic() - t0
        return _loaded
