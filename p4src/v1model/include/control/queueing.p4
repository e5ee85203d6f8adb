// Priority queueing by job and iteration tag. A CNP takes the reserved control class; data and ACKs
// take the class of the best-matching (job, iteration window, progress band) entry: an ACK carries its
// job's tag, so a job's ACKs share its class and a lower job's ACKs never go ahead of a higher job's data
// (on a packet-rate port an ACK costs a data packet's slot). Malformed shims take the default class.
control Queueing(in bit<4> msg_type, inout mlfc_meta_t meta, inout QueueId_t queue) {
    action set_priority(priority_t priority) {
        // The control class is reserved: a job entry can never claim it.
        meta.priority = (priority == PRIORITY_CONTROL) ? PRIORITY_CONTROL - 1 : priority;
        queue = (QueueId_t) meta.priority;
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
        // Tagged data and ACKs, and untagged flows, first: the common case costs one condition.
        if (meta.shim_status == SHIM_NONE || (meta.shim_status == SHIM_OK && msg_type != MSG_CNP)) {
            job_priority.apply();
        } else if (meta.shim_status == SHIM_OK) {
            meta.priority = PRIORITY_CONTROL;
            queue = (QueueId_t) PRIORITY_CONTROL;
        } else {
            meta.priority = PRIORITY_DEFAULT;
            queue = (QueueId_t) PRIORITY_DEFAULT;
        }
    }
}
