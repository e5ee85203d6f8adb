/*
 * mlfc: ML-aware flow control for v1model (BMv2 simple_switch_grpc --priority-queues 8).
 *
 * Ingress: route, classify (shim or 5-tuple), pick a priority queue by job/iteration/progress,
 * drop low-importance gradients headed for a congested queue, count.
 * Egress: record the queue's congestion level, mark ECN with the DCQCN profile.
 * Table and action names are the contract with the controller and the TNA port.
 */
#include <core.p4>
#include <v1model.p4>

#include "../shared/define.p4"
#include "../shared/size.p4"
#include "../shared/header.p4"
#include "include/parser.p4"
#include "include/control/forwarding.p4"
#include "include/control/classifier.p4"
#include "include/control/queueing.p4"
#include "include/control/selective_drop.p4"
#include "include/control/ecn.p4"
#include "include/control/stats.p4"

control MlfcIngress(inout headers_t hdr, inout mlfc_meta_t meta, inout standard_metadata_t std_meta) {
    Forwarding() forwarding;
    Classifier() classifier;
    Queueing() queueing;
    IngressStats() stats;
    SelectiveDrop() selective_drop;

    apply {
        // Hosts use static ARP (docs/dataplane.md): non-IPv4 frames are not forwarded. IPv4 with
        // options or a bad header checksum is dropped too (the checksum is recomputed over 20 bytes).
        if (!hdr.ipv4.isValid() || hdr.ipv4.ihl != 5 || std_meta.checksum_error == 1) {
            mark_to_drop(std_meta);
            return;
        }
        forwarding.apply(hdr, meta, std_meta);
        classifier.apply(hdr, meta, std_meta);
        queueing.apply(hdr, meta, std_meta);
        stats.apply(hdr, meta, std_meta);
        selective_drop.apply(hdr, meta, std_meta);
    }
}

control MlfcEgress(inout headers_t hdr, inout mlfc_meta_t meta, inout standard_metadata_t std_meta) {
    CongestionMonitor() congestion;
    Ecn() ecn;

    apply {
        congestion.apply(hdr, meta, std_meta);
        ecn.apply(hdr, meta, std_meta);
    }
}

@pkginfo(name="mlfc", version="0.1.0")
V1Switch(MlfcParser(), MlfcVerifyChecksum(), MlfcIngress(), MlfcEgress(), MlfcComputeChecksum(),
         MlfcDeparser()) main;
