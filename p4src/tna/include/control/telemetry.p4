// In-band queue telemetry (docs/wire-format.md), as on v1model: a tagged DATA packet leaves carrying the
// deepest egress queue it met on its path, in bytes, and the rate class of the port where it met it (the
// route's, bridged from ingress); a hop
// writes its own when its queue is at least as deep as what the packet carries. The depth is the enqueue
// depth in 80-byte cells. The egress parser parses UDP and the shim only for tagged DATA
// (bridged.telemetry) and leaves the UDP checksum's residual; the deparser adds the new words back when
// update_udp_checksum is set.
// Uncompiled here (no Tofino compiler on the machine it was written on): written by analogy with Ecn's
// saturating-subtraction test (a gateway tests a field, not an expression) and with the compiler's rule
// that one ALU instruction takes one operation (so d * 80 is two shifts and an add, in steps).
control Telemetry(inout mlfc_h mlfc, in rate_class_t port_class, in QueueDepth_t enq_qdepth, in bit<16> udp_checksum,
                  out bit<1> update_udp_checksum) {
    queue_bytes_t cells = 0;
    queue_bytes_t high = 0;
    queue_bytes_t low = 0;
    queue_bytes_t depth = 0;
    queue_bytes_t shortfall = 0;  // carried - depth, saturated at 0: 0 means this queue is at least as deep

    apply {
        update_udp_checksum = 0;
        if (mlfc.isValid()) {
            cells = (queue_bytes_t) enq_qdepth;
            high = cells << 6;   // d * 64
            low = cells << 4;    // d * 16: together QDEPTH_UNIT_BYTES (80) per cell
            depth = high + low;
            shortfall = mlfc.queue_bytes |-| depth;
            if (shortfall == 0) {
                mlfc.queue_bytes = depth;
                mlfc.rate_class = port_class;
                if (udp_checksum != 0) {
                    update_udp_checksum = 1;
                }
            }
        }
    }
}
