// In-band queue telemetry (docs/wire-format.md): a tagged DATA packet leaves carrying the deepest egress
// queue it met on its path, in bytes, and the rate class of the port where it met it. Each hop writes its
// own when its queue is at least as deep as what the packet carries (the last hop at the maximum wins), so
// the field is the path's maximum, not a header per hop. The depth is the enqueue depth (what this packet
// found, the depth ECN marks on) in packets, taken as QDEPTH_UNIT_BYTES each; the port's class comes with
// the route (set_next_hop).
// Laid out for BMv2's per-packet cost (docs/dataplane.md, issue 46's telemetry designs): an action that
// CongestionMonitor's set_level, the one action every packet runs in egress, calls; the test is folded into
// selects, so the telemetry costs no lookup, no condition and no action of its own: two writes. A packet
// that is not tagged DATA (or whose queue is shallower than what it carries) writes back what it has; BMv2
// keeps an invalid header's fields and never emits them.
// The UDP checksum: the parser keeps the complements of the checksum and of the words written here, and
// MlfcComputeChecksum updates a checksummed datagram incrementally (parser.p4).
action write_queue_telemetry(inout mlfc_h mlfc, in QueueDepth_t enq_qdepth, in rate_class_t port_class) {
    queue_bytes_t depth = (queue_bytes_t) enq_qdepth * QDEPTH_UNIT_BYTES;
    bool deeper = mlfc.isValid() && mlfc.msg_type == MSG_DATA && depth >= mlfc.queue_bytes;
    mlfc.rate_class = deeper ? port_class : mlfc.rate_class;
    mlfc.queue_bytes = deeper ? depth : mlfc.queue_bytes;
}
