"""MLTCP for kernel TCP (``mlfc.hosts.kernel``): BPF struct_ops congestion controls ``mltcp_reno``,
``mltcp_cubic`` and ``mltcp_dctcp`` that give any TCP socket MLTCP's window growth, F(bytes_ratio) of
:mod:`mlfc.policy.mltcp` (any shape: the loader writes it as a table), with iterations detected from
the connection's own idle gaps.

* ``bpf/``: the C sources (``mltcp.h`` holds F's interpolation and the iteration tracking, shared by all);
* :mod:`.build`: compiles them with clang against the running kernel's BTF;
* :mod:`.loader`: registers/unregisters them, fills their parameter maps, reads their state;
* :mod:`.namespaces`: a network namespace's default congestion control and the sockets using it;
* :mod:`.cli`: ``mlfc-mltcp build|load|status|set|unload``.
* :mod:`.marker`: the phantom-queue ECN marker, a tc program that marks CE from a model of a shaper's queue.

The experiments are lab code: ``mlfc.lab.kernel_mltcp`` (``make kernel-mltcp``) and
``mlfc.lab.mltcp.kernel_gloo`` (``make kernel-mltcp-gloo``).
"""

from __future__ import annotations


class KernelMltcpError(RuntimeError):
    """Something the kernel, the toolchain or the caller lacks; the message says what to do."""
