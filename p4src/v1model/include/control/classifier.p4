// Which job a packet belongs to: the shim says so for tagged traffic; untagged TCP/UDP flows
// are mapped by controller-installed 5-tuple entries. Malformed shims get no job.
control Classifier(in ipv4_h ipv4, in udp_h udp, in mlfc_h shim, in error parser_error, inout mlfc_meta_t meta) {
    action set_job(job_id_t job_id) {
        meta.job_id = job_id;
    }

    action no_job() {
        meta.job_id = 0;
    }

    table flows {
        key = {
            ipv4.src_addr: ternary @name("ipv4_src");
            ipv4.dst_addr: ternary @name("ipv4_dst");
            ipv4.protocol: ternary @name("ip_proto");
            meta.l4_src_port: ternary @name("l4_sport");
            meta.l4_dst_port: ternary @name("l4_dport");
        }
        actions = { set_job; no_job; }
        const default_action = no_job();
        size = FLOW_CLASSIFIER_SIZE;
    }

    apply {
        // A shim is truncated when the UDP length leaves less than 16 bytes for it (a padded short
        // frame would otherwise yield a shim read from padding) or the frame ends inside it (the
        // parser stops with PacketTooShort; p4c may drop the parser's own pessimistic status as a
        // dead store, so the verdict is taken here). Truncation wins over a bad version or type.
        if (udp.isValid() && (udp.dst_port & SHIM_PORT_MASK) == SHIM_PORT_BASE
                && (parser_error == error.PacketTooShort || udp.len < UDP_SHIM_MIN_LEN)) {
            meta.shim_status = SHIM_TRUNCATED;
        }
        if (meta.shim_status == SHIM_OK) {
            meta.job_id = shim.job_id;
            meta.iteration = shim.iteration;
            meta.importance = shim.importance;
            meta.progress = shim.progress;
        } else if (meta.shim_status == SHIM_NONE) {
            flows.apply();
        }
    }
}
