"""Kernel MLTCP (mlfc.hosts.kernel): the BPF programs build, register, carry TCP between network
namespaces, detect iterations, compute the Python policy's F, and unload without leftovers.

Needs root, kernel BTF with struct_ops, clang, libbpf-dev and bpftool; each test that needs them
skips with the missing piece named. The load/unload tests skip when mltcp_* is already registered
by someone else (they would not know what to restore)."""

from __future__ import annotations

import argparse
import dataclasses
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from mlfc.hosts.kernel import KernelMltcpError, build, cli, libbpf, loader, namespaces, params
from mlfc.policy.mltcp import IterationDetection, MltcpParams, bytes_ratio, mltcp_factor
from mlfc.testing.netns import NetnsLab, in_netns


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root (BPF, network namespaces)"
    if not build.BTF_PATH.exists():
        return f"{build.BTF_PATH} missing: kernel without BTF"
    try:
        build.find_toolchain()
    except KernelMltcpError as exc:
        return str(exc)
    try:
        libbpf.lib()
    except KernelMltcpError as exc:
        return str(exc)
    return None


needs_kernel = pytest.mark.skipif(bool(_missing()), reason=f"[kernel] {_missing()}")


# ---- no kernel needed ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "p",
    [MltcpParams(2.0, 0.5), MltcpParams(1 / 3, 0.1), MltcpParams(16.0, 0.5, "step", knee=0.2),
     MltcpParams(2.0, 0.5, "power", exponent=0.5), MltcpParams(4.0, 0.25, "sigmoid", knee=0.3)],
    ids=str,
)  # fmt: skip
@pytest.mark.parametrize("group", [False, True])
def test_params_encode_decode_round_trip(p, group):
    d = IterationDetection(4.0, 0.005, 0.5, group=group)
    raw = params.encode(p, d)
    assert len(raw) == params.LAYOUT.size == 320  # sizeof(struct mltcp_params)
    kp = params.decode(raw)
    assert kp.version == params.PARAMS_VERSION and kp.ready
    assert kp.params == p and kp.detection == d  # exactly: the policy's numbers travel as doubles
    assert list(kp.table) == params.f_table(p)
    assert kp.table[0] == round(p.intercept * params.FP_ONE)
    assert kp.table[-1] == round((p.intercept + p.slope) * params.FP_ONE)
    assert struct.unpack_from("<I", raw, params.LAYOUT.size - 4)[0] == group  # the last word, mltcp_params.group


def test_group_is_validated_and_off_by_default():
    assert IterationDetection().group is False
    with pytest.raises(ValueError, match="group"):
        IterationDetection(group=1)  # type: ignore[arg-type]


def test_cli_group_options():
    ap = argparse.ArgumentParser()
    cli._policy_args(ap)
    base = (None, IterationDetection(4.0, 0.05, group=True))
    got = [cli._policy(ap.parse_args(argv), base)[1] for argv in (["--group"], ["--no-group"], [])]
    assert [d.group for d in got] == [True, False, True]  # not given: kept from the values loaded now
    assert all(d.idle_min == 0.05 for d in got)
    assert "one progress per job (--group)" in cli._describe(MltcpParams(), got[0])
    assert "progress per connection" in cli._describe(MltcpParams(), got[1])


def test_params_table_samples_the_policy_at_the_knots():
    p = MltcpParams(2.0, 0.5, "power", exponent=0.5)
    table = params.f_table(p)
    assert len(table) == params.F_KNOTS + 1
    for i, fp in enumerate(table):
        assert fp == round(mltcp_factor(i / params.F_KNOTS, p) * params.FP_ONE)
    # the interpolation's mirror: a knot is its own value, a midpoint the mean of its neighbours
    assert params.table_f_fp(table, 16 * params.FP_ONE // params.F_KNOTS) == table[16]
    mid = (2 * 16 + 1) * params.FP_ONE // (2 * params.F_KNOTS)
    assert params.table_f_fp(table, mid) == table[16] + (table[17] - table[16]) // 2
    assert params.table_f_fp(table, params.FP_ONE) == params.table_f_fp(table, 5 * params.FP_ONE) == table[-1]


def test_params_refuse_the_bounded_rules():
    for rule in ("bounded", "bounded-start"):
        with pytest.raises(KernelMltcpError, match="only the additive increase"):
            params.encode(MltcpParams(7.0, 1.0, rule=rule), IterationDetection())


def test_params_decode_another_version_as_unset():
    old = struct.pack("<8I", 1, 1, 2 * params.FP_ONE, params.FP_ONE // 2, 4 * params.FP_ONE, 5000, 32768, 0)
    kp = params.decode(old)
    assert kp.version == 1 and kp.params is None and kp.detection is None
    v2 = bytearray(params.encode(MltcpParams(), IterationDetection()))  # version 2: the layout before `group`
    struct.pack_into("<I", v2, 0, 2)
    kp = params.decode(bytes(v2))
    assert kp.version == 2 and kp.params is None and kp.detection is None


def test_params_out_of_fixed_point_range_are_refused():
    with pytest.raises(KernelMltcpError, match="slope"):
        params.encode(MltcpParams(1e6, 0.5), IterationDetection())


def test_not_root_is_a_clear_error(monkeypatch, capsys):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert cli.main(["load"]) == 1
    assert "needs root" in capsys.readouterr().err


def test_missing_clang_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(build.shutil, "which", lambda name: None if "clang" in name else "/usr/bin/" + name)
    with pytest.raises(KernelMltcpError, match="clang"):
        build.find_toolchain()


def test_missing_btf_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(build, "BTF_PATH", tmp_path / "no-btf")
    with pytest.raises(KernelMltcpError, match="without BTF"):
        build.build(force=True)


def test_bad_policy_is_refused_by_the_cli(capsys):
    with pytest.raises(SystemExit) as exit_:  # refused when the arguments are parsed, before the kernel
        cli.main(["set", "--f", "2:0"])
    assert exit_.value.code == 2
    assert "intercept" in capsys.readouterr().err


def test_algorithms_and_their_names():
    assert {k: a.name for k, a in loader.ALGORITHMS.items()} == {
        "reno": "mltcp_reno", "cubic": "mltcp_cubic", "dctcp": "mltcp_dctcp"}  # fmt: skip
    assert loader.algorithm("dctcp") is loader.algorithm("mltcp_dctcp") is loader.ALGORITHMS["dctcp"]
    assert loader.algorithm("dctcp").params_map == "mltcp_d_params"  # <= 15 characters, as the kernel keeps
    assert [a.key for a in cli._cc_list("dctcp,reno")] == ["dctcp", "reno"]
    with pytest.raises(KernelMltcpError, match="reno, cubic, dctcp"):
        loader.algorithm("vegas")


def test_product_cli_does_not_import_the_lab():
    code = (
        "import sys, mlfc.hosts.kernel.cli, mlfc.hosts.kernel.loader; "
        "print([m for m in sys.modules if m.startswith(('mlfc.lab', 'mlfc.testing', 'mlfc.launch'))])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# ---- kernel -------------------------------------------------------------------------------------


@needs_kernel
def test_builds_from_scratch(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFC_BPF_BUILD", str(tmp_path))
    objs = build.build(force=True)
    assert [p.name for p in objs] == [f"{n}.bpf.o" for n in build.OBJECTS]
    assert all(p.stat().st_size > 0 for p in objs)
    assert build.up_to_date()


FTEST_TAIL = struct.Struct("<QQII")  # struct mltcp_ftest_ctx after its struct mltcp_params
# Every shape, with arguments on both sides of the defaults; slopes from flat to the step's 16.
F_GRID = [
    *(MltcpParams(s, i) for s in (0.0, 1.0, 2.0, 4.0, 16.0) for i in (0.125, 0.5, 1.0)),
    *(MltcpParams(s, 0.5, "power", exponent=e) for s in (2.0, 16.0) for e in (0.25, 0.5, 2.0, 3.0)),
    *(MltcpParams(s, i, "step", knee=k) for s, i in ((16.0, 0.5), (4.0, 0.25)) for k in (0.2, 0.25, 0.5, 0.9)),
    *(MltcpParams(s, 0.5, "sigmoid", knee=k) for s in (2.0, 16.0) for k in (0.2, 0.5, 0.8)),
]
BPI = 10_000_000


def _ftest_points() -> list[int]:
    """Byte counts for an iteration of BPI bytes: every knot, the midpoint of every interval, both sides
    of every knee in F_GRID, beyond the iteration, and a deterministic scatter."""
    knots = [BPI * i // params.F_KNOTS for i in range(params.F_KNOTS + 1)]
    mids = [BPI * (2 * i + 1) // (2 * params.F_KNOTS) for i in range(params.F_KNOTS)]
    knees = [round(BPI * k) + d for k in (0.2, 0.25, 0.5, 0.8, 0.9) for d in (-1, 0, 1)]
    scatter = [(i * 2_654_435_761) % BPI for i in range(1, 97)]
    return sorted({0, 1, 999, *knots, *mids, *knees, *scatter, BPI - 1, BPI, 2 * BPI})


def _run_ftest(fd: int, head: bytes, acked: int, per_iter: int) -> tuple[int, int]:
    ctx = bytearray(params.LAYOUT.size + FTEST_TAIL.size)
    ctx[: params.LAYOUT.size] = head
    struct.pack_into("<QQ", ctx, params.LAYOUT.size, acked, per_iter)
    assert libbpf.prog_test_run(fd, ctx) == 0
    _, _, ratio_fp, f_fp = FTEST_TAIL.unpack_from(ctx, params.LAYOUT.size)
    return ratio_fp, f_fp


@needs_kernel
def test_kernel_f_matches_the_python_policy_for_every_shape():
    """The BPF code's F (the table the loader writes, interpolated by mltcp_f_fp) is the Python mirror
    params.table_f_fp bit for bit, equals mltcp_factor at the knots, lies between the knots' values
    between them, and is mltcp_factor within rounding for the line."""
    build.ensure_built()
    points = _ftest_points()
    with libbpf.BpfObject(str(build.object_path("mltcp_ftest"))) as obj:
        obj.load()
        fd = obj.prog_fd("mltcp_ftest")
        checked = 0
        for p in F_GRID:
            head = params.encode(p, IterationDetection())
            table = params.f_table(p)
            for acked in points:
                for per_iter in (BPI, 0):
                    ratio_fp, f_fp = _run_ftest(fd, head, acked, per_iter)
                    want_ratio = bytes_ratio(acked, per_iter)
                    assert abs(params.from_fp(ratio_fp) - want_ratio) <= 2 / params.FP_ONE
                    assert f_fp == params.table_f_fp(table, ratio_fp), (p, acked, per_iter)
                    f = params.from_fp(f_fp)
                    # the knots around the ratio: F there is the policy's, and F between them lies between
                    pos = min(ratio_fp, params.FP_ONE) * params.F_KNOTS / params.FP_ONE
                    lo, hi = int(pos), min(int(pos) + 1, params.F_KNOTS)
                    f_lo, f_hi = (mltcp_factor(k / params.F_KNOTS, p) for k in (lo, hi))
                    ulp = 1 / params.FP_ONE
                    if pos == lo:  # on a knot
                        assert abs(f - f_lo) <= ulp, (p, acked, per_iter)
                    assert min(f_lo, f_hi) - ulp <= f <= max(f_lo, f_hi) + ulp, (p, acked, per_iter)
                    if p.linear:
                        assert abs(f - mltcp_factor(want_ratio, p)) <= (p.slope + 2) * ulp, (p, acked, per_iter)
                    checked += 1
    assert checked == len(F_GRID) * len(points) * 2


@needs_kernel
def test_kernel_step_is_a_ramp_of_one_interval_at_the_knee():
    """16:0.5:step=0.2 in the kernel: intercept up to knot 12/64 = 0.1875, intercept + slope from
    knot 13/64 = 0.203 on (the first knot at or past the knee), linear in between."""
    build.ensure_built()
    p = MltcpParams(16.0, 0.5, "step", knee=0.2)
    head = params.encode(p, IterationDetection())
    with libbpf.BpfObject(str(build.object_path("mltcp_ftest"))) as obj:
        obj.load()
        fd = obj.prog_fd("mltcp_ftest")

        def f(ratio: float) -> float:
            return params.from_fp(_run_ftest(fd, head, round(ratio * BPI), BPI)[1])

        assert f(0.0) == f(0.1875) == 0.5
        assert f(13 / 64) == f(0.5) == f(1.0) == 16.5
        assert f(0.1953125) == pytest.approx(8.5, abs=1e-3)  # half-way up the ramp
        assert 0.5 < f(0.199) < f(0.2) < 16.5  # Python's step is still 0.5 just below the knee


JTEST_IN = struct.Struct("<QQII")  # struct mltcp_jtest_ctx after its params: now_ns, threshold_ns, op, bytes
JOB = struct.Struct("<QQQQQII")  # struct mltcp_job
JTEST_OUT = struct.Struct("<IIII")  # began, ratio_fp, f_fp, pad
JTEST_RESET, JTEST_ACK, JTEST_START = 0, 1, 2
MS = 1_000_000


def _jtest(fd: int, head: bytes, op: int, now_ms: float = 0.0, nbytes: int = 0) -> dict[str, int]:
    """One step of a job through mltcp_job_begin / mltcp_job_on_ack (idle gap 50 ms); the job after it."""
    ctx = bytearray(params.LAYOUT.size + JTEST_IN.size + JOB.size + JTEST_OUT.size)
    ctx[: params.LAYOUT.size] = head
    JTEST_IN.pack_into(ctx, params.LAYOUT.size, round(now_ms * MS), 50 * MS, op, nbytes)
    assert libbpf.prog_test_run(fd, ctx) == 0
    off = params.LAYOUT.size + JTEST_IN.size
    acked, start, bpi, last_bytes, last_ns, iterations, last_f = JOB.unpack_from(ctx, off)
    began, ratio_fp, f_fp, _ = JTEST_OUT.unpack_from(ctx, off + JOB.size)
    return {"acked": acked, "this": acked - start, "bpi": bpi, "last_bytes": last_bytes, "last_ns": last_ns,
            "iterations": iterations, "last_f": last_f, "began": began, "ratio_fp": ratio_fp, "f_fp": f_fp}  # fmt: skip


@needs_kernel
def test_kernel_job_iteration_begins_once_for_its_connections():
    """Job grouping's bookkeeping in the BPF code (the congestion controls' mltcp_job_* functions, run by the
    test program): the connections of a job starting their iterations microseconds apart begin one job
    iteration; bytes from every connection count in it; the job's total feeds the EWMA when the next one
    begins, after the whole job was idle for the gap; a start within the gap (or with a clock behind the
    job's last activity) joins."""
    build.ensure_built()
    p = MltcpParams(2.0, 0.5)
    head = params.encode(p, IterationDetection(group=True))
    table = params.f_table(p)

    def f(ratio: float) -> int:
        return params.table_f_fp(table, round(ratio * params.FP_ONE))

    with libbpf.BpfObject(str(build.object_path("mltcp_ftest"))) as obj:
        obj.load()
        fd = obj.prog_fd("mltcp_jtest")
        _jtest(fd, head, JTEST_RESET)
        j = _jtest(fd, head, JTEST_START, 1000.0)  # the first connection's first data: a new job
        assert j["began"] == 1 and j["iterations"] == 1 and j["last_ns"] == 1000 * MS
        j = _jtest(fd, head, JTEST_START, 1000.01)  # the second connection, 10 us later: joins
        assert j["began"] == 0 and j["iterations"] == 1
        _jtest(fd, head, JTEST_ACK, 1001.0, 600_000)
        j = _jtest(fd, head, JTEST_ACK, 1002.0, 400_000)  # the other connection's bytes
        assert j["this"] == 1_000_000 and j["ratio_fp"] == 0 and j["f_fp"] == f(0)  # no estimate yet
        j = _jtest(fd, head, JTEST_START, 1152.0)  # 150 ms of compute: the job's second iteration
        assert j["began"] == 1 and j["iterations"] == 2
        assert j["bpi"] == j["last_bytes"] == 1_000_000 and j["this"] == 0
        assert j["last_f"] == f(0)  # the first iteration ended without an estimate, as a connection's does
        j = _jtest(fd, head, JTEST_START, 1152.02)
        assert j["began"] == 0 and j["iterations"] == 2
        j = _jtest(fd, head, JTEST_ACK, 1153.0, 250_000)
        assert j["ratio_fp"] == params.FP_ONE // 4 and j["f_fp"] == f(0.25)  # the job's ratio, of both connections
        j = _jtest(fd, head, JTEST_ACK, 1154.0, 1_750_000)
        assert j["ratio_fp"] == params.FP_ONE and j["f_fp"] == f(1.0)
        j = _jtest(fd, head, JTEST_START, 1164.0)  # 10 ms after the job's last ACK: within the gap, joins
        assert j["began"] == 0 and j["iterations"] == 2
        j = _jtest(fd, head, JTEST_START, 1100.0)  # a clock behind the job's last activity (another CPU)
        assert j["began"] == 0
        j = _jtest(fd, head, JTEST_START, 1354.0)
        assert j["began"] == 1 and j["iterations"] == 3
        assert j["last_bytes"] == 2_000_000 and j["bpi"] == 1_500_000  # EWMA 0.5 of 1 MB and 2 MB
        assert j["last_f"] == f(1.0)


@pytest.fixture(scope="module")
def loaded() -> Iterator[MltcpParams]:
    reason = _missing()
    if reason:
        pytest.skip(f"[kernel] {reason}")
    already = [a.name for a in loader.ALGORITHMS.values() if loader.registered(a)]
    if already:
        pytest.skip(f"{', '.join(already)} already registered outside the tests: not touching it")
    policy = MltcpParams(2.0, 0.5)
    # idle_min 50 ms: well above the 1 ms gaps inside a test iteration even when a loaded machine
    # stretches them, well below the 150 ms "compute phase" between iterations.
    detection = IterationDetection(idle_rtts=4.0, idle_min=0.05)
    before = {a.key: {m.id for m, _ in loader.struct_ops_maps(a)} for a in loader.ALGORITHMS.values()}
    loader.load(list(loader.ALGORITHMS.values()), policy, detection, log=lambda m: None)
    try:
        yield policy
    finally:
        with NetnsLab("ku") as lab:
            ns = namespaces.resolve(lab.namespace("u"))
            namespaces.set_default_cc(ns, "mltcp_reno")
            loader.unload(list(loader.ALGORITHMS.values()), fallback="reno", log=lambda m: None)
            assert namespaces.get_default_cc(ns) == "reno"  # moved off before unregistering
    # Unload leaves nothing behind: not registered, and this load's instances are gone.
    for a in loader.ALGORITHMS.values():
        assert not loader.registered(a)
        deadline = time.monotonic() + 5
        while (new := {m.id for m, _ in loader.struct_ops_maps(a)} - before[a.key]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not new, f"{a.name}: struct_ops maps {new} left after unload"


@pytest.fixture
def two_namespaces() -> Iterator[tuple[str, str]]:
    with NetnsLab("km") as lab:
        a, b = lab.namespace("a"), lab.namespace("b")
        lab.link(a, "10.81.1.1", b, "10.81.1.2")
        yield a, b


ITER_BYTES = 2_000_000
ITERATIONS = 5


def _serve(srv: socket.socket, errors: list[BaseException], accepted: list[socket.socket] | None = None) -> None:
    try:
        conn, _ = srv.accept()
    except BaseException as exc:
        errors.append(exc)
        return
    if accepted is not None:
        accepted.append(conn)
    _serve_bytes(conn, ITER_BYTES, errors)


def _cc_of(sock: socket.socket) -> str:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode()


TCPI_OPT_ECN = 8  # tcp_info.tcpi_options: ECN negotiated


def _tcp_info(sock: socket.socket) -> dict[str, int]:
    """The fields of struct tcp_info (linux/tcp.h) the tests read."""
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232)
    return {
        "options": raw[5],
        "snd_ssthresh": struct.unpack_from("<I", raw, 76)[0],
        "snd_cwnd": struct.unpack_from("<I", raw, 80)[0],
        "delivered": struct.unpack_from("<I", raw, 192)[0],
        "delivered_ce": struct.unpack_from("<I", raw, 196)[0],
    }


def _transfer(a: str, b: str, cc: str) -> tuple[loader.FlowState, float, dict[str, int]]:
    """ITERATIONS iterations of ITER_BYTES from namespace a to b, 150 ms apart, on ``cc`` (a's default);
    returns the connection's record (before close), the time spent sending and the sender's tcp_info."""
    alg = loader.algorithm(cc)
    srv = in_netns(b, lambda: socket.create_server(("10.81.1.2", 5201)))
    srv.settimeout(20)
    errors: list[BaseException] = []
    t = threading.Thread(target=_serve, args=(srv, errors), daemon=True)
    t.start()
    s = in_netns(a, lambda: socket.create_connection(("10.81.1.2", 5201), timeout=20))
    try:
        assert _cc_of(s) == cc
        assert any(x.cc == cc for x in namespaces.sockets(namespaces.resolve(a), {cc}))  # what `status` shows
        chunk = b"x" * (ITER_BYTES // 4)
        busy = 0.0
        for _ in range(ITERATIONS):
            t0 = time.monotonic()
            for _ in range(4):  # gaps of 1 ms inside an iteration: below the idle threshold
                s.sendall(chunk)
                time.sleep(0.001)
            assert s.recv(1) == b"k"
            busy += time.monotonic() - t0
            time.sleep(0.15)  # the "compute phase": above the threshold, so the next send starts an iteration
        mine = [f for f in loader.flows(alg) if f.local.startswith("10.81.1.1:")]
        assert len(mine) == 1
        info = _tcp_info(s)
    finally:
        s.close()
        t.join(10)
        srv.close()
    assert not errors, errors
    deadline = time.monotonic() + 3
    while any(f.local.startswith("10.81.1.1:") for f in loader.flows(alg)) and time.monotonic() < deadline:
        time.sleep(0.05)  # release runs when the kernel destroys the socket
    assert not any(f.local.startswith("10.81.1.1:") for f in loader.flows(alg))
    return mine[0], busy, info


@needs_kernel
@pytest.mark.parametrize("cc", ["mltcp_reno", "mltcp_cubic", "mltcp_dctcp"])
def test_transfer_between_namespaces_detects_iterations(loaded, two_namespaces, cc):
    a, b = two_namespaces
    namespaces.set_default_cc(namespaces.resolve(a), cc)
    assert namespaces.get_default_cc(namespaces.resolve(a)) == cc
    if cc == "mltcp_dctcp":  # ECN: the receiver's listener must use a congestion control that needs it too
        namespaces.set_default_cc(namespaces.resolve(b), cc)
    flow, busy, info = _transfer(a, b, cc)
    # Sane rate: 10 MB over a veth pair; a broken window (stuck at a few segments) fails this by far.
    rate = 8 * ITER_BYTES * ITERATIONS / busy
    assert rate > 50e6, f"{rate / 1e6:.0f} Mbit/s"
    assert flow.cwnd > 10  # grew from the initial window
    # The 5th iteration began after the 4th gap; the 1 ms gaps started none.
    assert flow.iterations == ITERATIONS
    assert flow.bytes_per_iteration == ITER_BYTES  # EWMA of equal iterations
    assert flow.last_f == pytest.approx(mltcp_factor(1.0, loaded), abs=1e-3)  # ended each iteration at ratio 1
    if cc == "mltcp_dctcp":
        assert info["options"] & TCPI_OPT_ECN  # negotiated, so the connection stayed on DCTCP
        assert info["delivered_ce"] == 0  # nothing marks on a bare veth pair


JOB_SHARES = (1_500_000, 500_000)  # one iteration of a two-connection job: the first's bytes, then the second's


def _serve_bytes(conn: socket.socket, nbytes: int, errors: list[BaseException]) -> None:
    try:
        with conn:
            buf = bytearray(1 << 20)
            for _ in range(ITERATIONS):
                got = 0
                while got < nbytes:
                    n = conn.recv_into(buf)
                    if not n:
                        raise ConnectionError("sender closed early")
                    got += n
                conn.sendall(b"k")
    except BaseException as exc:
        errors.append(exc)


def _job_transfer(a: str, b: str, cc: str, port: int) -> tuple[list[loader.FlowState], list[loader.JobState]]:
    """ITERATIONS iterations of a job with two connections from namespace a to b's ``port``: the first
    connection sends its share of JOB_SHARES, then (1 ms after its last ACK) the second its share, then
    150 ms of compute. Returns the two connections' records, the first's first, and the records of the
    job (``port``'s), both read before close (a FIN's ACK counts one byte)."""
    alg = loader.algorithm(cc)
    srv = in_netns(b, lambda: socket.create_server(("10.81.1.2", port)))
    srv.settimeout(20)
    errors: list[BaseException] = []
    threads: list[threading.Thread] = []
    socks: list[socket.socket] = []
    try:
        for _ in JOB_SHARES:
            socks.append(in_netns(a, lambda: socket.create_connection(("10.81.1.2", port), timeout=20)))
        assert all(_cc_of(s) == cc for s in socks)
        share = {s.getsockname()[1]: n for s, n in zip(socks, JOB_SHARES, strict=True)}
        for _ in socks:
            conn, peer = srv.accept()
            threads.append(threading.Thread(target=_serve_bytes, args=(conn, share[peer[1]], errors), daemon=True))
            threads[-1].start()
        for _ in range(ITERATIONS):
            for s, n in zip(socks, JOB_SHARES, strict=True):
                s.sendall(b"x" * n)
                assert s.recv(1) == b"k"  # all acknowledged: the reply carries the ACK
                time.sleep(0.001)
            time.sleep(0.15)
        records = {f.local: f for f in loader.flows(alg)}
        mine = [records[f"10.81.1.1:{s.getsockname()[1]}"] for s in socks]
        jobs = [j for j in loader.jobs(alg) if j.local == "10.81.1.1" and j.peer == f"10.81.1.2:{port}"]
    finally:
        for s in socks:
            s.close()
        for t in threads:
            t.join(10)
        srv.close()
    assert not errors, errors
    return mine, jobs


@needs_kernel
@pytest.mark.parametrize("cc, port", [("mltcp_reno", 5211), ("mltcp_cubic", 5212), ("mltcp_dctcp", 5213)])
def test_group_gives_a_jobs_connections_one_progress(loaded, two_namespaces, cc, port):
    """Grouping on (IterationDetection(group=True)): two connections of one job (same namespace, addresses
    and server port) take turns in each iteration. Each still counts its own iterations, but its F is the
    job's: the first connection ends its part at the job's ratio 1.5 MB / 2 MB (its own would be 1), the
    second at the job's iteration end, 1; both report the job's 5 iterations of 2 MB (the second joined the
    iteration the first began), and so does the job's record."""
    a, b = two_namespaces
    alg = loader.algorithm(cc)
    namespaces.set_default_cc(namespaces.resolve(a), cc)
    if cc == "mltcp_dctcp":  # ECN: the listener needs it too
        namespaces.set_default_cc(namespaces.resolve(b), cc)
    detection = IterationDetection(idle_rtts=4.0, idle_min=0.05)  # the fixture's
    loader.set_params([alg], loaded, dataclasses.replace(detection, group=True))
    try:
        (first, second), jobs = _job_transfer(a, b, cc, port)
    finally:
        loader.set_params([alg], loaded, detection)
    total = sum(JOB_SHARES)
    assert (first.iterations, second.iterations) == (ITERATIONS, ITERATIONS)
    assert (first.bytes_per_iteration, second.bytes_per_iteration) == JOB_SHARES
    assert (first.job_iterations, second.job_iterations) == (ITERATIONS, ITERATIONS)
    assert first.job_bytes_per_iteration == second.job_bytes_per_iteration == total
    assert first.last_f == pytest.approx(mltcp_factor(JOB_SHARES[0] / total, loaded), abs=1e-3)
    assert second.last_f == pytest.approx(mltcp_factor(1.0, loaded), abs=1e-3)
    assert len(jobs) == 1, jobs
    job = jobs[0]
    assert job.iterations == ITERATIONS
    assert job.bytes_per_iteration == job.last_iteration_bytes == job.this_iteration_bytes == total
    assert job.last_f == second.last_f  # the job's iteration ended where its second connection's did


@needs_kernel
def test_group_off_keeps_one_progress_per_connection(loaded, two_namespaces):
    """The same job with grouping off (the default): each connection's F from its own ratio, 1 at the end
    of its part; no job record."""
    a, b = two_namespaces
    alg = loader.algorithm("mltcp_reno")
    assert all(not kp.detection.group for kp in loader.read_params(alg) if kp.detection)
    namespaces.set_default_cc(namespaces.resolve(a), alg.name)
    (first, second), jobs = _job_transfer(a, b, alg.name, 5214)
    assert (first.iterations, second.iterations) == (ITERATIONS, ITERATIONS)
    assert (first.bytes_per_iteration, second.bytes_per_iteration) == JOB_SHARES
    assert first.last_f == second.last_f == pytest.approx(mltcp_factor(1.0, loaded), abs=1e-3)
    assert (first.job_iterations, first.job_bytes_per_iteration) == (second.job_iterations, 0) == (0, 0)
    assert not jobs


def _sysctl(ns: str, setting: str) -> None:
    subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw", setting], check=True)


@needs_kernel
@pytest.mark.parametrize(
    "sender_ecn, receiver_cc, receiver_ecn, negotiated",
    [
        (0, "mltcp_dctcp", 0, True),  # both ends need ECN: neither tcp_ecn matters
        (2, "reno", 1, False),  # an ECT SYN: a listener that does not need ECN refuses it, even tcp_ecn=1
        (1, "bbr", 2, False),  # the default tcp_ecn=2 (accept when asked) does not change that
    ],
)
def test_dctcp_negotiates_ecn_or_falls_back_to_mltcp_reno(
    loaded, two_namespaces, sender_ecn, receiver_cc, receiver_ecn, negotiated
):
    """What each namespace needs for MLTCP-DCTCP (docs/kernel-mltcp.md): the sender's tcp_ecn is
    irrelevant (TCP_CONG_NEEDS_ECN asks for ECN regardless), the receiver's listener must use a congestion
    control that needs ECN; without ECN the sender moves itself to mltcp_reno."""
    a, b = two_namespaces
    _sysctl(a, f"net.ipv4.tcp_ecn={sender_ecn}")
    _sysctl(b, f"net.ipv4.tcp_ecn={receiver_ecn}")
    namespaces.set_default_cc(namespaces.resolve(a), "mltcp_dctcp")
    namespaces.set_default_cc(namespaces.resolve(b), receiver_cc)
    no_ecn = loader.stats(loader.algorithm("dctcp"))["no_ecn"]
    srv = in_netns(b, lambda: socket.create_server(("10.81.1.2", 5202)))
    srv.settimeout(10)
    try:
        s = in_netns(a, lambda: socket.create_connection(("10.81.1.2", 5202), timeout=10))
        with s, srv.accept()[0] as conn:
            s.sendall(b"x" * 100_000)
            got = 0
            while got < 100_000:
                got += len(conn.recv(1 << 16))
            assert bool(_tcp_info(s)["options"] & TCPI_OPT_ECN) == negotiated
            assert bool(_tcp_info(conn)["options"] & TCPI_OPT_ECN) == negotiated
            assert _cc_of(s) == ("mltcp_dctcp" if negotiated else "mltcp_reno")
            assert _cc_of(conn) == receiver_cc
    finally:
        srv.close()
    assert loader.stats(loader.algorithm("dctcp"))["no_ecn"] == no_ecn + (0 if negotiated else 1)


# A tc egress program that marks every ECT IPv4 packet CE (test only: the product's marker is
# bpf/ecn_marker.bpf.c, a phantom queue).
MARK_ALL_CE = r"""
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

char LICENSE[] SEC("license") = "GPL";

SEC("tc")
int mark_all_ce(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	__u16 before, after;

	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(0x0800))
		return 0;
	if ((ip->tos & 3) == 0 || (ip->tos & 3) == 3)
		return 0; /* not ECT, or CE already */
	before = *(__u16 *)ip; /* version/ihl and tos: the checksum's first word, as on the wire */
	after = before | bpf_htons(3);
	ip->tos |= 3;
	bpf_l3_csum_replace(skb, sizeof(*eth) + __builtin_offsetof(struct iphdr, check), before, after, 2);
	return 0; /* TC_ACT_OK */
}
"""


@needs_kernel
def test_dctcp_window_follows_ce_marks(loaded, tmp_path):
    """Every data packet CE-marked on the sender's egress: the receiver echoes ECE, alpha goes to 1 and
    every window is halved, so the window stays at a few segments (> 10 unmarked: the transfer test)."""
    src, obj = tmp_path / "mark.bpf.c", tmp_path / "mark.bpf.o"
    src.write_text(MARK_ALL_CE)
    tools = build.find_toolchain()
    subprocess.run([tools.clang, "-O2", "-g", "-target", "bpf", f"-I{build.build_dir()}", "-c", str(src), "-o",
                    str(obj)], check=True)  # fmt: skip
    with NetnsLab("kd") as lab:
        a, b = lab.namespace("a"), lab.namespace("b")
        dev_a, _ = lab.link(a, "10.81.1.1", b, "10.81.1.2")
        lab.tc(a, "qdisc", "add", "dev", dev_a, "clsact")
        lab.tc(a, "filter", "add", "dev", dev_a, "egress", "bpf", "direct-action", "obj", str(obj), "sec", "tc")
        for ns in (a, b):
            namespaces.set_default_cc(namespaces.resolve(ns), "mltcp_dctcp")
        reductions = loader.stats(loader.algorithm("dctcp"))["ssthresh"]
        flow, _, info = _transfer(a, b, "mltcp_dctcp")
    assert info["options"] & TCPI_OPT_ECN
    assert info["delivered_ce"] > 0.5 * info["delivered"]  # the receiver echoed the marks
    assert loader.stats(loader.algorithm("dctcp"))["ssthresh"] > reductions + 10  # one cut per marked window
    assert flow.cwnd <= 6 and info["snd_cwnd"] <= 6, (flow, info)
    assert flow.iterations == ITERATIONS  # MLTCP's part still ran


@needs_kernel
def test_status_and_set_report_the_parameters(loaded, capsys):
    assert cli.main(["status"]) == 0
    out = capsys.readouterr().out
    assert "mltcp_reno: registered" in out and "mltcp_cubic: registered" in out
    assert "mltcp_dctcp: registered" in out
    assert "F 2:0.5 = 2 * bytes_ratio + 0.5; iteration after max(4 RTT, 50 ms) idle" in out
    assert "; progress per connection" in out
    assert cli.main(["set", "--cc", "reno", "--group"]) == 0
    kps = [kp for kp in loader.read_params(loader.algorithm("reno")) if kp.detection]
    assert kps and all(kp.detection.group and kp.detection.idle_min == 0.05 for kp in kps)  # the rest kept
    capsys.readouterr()
    assert cli.main(["status"]) == 0
    assert "idle; EWMA 0.5; one progress per job (--group)" in capsys.readouterr().out
    assert cli.main(["set", "--cc", "reno", "--no-group"]) == 0
    assert not any(kp.detection.group for kp in loader.read_params(loader.algorithm("reno")) if kp.detection)
    assert cli.main(["set", "--cc", "reno", "--f", "4:0.5"]) == 0
    current = [kp.params for kp in loader.read_params(loader.algorithm("reno")) if kp.params]
    assert MltcpParams(4.0, 0.5) in current
    # every shape reaches the kernel: the table of the policy's F, and status shows its text form
    assert cli.main(["set", "--cc", "reno", "--f", "16:0.5:step=0.2"]) == 0
    step = MltcpParams(16.0, 0.5, "step", knee=0.2)
    kps = [kp for kp in loader.read_params(loader.algorithm("reno")) if kp.params == step]
    assert kps and list(kps[0].table) == params.f_table(step)
    assert cli.main(["set", "--cc", "reno", "--f", "3:0.5:power=0.5"]) == 0
    assert MltcpParams(3.0, 0.5, "power", exponent=0.5) in [
        kp.params for kp in loader.read_params(loader.algorithm("reno"))
    ]
    capsys.readouterr()
    assert cli.main(["status"]) == 0
    assert "F 3:0.5:power=0.5 = 0.5 + 3 * bytes_ratio ** 0.5;" in capsys.readouterr().out
    assert cli.main(["set", "--cc", "reno", "--f", "2:0.5:bounded"]) == 1  # the kernel changes only the increase
    assert "only the additive increase" in capsys.readouterr().err
    assert cli.main(["set", "--cc", "reno", "--f", "2:0.5"]) == 0
    assert MltcpParams(2.0, 0.5) in [kp.params for kp in loader.read_params(loader.algorithm("reno"))]


@needs_kernel
def test_unload_refuses_a_fallback_it_removes(loaded):
    with pytest.raises(KernelMltcpError, match="fallback"):
        loader.unload([loader.algorithm("cubic")], fallback="mltcp_cubic")
    assert loader.registered(loader.algorithm("cubic"))
