// Which job a packet belongs to. A valid shim's tag was copied into the metadata by the parser; this
// control handles the rest: untagged TCP/UDP flows are mapped by controller-installed 5-tuple entries,
// malformed shims get no job. Ingress applies it only to packets the parser did not tag.
control Classifier(in ipv4_h ipv4, in udp_h udp, in error parser_error, inout mlfc_meta_t meta) {
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
        // A frame that ends inside the shim stops the parser with PacketTooShort; p4c may drop the
        // parser's own pessimistic status as a dead store, so the verdict is taken here.
        if (udp.isValid() && (udp.dst_port & SHIM_PORT_MASK) == SHIM_PORT_BASE
                && parser_error == error.PacketTooShort) {
            meta.shim_status = SHIM_TRUNCATED;
        } else if (meta.shim_status == SHIM_NONE) {
            flows.apply();
        }
    }
}
