// DCQCN-style ECN marking on the enqueue depth. The controller compiles (Kmin, Kmax, Pmax) into
// depth ranges (mlfc/policy/ecn.py): mark with probability threshold/65536, or always. Only ECT
// packets are marked; the IPv4 checksum is recomputed in MlfcComputeChecksum.
control Ecn(inout headers_t hdr, inout mlfc_meta_t meta, inout standard_metadata_t std_meta) {
    counter(MAX_JOBS, CounterType.packets) job_ecn_marks;
    bit<17> mark_threshold = 0;  // 0: never, 65536: always

    action mark_always() {
        mark_threshold = 17w0x10000;
    }

    action mark_with_probability(bit<16> threshold) {
        mark_threshold = (bit<17>) threshold;
    }

    action no_mark() {
        mark_threshold = 0;
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
            if (mark_threshold != 0) {
                bit<16> r;
                random(r, 16w0, 16w0xFFFF);
                if ((bit<17>) r < mark_threshold) {
                    hdr.ipv4.ecn = ECN_CE;
                    job_ecn_marks.count(meta.counter_index);
                }
            }
        }
    }
}
