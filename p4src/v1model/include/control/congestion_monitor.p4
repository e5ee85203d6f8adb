// Egress: the congestion level of the packet's queue from the depth still queued behind it, so a
// draining queue clears its level; recorded per (port, queue) for SelectiveDrop in ingress.
control CongestionMonitor(in PortId_t egress_port, in QueueDepth_t deq_qdepth, in priority_t priority) {
    // The record is the action's own step: no separate straight-line table after the lookup.
    action set_level(congestion_level_t l) {
        congestion_level.write(congestion_slot(egress_port, priority), l);
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
