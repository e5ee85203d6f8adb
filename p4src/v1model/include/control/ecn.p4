// DCQCN-style ECN marking on the enqueue depth. The controller compiles (Kmin, Kmax, Pmax) into
// depth ranges (mlfc/policy/ecn.py): mark with probability threshold/65536, or always. Only ECT
// packets are marked; the IPv4 checksum is recomputed in MlfcComputeChecksum.
control Ecn(inout ipv4_h ipv4, in PortId_t egress_port, in QueueDepth_t enq_qdepth, in job_slot_t job_slot) {
    counter(MAX_JOBS, CounterType.packets) job_ecn_marks;
    bit<17> mark_threshold = 0;  // 0: never, 65536: always

    action mark_always() {
        mark_threshold = 17w0x10000;
    }

    action mark_with_probability(mark_threshold_t threshold) {
        mark_threshold = (bit<17>) threshold;
    }

    action no_mark() {
        mark_threshold = 0;
    }

    table ecn_profile {
        key = {
            egress_port: ternary @name("egress_port");
            enq_qdepth: range @name("enq_qdepth");
        }
        actions = { mark_with_probability; mark_always; no_mark; }
        default_action = no_mark();
        size = ECN_PROFILE_SIZE;
    }

    apply {
        if (ipv4.isValid() && ipv4.ecn != ECN_NOT_ECT && ipv4.ecn != ECN_CE) {
            ecn_profile.apply();
            if (mark_threshold != 0) {
                bit<16> r;
                random(r, 16w0, 16w0xFFFF);
                if ((bit<17>) r < mark_threshold) {
                    ipv4.ecn = ECN_CE;
                    job_ecn_marks.count((bit<32>) job_slot);
                }
            }
        }
    }
}
