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
