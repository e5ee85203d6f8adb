"""Compile the BPF sources in ``bpf/`` against the running kernel.

``vmlinux.h`` is generated from the kernel's BTF (``bpftool btf dump file /sys/kernel/btf/vmlinux
format c``) into the build directory, never committed; objects are CO-RE, so they also load on
other BTF kernels. Needs Debian's ``clang``, ``libbpf-dev`` (the BPF headers) and ``bpftool``.
The build directory is ``bpf/build`` beside the sources, or ``$MLFC_BPF_BUILD``.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from mlfc.hosts.kernel import KernelMltcpError

SOURCE_DIR = Path(__file__).resolve().parent / "bpf"
BTF_PATH = Path("/sys/kernel/btf/vmlinux")
BPF_HEADERS = Path("/usr/include/bpf/bpf_helpers.h")
OBJECTS = ("mltcp_reno", "mltcp_cubic", "mltcp_dctcp", "mltcp_ftest")
# tc programs beside the congestion controls: the phantom-queue ECN marker (marker.py)
OBJECTS += ("ecn_marker",)
# The kernel's own struct_ops value type for congestion controls: present when the kernel can
# register a tcp_congestion_ops written in BPF (CONFIG_BPF_JIT, CONFIG_BPF_SYSCALL, BTF).
STRUCT_OPS_TYPE = "struct bpf_struct_ops_tcp_congestion_ops {"
_ARCH = {"x86_64": "x86", "aarch64": "arm64", "arm64": "arm64", "riscv64": "riscv", "s390x": "s390",
         "ppc64le": "powerpc", "loongarch64": "loongarch"}  # fmt: skip


def build_dir() -> Path:
    return Path(os.environ.get("MLFC_BPF_BUILD") or SOURCE_DIR / "build")


def object_path(name: str) -> Path:
    return build_dir() / f"{name}.bpf.o"


@dataclass(frozen=True)
class Toolchain:
    clang: str
    bpftool: str


def find_toolchain() -> Toolchain:
    missing = []
    clang = shutil.which(os.environ.get("CLANG", "clang"))
    bpftool = shutil.which("bpftool") or next(
        (p for p in ("/usr/sbin/bpftool", "/sbin/bpftool") if os.access(p, os.X_OK)), None
    )
    if not clang:
        missing.append("clang")
    if not bpftool:
        missing.append("bpftool")
    if not BPF_HEADERS.exists():
        missing.append("libbpf-dev")
    if missing:
        raise KernelMltcpError(
            f"cannot build the eBPF congestion controls: {', '.join(missing)} missing "
            f"(Debian: apt-get install {' '.join(missing)})"
        )
    return Toolchain(clang, bpftool)  # type: ignore[arg-type]


def check_btf() -> None:
    if not BTF_PATH.exists():
        raise KernelMltcpError(
            f"{BTF_PATH} is missing: this kernel was built without BTF (CONFIG_DEBUG_INFO_BTF), so it cannot "
            "take BPF congestion controls"
        )


def _stamp() -> str:
    return f"{platform.release()} {BTF_PATH.stat().st_size}\n"


def sources() -> list[Path]:
    return sorted(SOURCE_DIR.glob("*.bpf.c")) + sorted(SOURCE_DIR.glob("*.h"))


def up_to_date() -> bool:
    out = build_dir()
    stamp = out / "kernel.stamp"
    try:
        if stamp.read_text() != _stamp():
            return False
        newest_source = max(p.stat().st_mtime for p in sources())
        return all(object_path(n).stat().st_mtime >= newest_source for n in OBJECTS)
    except OSError:
        return False


def build(*, force: bool = False, verbose: bool = False) -> list[Path]:
    """Compile every object (when stale or ``force``); returns their paths."""
    check_btf()
    if not force and up_to_date():
        return [object_path(n) for n in OBJECTS]
    tools = find_toolchain()
    out = build_dir()
    out.mkdir(parents=True, exist_ok=True)
    vmlinux = out / "vmlinux.h"
    tmp = out / "vmlinux.h.tmp"
    with tmp.open("w") as f:
        res = subprocess.run([tools.bpftool, "btf", "dump", "file", str(BTF_PATH), "format", "c"], stdout=f,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip
    if res.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise KernelMltcpError(f"bpftool btf dump failed: {res.stderr.strip()}")
    tmp.replace(vmlinux)
    if STRUCT_OPS_TYPE not in vmlinux.read_text():
        raise KernelMltcpError(
            "this kernel has no BPF struct_ops for tcp_congestion_ops (needs Linux >= 5.6 with CONFIG_BPF_JIT "
            "and CONFIG_BPF_SYSCALL)"
        )
    arch = _ARCH.get(platform.machine(), platform.machine())
    built = []
    for name in OBJECTS:
        src, obj = SOURCE_DIR / f"{name}.bpf.c", object_path(name)
        cmd = [tools.clang, "-O2", "-g", "-Wall", "-Werror", "-target", "bpf", f"-D__TARGET_ARCH_{arch}",
               f"-I{out}", f"-I{SOURCE_DIR}", "-c", str(src), "-o", str(obj)]  # fmt: skip
        if verbose:
            print(" ".join(cmd), flush=True)
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            obj.unlink(missing_ok=True)
            raise KernelMltcpError(f"clang failed on {src.name}:\n{res.stderr.strip()}")
        built.append(obj)
    (out / "kernel.stamp").write_text(_stamp())
    return built


def ensure_built() -> None:
    """Build if needed; explains what is missing when it cannot."""
    if not up_to_date():
        build()
