// Selective dropping. Egress records each (port, queue)'s congestion level in a register as
// packets leave it; ingress reads the level of the queue a packet is headed for and drops
// tagged DATA whose importance is below the installed minimum for that level. Dropping in
// ingress keeps the packet out of the queue (on BMv2 the bottleneck is the queue's dequeue
// rate, so an egress drop would spend the bottleneck's capacity anyway).
register<congestion_level_t>(CONGESTION_SLOTS) congestion_level;

control SelectiveDrop(inout headers_t hdr, inout mlfc_meta_t meta, inout standard_metadata_t std_meta) {
    counter(MAX_JOBS, CounterType.packets_and_bytes) job_drops;
    bit<4> min_importance = 0;

    action set_min_importance(bit<4> importance) {
        min_importance = importance;
    }

    table drop_threshold {
        key = {
            std_meta.egress_spec: ternary;
            meta.level: exact;
        }
        actions = { set_min_importance; }
        default_action = set_min_importance(0);
        size = DROP_THRESHOLD_SIZE;
    }

    apply {
        if (meta.tagged == 1 && hdr.mlfc.msg_type == MSG_DATA && meta.importance < IMPORTANCE_PROTECTED
                && std_meta.egress_spec != DROP_PORT) {
            congestion_level.read(meta.level,
                ((bit<32>) std_meta.egress_spec) * NUM_QUEUES + (bit<32>) meta.priority);
            drop_threshold.apply();
            if (meta.importance < min_importance) {
                mark_to_drop(std_meta);
                job_drops.count(meta.counter_index);
            }
        }
    }
}

control CongestionMonitor(inout headers_t hdr, inout mlfc_meta_t meta, inout standard_metadata_t std_meta) {
    congestion_level_t level = 0;

    action set_level(congestion_level_t l) {
        level = l;
    }

    // deq_qdepth: what is still queued behind this packet, so a draining queue clears its level.
    table congestion_levels {
        key = {
            std_meta.egress_port: ternary;
            std_meta.deq_qdepth: range;
        }
        actions = { set_level; }
        default_action = set_level(0);
        size = CONGESTION_LEVEL_SIZE;
    }

    apply {
        congestion_levels.apply();
        congestion_level.write(((bit<32>) std_meta.egress_port) * NUM_QUEUES + (bit<32>) meta.priority, level);
    }
}
