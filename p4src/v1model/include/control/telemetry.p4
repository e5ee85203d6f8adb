// In-band queue telemetry (docs/wire-format.md): a tagged DATA packet leaves carrying the deepest egress
// queue it met on its path, in bytes, and the rate class of the port where it met it. Each hop writes its
// own when its queue is at least as deep as what the packet carries (the last hop at the maximum wins), so
// the field is the path's maximum, not a header per hop. The depth is the enqueue depth (what this packet
// found, the depth ECN marks on) in packets, taken as QDEPTH_UNIT_BYTES each. The UDP checksum is updated
// incrementally (RFC 1624) over the two changed words, so the payload is not read again.
control Telemetry(inout mlfc_h mlfc, inout udp_h udp, in PortId_t egress_port, in QueueDepth_t enq_qdepth) {
    rate_class_t port_class = 0;

    action set_rate_class(rate_class_t rate_class) {
        port_class = rate_class;
    }

    table port_rate {
        key = { egress_port: exact @name("egress_port"); }
        actions = { set_rate_class; }
        default_action = set_rate_class(0);
        size = PORT_RATE_SIZE;
    }

    apply {
        if (mlfc.isValid() && mlfc.msg_type == MSG_DATA) {
            queue_bytes_t depth = (queue_bytes_t) enq_qdepth * QDEPTH_UNIT_BYTES;
            if (depth >= mlfc.queue_bytes) {
                port_rate.apply();
                // The 16-bit words that change: importance|progress|rate_class, and queue_bytes' halves.
                bit<16> old_word = mlfc.importance ++ mlfc.progress ++ mlfc.rate_class;
                bit<16> new_word = mlfc.importance ++ mlfc.progress ++ port_class;
                bit<32> sum = (bit<32>) (~udp.checksum) + (bit<32>) (~old_word) + (bit<32>) (~mlfc.queue_bytes[31:16])
                    + (bit<32>) (~mlfc.queue_bytes[15:0]) + (bit<32>) new_word + (bit<32>) depth[31:16]
                    + (bit<32>) depth[15:0];
                sum = (bit<32>) sum[15:0] + (bit<32>) sum[31:16];
                sum = (bit<32>) sum[15:0] + (bit<32>) sum[31:16];
                bit<16> checksum = ~sum[15:0];
                // 0 means "no checksum" in IPv4 UDP: left as it is; a computed 0 is sent as 0xFFFF (RFC 768).
                if (udp.checksum != 0) {
                    udp.checksum = (checksum == 0) ? 16w0xFFFF : checksum;
                }
                mlfc.queue_bytes = depth;
                mlfc.rate_class = port_class;
            }
        }
    }
}
