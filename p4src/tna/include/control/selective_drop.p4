// Selective dropping, in egress: Tofino 1's ingress cannot read what egress measured, so the packet
// is judged by its own queue's level as it leaves (WRED-style) and dropped with drop_ctl. Tagged DATA
// below the protected class is dropped when its importance is below the minimum for that level.
control SelectiveDrop(in bridged_h bridged, in congestion_level_t level, inout bit<3> drop_ctl,
                      out bit<1> dropped) {
    @name(".selective_drop.job_drops")
    Counter<bit<32>, job_slot_t>(MAX_JOBS, CounterType_t.PACKETS_AND_BYTES) job_drops;
    importance_t shortfall = 0;  // min_importance - importance, saturated at 0: > 0 drops

    @name(".selective_drop.set_min_importance")
    action set_min_importance(importance_t importance) {
        shortfall = importance |-| bridged.importance;
    }

    @name(".selective_drop.drop_threshold")
    table drop_threshold {
        key = { level: exact @name("level"); }
        actions = { set_min_importance; }
        default_action = set_min_importance(0);
        size = DROP_THRESHOLD_SIZE;
    }

    apply {
        dropped = 0;
        if (bridged.droppable == 1) {
            drop_threshold.apply();
            if (shortfall != 0) {
                drop_ctl = DROP_CTL_DROP;
                dropped = 1;
                job_drops.count(bridged.job_slot);
            }
        }
    }
}
