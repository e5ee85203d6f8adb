// Priority queueing by job and iteration tag. A CNP takes the reserved control class; data and ACKs
// take the class of the best-matching (job, iteration window, progress band) entry: an ACK carries its
// job's tag, so a job's ACKs share its class and a lower job's ACKs never go ahead of a higher job's data
// (on a packet-rate port an ACK costs a data packet's slot). Malformed shims take the default class.
// Every packet that gets here is counted for its job in the action that gives it its class: a separate
// counting step would cost BMv2 a table of its own per packet. The counter keeps its P4Info name.
control Queueing(in bit<4> msg_type, inout mlfc_meta_t meta, inout QueueId_t queue) {
    @name(".MlfcIngress.stats.job_packets")
    counter(MAX_JOBS, CounterType.packets_and_bytes) job_packets;

    action set_priority(priority_t priority) {
        // The control class is reserved: a job entry can never claim it.
        meta.priority = (priority == PRIORITY_CONTROL) ? PRIORITY_CONTROL - 1 : priority;
        queue = (QueueId_t) meta.priority;
        // Index 0 is "untracked": no job, or an id beyond the counter.
        meta.job_slot = (meta.job_id < MAX_JOBS) ? (job_slot_t) meta.job_id : 0;
        job_packets.count((bit<32>) meta.job_slot);
    }

    @hidden action set_class(priority_t priority) {
        meta.priority = priority;
        queue = (QueueId_t) priority;
        meta.job_slot = (meta.job_id < MAX_JOBS) ? (job_slot_t) meta.job_id : 0;
        job_packets.count((bit<32>) meta.job_slot);
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
            set_class(PRIORITY_CONTROL);
        } else {
            set_class(PRIORITY_DEFAULT);
        }
    }
}
