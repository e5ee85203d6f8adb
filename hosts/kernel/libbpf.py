"""The few libbpf (libbpf.so.1, Debian's ``libbpf1``) calls the loader needs, through ctypes.

libbpf opens and loads an object, the loader fills its maps, then ``bpf_map__attach_struct_ops``
registers the congestion control (a map update on the struct_ops map). Without ``BPF_F_LINK`` the
kernel keeps a registered struct_ops — and the programs and maps it uses — after this process exits,
until the struct_ops map's element is deleted (:func:`unregister_struct_ops`), which is what
``bpftool struct_ops register/unregister`` do too. The returned link object is deliberately never
destroyed: destroying it would unregister.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from collections.abc import Iterator
from dataclasses import dataclass

from mlfc.hosts.kernel import KernelMltcpError

BPF_MAP_TYPE_STRUCT_OPS = 26  # enum bpf_map_type
BPF_OBJ_NAME_LEN = 16
BPF_ANY = 0
# enum bpf_struct_ops_state: the second u32 of a struct_ops map's value
STRUCT_OPS_STATES = {0: "init", 1: "in use", 2: "to be freed", 3: "ready"}


class _MapInfo(ctypes.Structure):
    """The stable head of ``struct bpf_map_info`` (the kernel fills at most the length we pass)."""

    _fields_ = [
        ("type", ctypes.c_uint32),
        ("id", ctypes.c_uint32),
        ("key_size", ctypes.c_uint32),
        ("value_size", ctypes.c_uint32),
        ("max_entries", ctypes.c_uint32),
        ("map_flags", ctypes.c_uint32),
        ("name", ctypes.c_char * BPF_OBJ_NAME_LEN),
    ]


class _TestRunOpts(ctypes.Structure):
    """``struct bpf_test_run_opts`` of libbpf 1.x (its ``sz`` field makes it forward compatible)."""

    _fields_ = [
        ("sz", ctypes.c_size_t),
        ("data_in", ctypes.c_void_p),
        ("data_out", ctypes.c_void_p),
        ("data_size_in", ctypes.c_uint32),
        ("data_size_out", ctypes.c_uint32),
        ("ctx_in", ctypes.c_void_p),
        ("ctx_out", ctypes.c_void_p),
        ("ctx_size_in", ctypes.c_uint32),
        ("ctx_size_out", ctypes.c_uint32),
        ("retval", ctypes.c_uint32),
        ("repeat", ctypes.c_int),
        ("duration", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("cpu", ctypes.c_uint32),
        ("batch_size", ctypes.c_uint32),
    ]


_lib: ctypes.CDLL | None = None


def lib() -> ctypes.CDLL:
    global _lib
    if _lib is None:
        name = ctypes.util.find_library("bpf") or "libbpf.so.1"
        try:
            handle = ctypes.CDLL(name, use_errno=True)
        except OSError as exc:
            raise KernelMltcpError(f"libbpf not found ({exc}): apt-get install libbpf1 (or libbpf-dev)") from exc
        p, i, u32, vp = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p
        for fn, res, args in (
            ("bpf_object__open_file", p, [ctypes.c_char_p, vp]),
            ("bpf_object__load", i, [p]),
            ("bpf_object__close", None, [p]),
            ("bpf_object__find_map_by_name", p, [p, ctypes.c_char_p]),
            ("bpf_object__find_program_by_name", p, [p, ctypes.c_char_p]),
            ("bpf_map__fd", i, [p]),
            ("bpf_program__fd", i, [p]),
            ("bpf_map__attach_struct_ops", p, [p]),
            ("bpf_map_update_elem", i, [i, vp, vp, ctypes.c_uint64]),
            ("bpf_map_lookup_elem", i, [i, vp, vp]),
            ("bpf_map_delete_elem", i, [i, vp]),
            ("bpf_map_get_next_key", i, [i, vp, vp]),
            ("bpf_map_get_next_id", i, [u32, ctypes.POINTER(u32)]),
            ("bpf_map_get_fd_by_id", i, [u32]),
            ("bpf_obj_get_info_by_fd", i, [i, vp, ctypes.POINTER(u32)]),
            ("bpf_prog_test_run_opts", i, [i, ctypes.POINTER(_TestRunOpts)]),
        ):
            f = getattr(handle, fn)
            f.restype, f.argtypes = res, args
        _lib = handle
    return _lib


def _check(rc: int, what: str) -> int:
    """libbpf 1.x returns -errno (and sets errno) on failure."""
    if rc < 0:
        code = -rc if rc != -1 else (ctypes.get_errno() or errno.EPERM)
        raise OSError(code, f"{what}: {os.strerror(code)}")
    return rc


class BpfObject:
    """An opened and loaded BPF object file; ``close()`` releases this process's descriptors only."""

    def __init__(self, path: str) -> None:
        self.path = path
        ptr = lib().bpf_object__open_file(path.encode(), None)
        if not ptr:
            code = ctypes.get_errno() or errno.EINVAL
            raise OSError(code, f"opening {path}: {os.strerror(code)}")
        self._obj = ptr
        self.loaded = False

    def load(self) -> None:
        _check(lib().bpf_object__load(self._obj), f"loading {self.path} (the verifier's log, if any, is above)")
        self.loaded = True

    def map_fd(self, name: str) -> int:
        m = lib().bpf_object__find_map_by_name(self._obj, name.encode())
        if not m:
            raise KernelMltcpError(f"{self.path} has no map {name!r}: rebuild with `mlfc-mltcp build --force`")
        return _check(lib().bpf_map__fd(m), f"map {name}")

    def prog_fd(self, name: str) -> int:
        p = lib().bpf_object__find_program_by_name(self._obj, name.encode())
        if not p:
            raise KernelMltcpError(f"{self.path} has no program {name!r}")
        return _check(lib().bpf_program__fd(p), f"program {name}")

    def attach_struct_ops(self, map_name: str) -> None:
        m = lib().bpf_object__find_map_by_name(self._obj, map_name.encode())
        if not m:
            raise KernelMltcpError(f"{self.path} has no struct_ops {map_name!r}")
        link = lib().bpf_map__attach_struct_ops(m)
        if not link:
            code = ctypes.get_errno() or errno.EINVAL
            raise OSError(code, f"registering {map_name}: {os.strerror(code)}")
        # The link is leaked on purpose (see the module docstring).

    def close(self) -> None:
        if self._obj:
            lib().bpf_object__close(self._obj)
            self._obj = None

    def __enter__(self) -> BpfObject:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def map_update(fd: int, key: bytes, value: bytes) -> None:
    k, v = ctypes.create_string_buffer(key, len(key)), ctypes.create_string_buffer(value, len(value))
    _check(lib().bpf_map_update_elem(fd, k, v, BPF_ANY), "map update")


def map_lookup(fd: int, key: bytes, value_size: int) -> bytes | None:
    k, v = ctypes.create_string_buffer(key, len(key)), ctypes.create_string_buffer(value_size)
    rc = lib().bpf_map_lookup_elem(fd, k, v)
    if rc < 0:
        if -rc == errno.ENOENT or ctypes.get_errno() == errno.ENOENT:
            return None
        _check(rc, "map lookup")
    return v.raw


def map_delete(fd: int, key: bytes) -> None:
    k = ctypes.create_string_buffer(key, len(key))
    _check(lib().bpf_map_delete_elem(fd, k), "map delete")


def map_items(fd: int, key_size: int, value_size: int) -> Iterator[tuple[bytes, bytes]]:
    """Every (key, value) of a hash map; entries deleted meanwhile are skipped."""
    prev: ctypes.Array | None = None
    nxt = ctypes.create_string_buffer(key_size)
    while lib().bpf_map_get_next_key(fd, prev, nxt) == 0:
        key = nxt.raw
        value = map_lookup(fd, key, value_size)
        if value is not None:
            yield key, value
        prev = ctypes.create_string_buffer(key, key_size)


@dataclass(frozen=True)
class MapInfo:
    id: int
    type: int
    name: str
    key_size: int
    value_size: int
    max_entries: int


def map_info(fd: int) -> MapInfo:
    info = _MapInfo()
    size = ctypes.c_uint32(ctypes.sizeof(info))
    _check(lib().bpf_obj_get_info_by_fd(fd, ctypes.byref(info), ctypes.byref(size)), "map info")
    return MapInfo(info.id, info.type, info.name.decode(errors="replace"), info.key_size, info.value_size,
                   info.max_entries)  # fmt: skip


def open_map(map_id: int) -> int:
    return _check(lib().bpf_map_get_fd_by_id(map_id), f"map id {map_id}")


def maps() -> Iterator[tuple[int, MapInfo]]:
    """(fd, info) of every BPF map on the host; the caller closes each fd (``os.close``)."""
    cur = ctypes.c_uint32(0)
    nxt = ctypes.c_uint32(0)
    while lib().bpf_map_get_next_id(cur.value, ctypes.byref(nxt)) == 0:
        cur.value = nxt.value
        try:
            fd = open_map(cur.value)
        except OSError:  # freed meanwhile
            continue
        try:
            info = map_info(fd)
        except OSError:
            os.close(fd)
            continue
        yield fd, info


def prog_test_run(prog_fd: int, ctx: bytearray) -> int:
    """Run a BPF_PROG_TYPE_SYSCALL program once on ``ctx``; the kernel writes ``ctx`` back in place."""
    buf = (ctypes.c_char * len(ctx)).from_buffer(ctx)
    opts = _TestRunOpts(sz=ctypes.sizeof(_TestRunOpts), ctx_in=ctypes.addressof(buf), ctx_size_in=len(ctx))
    _check(lib().bpf_prog_test_run_opts(prog_fd, ctypes.byref(opts)), "BPF_PROG_TEST_RUN")
    return opts.retval
