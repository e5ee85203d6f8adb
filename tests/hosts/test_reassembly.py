"""One tensor at the receiver without sockets (mlfc.hosts.transport.reassembly): placement, when to
acknowledge, SACK blocks and the zero-fill decision of mlfc.policy.loss."""

from __future__ import annotations

from mlfc.hosts.transport.reassembly import Reassembly


def chunk(i: int, n: int = 100) -> memoryview:
    return memoryview(bytes([i + 1]) * n)


def test_in_order_chunks_ack_every_n_and_the_last_at_once():
    r = Reassembly(total=450, chunk=100, bound_bp=0, nprot=1, now=0.0)
    assert r.n == 5 and r.span(4) == (400, 50) and r.span(5) is None
    acks = []
    for i in range(4):
        acks.append(r.place(i, chunk(i), False, 2, 0.1)[1])
        if acks[-1]:
            r.on_ack_sent()
    assert acks == [False, True, False, True]
    assert r.cum == 4 and not r.waiting
    assert r.place(4, chunk(4, 50), True, 100, 0.2) == (True, True)  # the last chunk: ACK at once
    assert r.complete and r.prot_received == 1 and r.last_seen == 0.2
    assert bytes(r.buf[:100]) == b"\x01" * 100 and bytes(r.buf[400:]) == b"\x05" * 50
    assert r.loss_report().complete


def test_holes_duplicates_and_sack():
    r = Reassembly(total=1000, chunk=100, bound_bp=0, nprot=0, now=0.0)
    assert r.place(0, chunk(0), False, 8, 0.0) == (True, False)
    assert r.place(3, chunk(3), False, 8, 0.0) == (True, True)  # a hole below: ACK at once
    assert r.place(3, chunk(3), False, 8, 0.0) == (False, True) and r.dups == 1
    r.place(5, chunk(5), False, 8, 0.0)
    assert r.cum == 1 and r.latest == 5 and r.sack(32) == ((5, 6), (3, 4))  # the latest run first
    assert r.missing() == (1, 2, 4, 6, 7, 8, 9)


def test_partial_delivery_needs_every_protected_chunk_and_the_bound():
    r = Reassembly(total=1000, chunk=100, bound_bp=2000, nprot=2, now=0.0)  # 20 %: two chunks
    for i in (0, 1, 2, 3, 4, 5, 6, 9):
        r.place(i, chunk(i), i in (0, 9), 8, 1.0)
    assert r.waiting and r.may_deliver_partial()  # 7 and 8 missing: 200 bytes, both unprotected
    report = r.loss_report()
    assert report.missing_chunks == (7, 8) and report.zero_filled_bytes == 200 and report.loss_fraction == 0.2
    assert bytes(r.buf[700:900]) == bytes(200)  # zero-filled by construction
    tight = Reassembly(total=1000, chunk=100, bound_bp=1999, nprot=0, now=0.0)
    for i in (0, 1, 2, 3, 4, 5, 6, 9):
        tight.place(i, chunk(i), False, 8, 1.0)
    assert not tight.may_deliver_partial()  # 200 bytes > 19.99 %
    missing_protected = Reassembly(total=1000, chunk=100, bound_bp=10000, nprot=2, now=0.0)
    missing_protected.place(9, chunk(9), True, 8, 1.0)
    assert not missing_protected.may_deliver_partial()
