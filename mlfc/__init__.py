"""mlfc: ML-aware network flow control on programmable switches."""

__version__ = "0.1.0"
