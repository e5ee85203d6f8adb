"""Transitional re-export: namespaces and veths are test support, in mlfc.testing.netns.

Kept only so that lab/kernel_mltcp.py, lab/kernel_gloo.py, tests/kernel/test_kernel_mltcp.py and
tests/training/test_training_refswitch.py keep importing until they name mlfc.testing.netns; then delete
this file (no product module imports it)."""

from mlfc.testing.netns import NetnsError, NetnsLab, in_netns, run

__all__ = ["NetnsError", "NetnsLab", "in_netns", "run"]
