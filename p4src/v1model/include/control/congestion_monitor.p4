// Egress: the congestion level of the packet's queue from the depth still queued behind it, so a
// draining queue clears its level; recorded per (port, queue) for SelectiveDrop in ingress. The same action
// writes the queue telemetry (control/telemetry.p4): every packet runs it, so the telemetry adds no step.
control CongestionMonitor(in PortId_t egress_port, in QueueDepth_t deq_qdepth, in priority_t priority,
                          inout mlfc_h mlfc, in QueueDepth_t enq_qdepth, in rate_class_t port_class) {
    // The record is the action's own step: no separate straight-line table after the lookup.
    action set_level(congestion_level_t l) {
        congestion_level.write(congestion_slot(egress_port, priority), l);
        write_queue_telemetry(mlfc, enq_qdepth, port_class);
    }

    table congestion_levels {
        key = { deq_qdepth: range @name("deq_qdepth"); }
        actions = { set_level; }
        default_action = set_level(0);
        size = CONGESTION_LEVEL_SIZE;
    }

    apply {
        congestion_levels.apply();
    }
}
