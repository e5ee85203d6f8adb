// Counters: per job (index = job id; index 0 = untracked: no job, or an id >= MAX_JOBS) and per
// ingress port for shims that could not be trusted.
control IngressStats(inout headers_t hdr, inout mlfc_meta_t meta, inout standard_metadata_t std_meta) {
    counter(MAX_JOBS, CounterType.packets_and_bytes) job_packets;
    counter(MAX_PORTS, CounterType.packets) shim_bad_header;
    counter(MAX_PORTS, CounterType.packets) shim_truncated;

    apply {
        if (meta.job_id < MAX_JOBS) {
            meta.counter_index = (bit<32>) meta.job_id;
        } else {
            meta.counter_index = 0;
        }
        job_packets.count(meta.counter_index);
        if (meta.shim_status == SHIM_BAD_HEADER) {
            shim_bad_header.count((bit<32>) std_meta.ingress_port);
        } else if (meta.shim_status == SHIM_TRUNCATED) {
            shim_truncated.count((bit<32>) std_meta.ingress_port);
        }
    }
}
