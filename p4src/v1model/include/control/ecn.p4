// DCQCN-style ECN marking on the enqueue depth. The controller compiles (Kmin, Kmax, Pmax) into
// depth ranges (mlfc/policy/ecn.py): mark with probability threshold/65536, or always. Only ECT
// packets are marked; the IPv4 checksum is recomputed in MlfcComputeChecksum.
control Ecn(inout headers_t hdr, inout mlfc_meta_t meta, inout standard_metadata_t std_meta) {
    counter(MAX_JOBS, CounterType.packets) job_ecn_marks;
    bit<16> rand_val = 0;

    action set_ce() {
        hdr.ipv4.ecn = ECN_CE;
        job_ecn_marks.count(meta.counter_index);
    }

    action mark_always() {
        set_ce();
    }

    action mark_with_probability(bit<16> threshold) {
        random(rand_val, 16w0, 16w0xFFFF);
        if (rand_val < threshold) {
            set_ce();
        }
    }

    action no_mark() {
    }

    table ecn_profile {
        key = {
            std_meta.egress_port: ternary;
            meta.priority: ternary;
            std_meta.enq_qdepth: range;
        }
        actions = { mark_with_probability; mark_always; no_mark; }
        default_action = no_mark();
        size = ECN_PROFILE_SIZE;
    }

    apply {
        if (hdr.ipv4.isValid() && hdr.ipv4.ecn != ECN_NOT_ECT && hdr.ipv4.ecn != ECN_CE) {
            ecn_profile.apply();
        }
    }
}
