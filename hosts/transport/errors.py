"""The transport's exceptions."""

from __future__ import annotations


class TransportError(Exception):
    """Base class for transport failures."""


class TransferRejected(TransportError, ValueError):
    """Bad input: the transfer was not started."""


class PeerTimeout(TransportError, TimeoutError):
    """The peer stopped answering, or the transfer missed its overall timeout."""


class TransferAborted(PeerTimeout):
    """``Sender.abort()`` ended the transfer: the caller knows the peer is gone (e.g. it restarted)."""
