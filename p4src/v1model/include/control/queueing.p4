// Priority queueing by job and iteration tag. A CNP takes the reserved control class; data and ACKs
// take the class of the best-matching (job, iteration window, progress band) entry: an ACK carries its
// job's tag, so a job's ACKs share its class and a lower job's ACKs never go ahead of a higher job's data
// (on a packet-rate port an ACK costs a data packet's slot).
control Queueing(in bit<4> msg_type, inout mlfc_meta_t meta, out QueueId_t queue) {
    action set_priority(priority_t priority) {
        meta.priority = priority;
    }

    table job_priority {
        key = {
            meta.job_id: ternary @name("job_id");
            meta.iteration: range @name("iteration");
            meta.progress: range @name("progress");
        }
        actions = { set_priority; }
        default_action = set_priority(PRIORITY_DEFAULT);
        size = JOB_PRIORITY_SIZE;
    }

    apply {
        if (meta.shim_status == SHIM_OK && msg_type == MSG_CNP) {
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
        queue = (QueueId_t) meta.priority;
    }
}
