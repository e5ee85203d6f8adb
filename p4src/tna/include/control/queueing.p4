// Priority queueing by job and iteration tag. ACK/CNP take the reserved control class; data takes the
// class of the best-matching (job, iteration window, progress band) entry. The class is the egress
// queue (qid) and the ingress CoS; the traffic manager serves the queues by strict priority when it
// is configured so (docs/tofino.md).
control Queueing(in bit<4> msg_type, inout mlfc_meta_t meta, out QueueId_t qid, out bit<3> ingress_cos) {
    action set_priority(priority_t priority) {
        meta.priority = priority;
    }

    table job_priority {
        key = {
            meta.job_id: ternary @name("job_id");
            // Ternary, not range as on v1model: the compiler takes range keys of at most 20 bits; the
            // controller writes an iteration window as the prefixes that cover it.
            meta.iteration: ternary @name("iteration");
            meta.progress: range @name("progress");
        }
        actions = { set_priority; }
        default_action = set_priority(PRIORITY_DEFAULT);
        size = JOB_PRIORITY_SIZE;
    }

    apply {
        if (meta.shim_status == SHIM_OK && msg_type != MSG_DATA) {
            meta.priority = PRIORITY_CONTROL;
        } else if (meta.shim_status == SHIM_OK || meta.shim_status == SHIM_NONE) {
            job_priority.apply();
            // The control class is reserved: a job entry can never claim it.
            if (meta.priority == PRIORITY_CONTROL) {
                meta.priority = PRIORITY_CONTROL - 1;
            }
        } else {
            meta.priority = PRIORITY_DEFAULT;
        }
        qid = (QueueId_t) meta.priority;
        ingress_cos = meta.priority;
    }
}
