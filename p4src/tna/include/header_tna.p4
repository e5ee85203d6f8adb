// TNA's metadata: ingress keeps mlfc_meta_t; what egress needs of it (selective drop and ECN run in
// egress on Tofino) travels in a bridged header that the ingress deparser puts in front of the frame.
#ifndef __MLFC_HEADER_TNA__
#define __MLFC_HEADER_TNA__

header bridged_h {
    priority_t   priority;    // the class (egress queue) ingress chose: ECN profiles are per class
    bit<1>       droppable;   // tagged DATA below IMPORTANCE_PROTECTED: subject to selective drop
    importance_t importance;
    bit<1>       telemetry;   // tagged DATA: the egress parser parses UDP and the shim to write the telemetry
    bit<3>       _pad1;
    job_slot_t   job_slot;    // per-job counter index
    rate_class_t rate_class;  // the egress port's rate class, from the route: the telemetry's
}

struct ingress_meta_t {
    bridged_h   bridged;
    mlfc_meta_t mlfc;
    bit<1>      ipv4_checksum_error;
}

struct egress_headers_t {
    ethernet_h ethernet;
    ipv4_h     ipv4;
    udp_h      udp;    // tagged DATA only (bridged.telemetry)
    mlfc_h     mlfc;
}

struct egress_meta_t {
    bridged_h          bridged;
    congestion_level_t level;
    bit<16>            udp_residual;         // the UDP checksum less the words telemetry may rewrite
    bit<1>             update_udp_checksum;  // telemetry rewrote the shim of a checksummed datagram
}

#endif
