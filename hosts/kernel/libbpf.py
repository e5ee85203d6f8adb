"""The few libbpf (libbpf.so.1, Debian's ``libbpf1``) calls the loader needs, through ctypes.

libbpf opens and loads an object, the loader fills its maps, then ``bpf_map__attach_struct_ops``
registers the congestion control (a map update on the struct_ops map). Without ``BPF_F_LINK`` the
kernel keeps a registered struct_ops — and the programs and maps it uses — after this process exits,
until the struct_ops map's element is deleted (:func:`unregister_struct_ops`), which is what
``bpftool struct_ops register/unregister`` do too. The returned link object is deliberately never
destroyed: destroying it would unregister.

The ECN marker (``marker.py``) uses libbpf's tc API: clsact and the filter are created over netlink in
the calling thread's network namespace.
"""

from __future__ import annotations

import contextlib
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


class _TcHook(ctypes.Structure):
    """``struct bpf_tc_hook``: where on a device (clsact ingress/egress) a tc program hangs."""

    _fields_ = [
        ("sz", ctypes.c_size_t),
        ("ifindex", ctypes.c_int),
        ("attach_point", ctypes.c_int),
        ("parent", ctypes.c_uint32),
        ("_pad", ctypes.c_uint32),
    ]


class _TcOpts(ctypes.Structure):
    """``struct bpf_tc_opts``: the filter (handle, priority) and its program."""

    _fields_ = [
        ("sz", ctypes.c_size_t),
        ("prog_fd", ctypes.c_int),
        ("flags", ctypes.c_uint32),
        ("prog_id", ctypes.c_uint32),
        ("handle", ctypes.c_uint32),
        ("priority", ctypes.c_uint32),
        ("_pad", ctypes.c_uint32),
    ]


BPF_TC_INGRESS, BPF_TC_EGRESS = 1, 2  # enum bpf_tc_attach_point
BPF_F_LOCK = 4  # map lookup/update under the value's bpf_spin_lock

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
            ("bpf_map_lookup_elem_flags", i, [i, vp, vp, ctypes.c_uint64]),
            ("bpf_prog_get_fd_by_id", i, [u32]),
            ("bpf_tc_hook_create", i, [ctypes.POINTER(_TcHook)]),
            ("bpf_tc_hook_destroy", i, [ctypes.POINTER(_TcHook)]),
            ("bpf_tc_attach", i, [ctypes.POINTER(_TcHook), ctypes.POINTER(_TcOpts)]),
            ("bpf_tc_detach", i, [ctypes.POINTER(_TcHook), ctypes.POINTER(_TcOpts)]),
            ("bpf_tc_query", i, [ctypes.POINTER(_TcHook), ctypes.POINTER(_TcOpts)]),
            ("libbpf_set_print", vp, [vp]),
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


def prog_test_run_skb(prog_fd: int, packet: bytes) -> tuple[int, bytes]:
    """Run a tc (BPF_PROG_TYPE_SCHED_CLS) program once on an Ethernet frame; returns its verdict and the
    frame as the program left it."""
    data_in = ctypes.create_string_buffer(packet, len(packet))
    data_out = ctypes.create_string_buffer(len(packet) + 256)
    opts = _TestRunOpts(sz=ctypes.sizeof(_TestRunOpts), data_in=ctypes.addressof(data_in),
                        data_size_in=len(packet), data_out=ctypes.addressof(data_out),
                        data_size_out=len(data_out))  # fmt: skip
    _check(lib().bpf_prog_test_run_opts(prog_fd, ctypes.byref(opts)), "BPF_PROG_TEST_RUN")
    return opts.retval, data_out.raw[: opts.data_size_out]


def map_lookup_locked(fd: int, key: bytes, value_size: int) -> bytes:
    """A map value read under its ``bpf_spin_lock`` (BPF_F_LOCK): a consistent snapshot."""
    k, v = ctypes.create_string_buffer(key, len(key)), ctypes.create_string_buffer(value_size)
    _check(lib().bpf_map_lookup_elem_flags(fd, k, v, BPF_F_LOCK), "map lookup (locked)")
    return v.raw


def prog_map_ids(prog_id: int) -> tuple[int, list[int]]:
    """A loaded program's fd (the caller closes it) and the ids of the maps it uses."""
    fd = _check(lib().bpf_prog_get_fd_by_id(prog_id), f"program id {prog_id}")
    # struct bpf_prog_info: nr_map_ids (u32) at offset 52, map_ids (u64 pointer) at 56
    info = ctypes.create_string_buffer(80)
    size = ctypes.c_uint32(80)
    _check(lib().bpf_obj_get_info_by_fd(fd, info, ctypes.byref(size)), "program info")
    count = ctypes.c_uint32.from_buffer(info, 52).value
    ids = (ctypes.c_uint32 * max(count, 1))()
    info = ctypes.create_string_buffer(80)
    ctypes.c_uint32.from_buffer(info, 52).value = count
    ctypes.c_uint64.from_buffer(info, 56).value = ctypes.addressof(ids)
    size = ctypes.c_uint32(80)
    _check(lib().bpf_obj_get_info_by_fd(fd, info, ctypes.byref(size)), "program info")
    return fd, list(ids)[: ctypes.c_uint32.from_buffer(info, 52).value]


def _tc(ifindex: int, handle: int, priority: int, prog_fd: int = 0) -> tuple[_TcHook, _TcOpts]:
    hook = _TcHook(sz=ctypes.sizeof(_TcHook), ifindex=ifindex, attach_point=BPF_TC_EGRESS)
    opts = _TcOpts(sz=ctypes.sizeof(_TcOpts), prog_fd=prog_fd, handle=handle, priority=priority)
    return hook, opts


_PRINT_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
_silent = _PRINT_FN(lambda level, fmt, args: 0)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """No libbpf messages meanwhile: for calls whose expected failures (no clsact yet, clsact already
    there) the kernel reports with an extended-ack message libbpf would print."""
    previous = lib().libbpf_set_print(ctypes.cast(_silent, ctypes.c_void_p))
    try:
        yield
    finally:
        lib().libbpf_set_print(previous)


def tc_clsact_create(ifindex: int) -> bool:
    """Add the clsact qdisc to a device of the calling thread's network namespace; False if it had one."""
    hook = _TcHook(sz=ctypes.sizeof(_TcHook), ifindex=ifindex, attach_point=BPF_TC_EGRESS)
    with _quiet():
        rc = lib().bpf_tc_hook_create(ctypes.byref(hook))
    if rc < 0 and -rc == errno.EEXIST:
        return False
    _check(rc, "creating clsact")
    return True


def tc_egress_attach(ifindex: int, prog_fd: int, handle: int, priority: int) -> int:
    """Attach a tc program (direct action) at clsact egress as filter (handle, priority); returns its id."""
    hook, opts = _tc(ifindex, handle, priority, prog_fd)
    _check(lib().bpf_tc_attach(ctypes.byref(hook), ctypes.byref(opts)), "attaching at clsact egress")
    return opts.prog_id


def tc_egress_query(ifindex: int, handle: int, priority: int) -> int | None:
    """The id of the program at clsact egress with this handle and priority, or None (also when the
    device has no clsact)."""
    hook, opts = _tc(ifindex, handle, priority)
    with _quiet():
        rc = lib().bpf_tc_query(ctypes.byref(hook), ctypes.byref(opts))
    if rc < 0:
        if -rc in (errno.ENOENT, errno.EINVAL):  # no such filter, or no clsact at all
            return None
        _check(rc, "querying clsact egress")
    return opts.prog_id


def tc_egress_detach(ifindex: int, handle: int, priority: int) -> None:
    hook, opts = _tc(ifindex, handle, priority)
    _check(lib().bpf_tc_detach(ctypes.byref(hook), ctypes.byref(opts)), "detaching from clsact egress")


def tc_clsact_delete(ifindex: int) -> bool:
    """Delete the device's clsact qdisc (with every filter on it); False if it had none."""
    hook = _TcHook(sz=ctypes.sizeof(_TcHook), ifindex=ifindex, attach_point=BPF_TC_INGRESS | BPF_TC_EGRESS)
    with _quiet():
        rc = lib().bpf_tc_hook_destroy(ctypes.byref(hook))
    if rc < 0 and -rc in (errno.ENOENT, errno.EINVAL):
        return False
    _check(rc, "deleting clsact")
    return True
