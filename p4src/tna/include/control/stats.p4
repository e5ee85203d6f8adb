// Counters: per job (index = job id; index 0 = untracked: no job, or an id >= MAX_JOBS) and per
// ingress port for shims that could not be trusted.
control IngressStats(in job_id_t job_id, in shim_status_t shim_status, in PortId_t ingress_port,
                     out job_slot_t job_slot) {
    Counter<bit<32>, job_slot_t>(MAX_JOBS, CounterType_t.PACKETS_AND_BYTES) job_packets;
    Counter<bit<32>, PortId_t>(MAX_PORTS, CounterType_t.PACKETS) shim_bad_header;
    Counter<bit<32>, PortId_t>(MAX_PORTS, CounterType_t.PACKETS) shim_truncated;

    apply {
        if (job_id < MAX_JOBS) {
            job_slot = (job_slot_t) job_id;
        } else {
            job_slot = 0;
        }
        job_packets.count(job_slot);
        if (shim_status == SHIM_BAD_HEADER) {
            shim_bad_header.count(ingress_port);
        } else if (shim_status == SHIM_TRUNCATED) {
            shim_truncated.count(ingress_port);
        }
    }
}
