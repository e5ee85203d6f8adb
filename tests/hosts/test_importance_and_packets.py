from __future__ import annotations

import numpy as np
import pytest

from mlfc.hosts.importance import assign_importance, chunk_magnitudes, expand_importance
from mlfc.hosts.transport.packet import (
    DATA_HEADER,
    DataHeader,
    build_ack,
    pack_data_header_into,
    parse_data,
    parse_feedback,
    sack_blocks,
)
from mlfc.wire import IMPORTANCE_PROTECTED, SHIM_LEN, Flags, MsgType, Shim, unpack_shim


def gradients(n_chunks: int, chunk: int = 400, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    scale = rng.permutation(n_chunks) + 1.0  # distinct magnitude per chunk
    return (rng.standard_normal((n_chunks, chunk // 4)) * scale[:, None]).astype(np.float32).ravel()


def test_protected_fraction_gets_largest_magnitudes():
    g = gradients(40)
    classes = np.frombuffer(assign_importance(g, 400, protect_fraction=0.25), dtype=np.uint8)
    mags = chunk_magnitudes(g, 400)
    protected = classes >= IMPORTANCE_PROTECTED
    assert protected.sum() == 10
    assert mags[protected].min() > mags[~protected].max()
    order = np.argsort(mags)
    assert np.all(np.diff(classes[order].astype(int)) >= 0)  # monotonic in magnitude
    assert classes.max() <= 15


def test_later_layers_rank_higher():
    g = gradients(16)
    first = np.frombuffer(assign_importance(g, 400, layer_index=0, num_layers=10), dtype=np.uint8)
    last = np.frombuffer(assign_importance(g, 400, layer_index=9, num_layers=10), dtype=np.uint8)
    assert np.all(last >= first) and last.sum() > first.sum()


def test_raw_bytes_and_explicit_classes():
    classes = assign_importance(b"x" * 1001, 100, gradients=False)
    assert len(classes) == 11 and max(classes) < IMPORTANCE_PROTECTED
    assert expand_importance(9, 3) == bytearray([9, 9, 9])
    assert expand_importance([1, 2], 2) == bytearray([1, 2])
    for bad in ([1], 16, [0, 16], -1):
        with pytest.raises(ValueError):
            expand_importance(bad, 2)


def test_data_header_is_the_wire_shim_plus_descriptor():
    h = DataHeader(job_id=7, iteration=123456, tensor_id=42, chunk_seq=99, importance=11, progress=5,
                   flags=Flags.LAST | Flags.RETX, total_len=1_000_000, chunk_size=1400, loss_bound_bp=250,
                   n_protected=17)  # fmt: skip
    buf = bytearray(DATA_HEADER.size + 3)
    pack_data_header_into(buf, h)
    shim = Shim(
        MsgType.DATA, 7, 123456, 42, chunk_seq=99, importance=11, progress=5, flags=int(Flags.LAST | Flags.RETX)
    )
    assert bytes(buf[:SHIM_LEN]) == shim.pack()
    assert unpack_shim(bytes(buf)) == shim
    assert parse_data(bytes(buf)) == h


def test_ack_roundtrip_and_sack_blocks():
    received = bytearray([1, 1, 0, 1, 1, 0, 0, 1, 0, 1])
    blocks = sack_blocks(received, 2, 32)
    assert blocks == ((3, 5), (7, 8), (9, 10))
    assert sack_blocks(received, 2, 2) == ((3, 5), (7, 8))
    fb = parse_feedback(build_ack(1, 2, 3, 2, blocks, Flags.ECE))
    assert (fb.msg_type, fb.cum_ack, fb.blocks, fb.ece, fb.fin) == (MsgType.ACK, 2, blocks, True, False)
