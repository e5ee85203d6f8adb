// ECN marking on the enqueue depth (cells), per egress port and priority queue (the class ingress chose,
// bridged). The controller compiles each (port, class)'s profile (DCQCN's RED-like or DCTCP's step) into
// depth ranges: mark with probability threshold/65536 (a 16-bit random number below the threshold,
// tested as a non-zero saturated difference), or always. Only ECT packets are marked; the egress
// deparser recomputes the IPv4 checksum.
control Ecn(inout ipv4_h ipv4, in PortId_t egress_port, in priority_t priority, in QueueDepth_t enq_qdepth,
            in job_slot_t job_slot) {
    Counter<bit<32>, job_slot_t>(MAX_JOBS, CounterType_t.PACKETS) job_ecn_marks;
    Random<bit<16>>() random;
    // The action only loads its operands: one VLIW instruction cannot take both the threshold (action
    // data) and the random number (also on the action bus), so the subtraction follows the table.
    mark_threshold_t threshold_now = 0;
    bit<16> draw = 0;
    bit<16> margin = 0;  // threshold - random, saturated at 0: > 0 marks (always: 1 - 0)

    // Its own step: a gateway tests a field, not an arithmetic expression.
    action take_margin() {
        margin = threshold_now |-| draw;
    }

    action mark_always() {
        threshold_now = 1;
        draw = 0;
    }

    action mark_with_probability(mark_threshold_t threshold) {
        threshold_now = threshold;
        draw = random.get();
    }

    action no_mark() {
        threshold_now = 0;
        draw = 0;
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
        if (ipv4.ecn != ECN_NOT_ECT && ipv4.ecn != ECN_CE) {
            ecn_profile.apply();
            take_margin();
            if (margin != 0) {
                ipv4.ecn = ECN_CE;
                job_ecn_marks.count(job_slot);
            }
        }
    }
}
