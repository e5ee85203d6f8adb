// Selective dropping: tagged DATA whose importance is below the installed minimum for the congestion
// level of the queue it is headed for is dropped. Dropping in ingress keeps the packet out of the
// queue (on BMv2 the bottleneck is the queue's dequeue rate, so an egress drop would spend the
// bottleneck's capacity anyway). Tofino drops in egress instead, so the table, its action and the counter
// carry pipeline-free P4Info names (selective_drop.*), the same on both targets.
control SelectiveDrop(in bit<4> msg_type, in mlfc_meta_t meta, inout standard_metadata_t std_meta) {
    @name(".selective_drop.job_drops")
    counter(MAX_JOBS, CounterType.packets_and_bytes) job_drops;
    congestion_level_t level;        // read from the register before use
    importance_t min_importance;     // set by drop_threshold's entry or its default

    @name(".selective_drop.set_min_importance")
    action set_min_importance(importance_t importance) {
        min_importance = importance;
    }

    @name(".selective_drop.drop_threshold")
    table drop_threshold {
        key = { level: exact @name("level"); }
        actions = { set_min_importance; }
        default_action = set_min_importance(0);
        size = DROP_THRESHOLD_SIZE;
    }

    apply {
        if (meta.shim_status == SHIM_OK && msg_type == MSG_DATA && meta.importance < IMPORTANCE_PROTECTED
                && std_meta.egress_spec != DROP_PORT) {
            congestion_level.read(level, congestion_slot(std_meta.egress_spec, meta.priority));
            // Level 0 is uncongested and drops nothing (mlfc/policy/drop.py, UNCONGESTED_LEVEL in
            // mlfc/contract.py): the common case skips the lookup.
            if (level != UNCONGESTED_LEVEL) {
                drop_threshold.apply();
                if (meta.importance < min_importance) {
                    mark_to_drop(std_meta);
                    job_drops.count((bit<32>) meta.job_slot);
                }
            }
        }
    }
}
