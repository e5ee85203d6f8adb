"""Transitional re-export: lossy sockets are test support, in mlfc.testing.lossy.

Kept only so that tests/training/test_ps_path.py and tests/training/lossy_worker.py keep importing until
they name mlfc.testing.lossy; then delete this file (no product module imports it)."""

from mlfc.testing.lossy import LossySocket

__all__ = ["LossySocket"]
