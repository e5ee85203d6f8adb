// In-band queue telemetry (docs/wire-format.md): a tagged DATA packet leaves carrying the deepest egress
// queue it met on its path, in bytes, and the rate class of the port where it met it. Each hop writes its
// own when its queue is at least as deep as what the packet carries (the last hop at the maximum wins), so
// the field is the path's maximum, not a header per hop. The depth is the enqueue depth (what this packet
// found, the depth ECN marks on) in packets, taken as QDEPTH_UNIT_BYTES each.
// A non-zero UDP checksum is updated incrementally (RFC 1624: HC' = ~(~HC + ~m + m')), so the payload is not
// summed again: this control keeps the complements of the checksum and of the words it rewrites
// (importance|progress|rate_class, queue_bytes) and MlfcComputeChecksum takes csum16 over them and the new
// words. Written as arithmetic here, p4c would copy each partial sum into every use of it: hundreds of BMv2
// operations per packet.
control Telemetry(inout mlfc_h mlfc, in udp_h udp, inout mlfc_meta_t meta, in PortId_t egress_port,
                  in QueueDepth_t enq_qdepth) {
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
                // 0 means "no checksum" in IPv4 UDP: left as it is.
                if (udp.checksum != 0) {
                    meta.update_udp_checksum = 1;
                    meta.udp_checksum_inv = ~udp.checksum;
                    meta.telemetry_word_inv = ~(mlfc.importance ++ mlfc.progress ++ mlfc.rate_class);
                    meta.queue_bytes_inv = ~mlfc.queue_bytes;
                }
                mlfc.queue_bytes = depth;
                mlfc.rate_class = port_class;
            }
        }
    }
}
