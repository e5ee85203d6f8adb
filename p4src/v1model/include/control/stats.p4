// Per-port counters of shims that could not be trusted. (The per-job counter, index = job id, is counted
// where the packet gets its class: Queueing.) Ingress applies this only to packets the parser did not
// tag, after the classifier has judged a truncated shim.
control IngressStats(in shim_status_t shim_status, in PortId_t ingress_port) {
    counter(MAX_PORTS, CounterType.packets) shim_bad_header;
    counter(MAX_PORTS, CounterType.packets) shim_truncated;

    apply {
        // SHIM_BAD_HEADER and SHIM_TRUNCATED are the two statuses above SHIM_OK.
        if (shim_status == SHIM_BAD_HEADER) {
            shim_bad_header.count((bit<32>) ingress_port);
        } else if (shim_status == SHIM_TRUNCATED) {
            shim_truncated.count((bit<32>) ingress_port);
        }
    }
}
