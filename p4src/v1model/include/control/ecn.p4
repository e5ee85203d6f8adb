// ECN marking on the enqueue depth, per egress port and priority queue (the class ingress chose). The
// controller compiles each (port, class)'s profile (mlfc/policy/ecn.py: DCQCN's RED-like Kmin/Kmax/Pmax
// or DCTCP's step at K bytes) into depth ranges: mark with probability threshold/65536, or always. Only
// ECT packets seeing a queue are marked; the IPv4 checksum is recomputed in MlfcComputeChecksum.
control Ecn(inout ipv4_h ipv4, in PortId_t egress_port, in priority_t priority, in QueueDepth_t enq_qdepth,
            in job_slot_t job_slot) {
    counter(MAX_JOBS, CounterType.packets) job_ecn_marks;

    action mark_always() {
        ipv4.ecn = ECN_CE;
        job_ecn_marks.count((bit<32>) job_slot);
    }

    action mark_with_probability(mark_threshold_t threshold) {
        bit<16> r;
        random(r, 16w0, 16w0xFFFF);
        ipv4.ecn = (r < threshold) ? ECN_CE : ipv4.ecn;
    }

    action no_mark() {
    }

    table ecn_profile {
        key = {
            egress_port: ternary @name("egress_port");
            priority: ternary @name("priority");
            enq_qdepth: range @name("enq_qdepth");
        }
        actions = { mark_with_probability; mark_always; no_mark; }
        default_action = no_mark();
        size = ECN_PROFILE_SIZE;
    }

    apply {
        // An empty queue marks nothing (no profile marks at or below its kmin >= 0: mlfc/policy/ecn.py),
        // so the common case of an idle port skips the lookup.
        if (enq_qdepth != 0 && ipv4.isValid() && ipv4.ecn != ECN_NOT_ECT && ipv4.ecn != ECN_CE) {
            // Marks are made in the actions; only a probabilistic one needs a test after the lookup,
            // to count it: the packet came in ECT, so CE now means this action marked it.
            switch (ecn_profile.apply().action_run) {
                mark_with_probability: {
                    if (ipv4.ecn == ECN_CE) {
                        job_ecn_marks.count((bit<32>) job_slot);
                    }
                }
            }
        }
    }
}
