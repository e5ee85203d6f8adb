// Which job a packet belongs to: the shim says so for tagged traffic; untagged TCP/UDP flows
// are mapped by controller-installed 5-tuple entries. Malformed shims get no job.
control Classifier(inout headers_t hdr, inout mlfc_meta_t meta, inout standard_metadata_t std_meta) {
    action set_job(job_id_t job_id) {
        meta.job_id = job_id;
    }

    action no_job() {
        meta.job_id = 0;
    }

    table flows {
        key = {
            hdr.ipv4.src_addr: ternary;
            hdr.ipv4.dst_addr: ternary;
            hdr.ipv4.protocol: ternary;
            meta.l4_src_port: ternary;
            meta.l4_dst_port: ternary;
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
        if (hdr.udp.isValid() && (hdr.udp.dst_port & SHIM_PORT_MASK) == SHIM_PORT_BASE
                && (std_meta.parser_error == error.PacketTooShort || hdr.udp.len < UDP_SHIM_MIN_LEN)) {
            meta.shim_status = SHIM_TRUNCATED;
        }
        if (meta.shim_status == SHIM_OK) {
            meta.tagged = 1;
            meta.job_id = hdr.mlfc.job_id;
            meta.iteration = hdr.mlfc.iteration;
            meta.importance = hdr.mlfc.importance;
            meta.progress = hdr.mlfc.progress;
        } else if (meta.shim_status == SHIM_NONE) {
            flows.apply();
        }
    }
}
