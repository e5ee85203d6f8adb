// Counters: per job (index = job id; index 0 = untracked: no job, or an id >= MAX_JOBS) and per
// ingress port for shims that could not be trusted.
control IngressStats(in job_id_t job_id, in shim_status_t shim_status, in PortId_t ingress_port,
                     out job_slot_t job_slot) {
    counter(MAX_JOBS, CounterType.packets_and_bytes) job_packets;
    counter(MAX_PORTS, CounterType.packets) shim_bad_header;
    counter(MAX_PORTS, CounterType.packets) shim_truncated;

    // An action, not statements in apply: p4c keeps the choice of slot an expression here, where in apply
    // it would become a test and two more tables.
    @hidden action count_job() {
        job_slot = (job_id < MAX_JOBS) ? (job_slot_t) job_id : 0;
        job_packets.count((bit<32>) job_slot);
    }

    apply {
        count_job();
        // SHIM_BAD_HEADER and SHIM_TRUNCATED are the two statuses above SHIM_OK: one test on the common path.
        if (shim_status > SHIM_OK) {
            if (shim_status == SHIM_BAD_HEADER) {
                shim_bad_header.count((bit<32>) ingress_port);
            } else {
                shim_truncated.count((bit<32>) ingress_port);
            }
        }
    }
}
