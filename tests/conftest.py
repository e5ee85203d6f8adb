"""Markers for tests that need external pieces: each skips with a printed reason when the piece
is missing and runs when it is present (see README, "Tests")."""

from __future__ import annotations

import os
import shutil

import pytest

from mlfc.testing.tofino import tofino_compiler_missing


def _missing(marker: str) -> str | None:
    if marker == "p4c":
        return None if shutil.which("p4c") else "p4c not installed (build p4lang/p4c; see docs/toolchain.md)"
    if marker == "bmv2":
        for tool in ("simple_switch_grpc", "simple_switch_CLI"):
            if not shutil.which(tool):
                return f"{tool} not installed (BMv2 with PI and Thrift; see docs/toolchain.md)"
        return None
    if marker == "mininet":
        for tool in ("mn", "mnexec"):
            if not shutil.which(tool):
                return f"{tool} not installed (apt-get install mininet)"
        return None
    if marker == "tofino":
        return tofino_compiler_missing()
    if marker == "root":
        return None if os.geteuid() == 0 else "needs root (network namespaces, veth pairs)"
    if marker == "ns3":
        from mlfc.sim.runtime import missing

        return missing()
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker in ("p4c", "tofino", "bmv2", "mininet", "root", "ns3"):
        if item.get_closest_marker(marker):
            reason = _missing(marker)
            if reason:
                pytest.skip(f"[{marker}] {reason}")


_GROUPS = ("p4c", "tofino", "bmv2", "mininet", "root", "ns3", "kernel")

# The one command (or page) that brings a skipped group, printed under it in the table.
BRINGS = {
    "p4c": "p4c: docs/toolchain.md",
    "tofino": "the Tofino compiler: docs/tofino.md",
    "bmv2": "BMv2 (and root): docs/toolchain.md",
    "mininet": "as root: make install (its Debian packages), then make test as root",
    "root": "run as root: sudo make test",
    "ns3": "make install-sim",
    "kernel": "as root: make install (clang, libbpf-dev, bpftool), then make test as root",
}


def _tag(reason: object) -> str | None:
    """The group a skip reason names by its "[group] ..." prefix (tests/kernel, tests/sim do so)."""
    text = str(reason or "")
    tag = text[1 : text.find("]")] if text.startswith("[") else ""
    return tag if tag in _GROUPS else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    """Each report carries its group: the test's marker, else the group its skipif's reason names."""
    rep = yield
    group = next((g for g in _GROUPS if item.get_closest_marker(g)), None)
    if group is None:
        group = next((t for m in item.iter_markers("skipif") if (t := _tag(m.kwargs.get("reason")))), None)
    rep.mlfc_group = group
    return rep


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """Say which groups of switch-dependent tests ran and which skipped, and why."""
    ran: dict[str, int] = {g: 0 for g in (*_GROUPS, "plain")}
    skipped: dict[str, dict[str, int]] = {g: {} for g in (*_GROUPS, "plain")}
    for status in ("passed", "failed", "error", "skipped"):
        for rep in terminalreporter.stats.get(status, []):
            if getattr(rep, "when", "call") not in ("call", "setup"):
                continue
            if status != "skipped" and rep.when == "setup" and rep.passed:
                continue
            group = getattr(rep, "mlfc_group", None)
            if status == "skipped":
                reason = str(rep.longrepr[2]) if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
                reason = reason.removeprefix("Skipped: ")
                group = group or _tag(reason) or "plain"
                skipped[group][reason] = skipped[group].get(reason, 0) + 1
            else:
                ran[group or "plain"] += 1
    terminalreporter.section("mlfc test groups")
    for group in (*_GROUPS, "plain"):
        n_skip = sum(skipped[group].values())
        if not ran[group] and not n_skip:
            continue
        terminalreporter.write_line(f"{group:8s} ran {ran[group]:4d}, skipped {n_skip:4d}")
        for reason, count in sorted(skipped[group].items()):
            terminalreporter.write_line(f"           {count:4d} x {reason}")
        if n_skip and group in BRINGS:
            terminalreporter.write_line(f"           to run them: {BRINGS[group]}")
