"""The transport's per-chunk loops compiled (fastpath.c): built by ``make install`` (``mlfc-transport build``)
with the machine's C compiler, loaded with ctypes, used where present.

Where the library is missing (no compiler, not built) or its source changed since it was built, ``load()``
returns None and says why in ``status()``; the transport then runs the numpy paths, which stay the
reference (the tests compare the two byte for byte). The library is named by its source's hash, so a
stale build is never loaded. Build directory: ``build/`` beside the source, or ``$MLFC_FASTPATH_BUILD``.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np

from mlfc.wire import Layout

SOURCE = Path(__file__).resolve().parent / "fastpath.c"
CFLAGS = ("-O3", "-shared", "-fPIC", "-std=c11", "-Wall", "-Werror")


class FastPathError(RuntimeError):
    """The compiled path could not be built."""


class Field(ctypes.Structure):
    """struct mlfc_field: where one header field sits (Layout.locate)."""

    _fields_ = [("offset", ctypes.c_uint32), ("bytes", ctypes.c_uint32), ("shift", ctypes.c_uint32),
                ("width", ctypes.c_uint32)]  # fmt: skip


def fields(layout: Layout, *names: str) -> ctypes.Array:
    """The C description of ``names`` in ``layout``, in that order."""
    return (Field * len(names))(*(Field(*layout.locate(name)) for name in names))


def build_dir() -> Path:
    return Path(os.environ.get("MLFC_FASTPATH_BUILD") or SOURCE.parent / "build")


def library_path() -> Path:
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    return build_dir() / f"libmlfc_fastpath-{digest}.so"


def compiler() -> str | None:
    for cc in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cc and shutil.which(cc):
            return cc
    return None


def build(*, force: bool = False) -> Path:
    """Compile fastpath.c into the build directory (once per source version); returns the library."""
    out = library_path()
    if out.exists() and not force:
        return out
    cc = compiler()
    if cc is None:
        raise FastPathError("no C compiler (cc, gcc or clang; Debian: apt-get install gcc): the numpy paths run")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".{os.getpid()}.tmp")  # concurrent builds: each writes its own, then renames
    proc = subprocess.run([cc, *CFLAGS, "-o", str(tmp), str(SOURCE)], capture_output=True, text=True)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise FastPathError(f"{cc} failed on {SOURCE.name}:\n{proc.stderr.strip()}")
    tmp.replace(out)
    for old in out.parent.glob("libmlfc_fastpath-*.so"):  # earlier versions of the source
        if old != out:
            old.unlink(missing_ok=True)
    return out


_P = ctypes.c_void_p
_N = ctypes.c_size_t


class FastPath:
    """The loaded library's three functions, typed. Buffers are passed as addresses: callers keep them
    alive and sized as each function's comment in fastpath.c says."""

    def __init__(self, path: Path) -> None:
        lib = ctypes.CDLL(str(path))
        self.path = path
        self.abs_means = lib.mlfc_abs_means
        self.abs_means.argtypes = [_P, _N, _N, _P]
        self.abs_means.restype = None
        self.fill_run = lib.mlfc_fill_run
        self.fill_run.argtypes = [_P, _N, _N, _P, _N, _N, _N, _N, _N, _P, _P, ctypes.c_uint8, _P, ctypes.c_uint8]
        self.fill_run.restype = _N
        self.place_run = lib.mlfc_place_run
        self.place_run.argtypes = [_P, _N, _N, _N, _P, _P, _P, ctypes.c_uint32, _P, _N, _N, _P, _N, _P]
        self.place_run.restype = _N


_status = "not loaded yet"


@functools.cache
def load() -> FastPath | None:
    """The built library, or None (``status()`` says why)."""
    global _status
    try:
        path = library_path()
    except OSError as exc:  # the source is not installed beside this module
        _status = f"no source: {exc}"
        return None
    if not path.exists():
        _status = f"not built ({path.name} missing; `mlfc-transport build` or `make install`): numpy paths"
        return None
    try:
        fp = FastPath(path)
    except OSError as exc:
        _status = f"cannot load {path}: {exc}"
        return None
    _status = f"loaded {path}"
    return fp


def status() -> str:
    load()
    return _status


def address(buf) -> int:
    """The address of a writable buffer (bytearray, numpy array) or a read-only one (bytes, memoryview)."""
    return np.frombuffer(buf, dtype=np.uint8).ctypes.data
