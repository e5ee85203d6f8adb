// Egress: the congestion level of the packet's queue from the depth still queued behind it (cells).
control CongestionMonitor(in QueueDepth_t deq_qdepth, out congestion_level_t level) {
    action set_level(congestion_level_t l) {
        level = l;
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
