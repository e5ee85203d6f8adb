/*
 * mlfc: ML-aware flow control for v1model (BMv2 simple_switch_grpc --priority-queues 8).
 *
 * Ingress: route, classify (shim or 5-tuple), pick a priority queue by job/iteration/progress,
 * count, drop low-importance gradients headed for a congested queue.
 * Laid out for BMv2's per-packet cost (docs/dataplane.md): the parser copies a valid shim's tag, straight-line
 * work sits in the actions that need it (the job's packet count in the one that gives its class), and the
 * common path (a tagged packet, an uncongested queue) takes few tables and tests.
 * Egress: record the queue's congestion level and, in the same action, write the queue telemetry (depth in
 * bytes, the rate class the route gave the port) into a tagged DATA packet's shim; mark ECN with the
 * (port, class)'s profile.
 * Table, action and counter names are the contract with the controller (mlfc/contract.py); the TNA
 * program (p4src/tna/mlfc.p4) carries the same ones.
 */
#include <core.p4>
#include <v1model.p4>

#define SHIM_TO_META_IN_PARSER
#define QUEUE_TELEMETRY
#include "include/define_v1model.p4"
#include "../shared/define.p4"
#include "../shared/size.p4"
#include "../shared/header.p4"
#include "include/parser.p4"
#include "include/congestion_register.p4"
#include "include/control/forwarding.p4"
#include "include/control/classifier.p4"
#include "include/control/queueing.p4"
#include "include/control/stats.p4"
#include "include/control/selective_drop.p4"
#include "include/control/telemetry.p4"
#include "include/control/congestion_monitor.p4"
#include "include/control/ecn.p4"

control MlfcIngress(inout headers_t hdr, inout mlfc_meta_t meta, inout standard_metadata_t std_meta) {
    Forwarding() forwarding;
    Classifier() classifier;
    Queueing() queueing;
    IngressStats() stats;
    SelectiveDrop() selective_drop;

    apply {
        // Hosts use static ARP (docs/dataplane.md): non-IPv4 frames are not forwarded. IPv4 with
        // options or a bad header checksum is dropped too (the checksum is recomputed over 20 bytes).
        // An if/else rather than an early return: a return costs BMv2 a flag, its table and a test.
        if (hdr.ipv4.isValid() && hdr.ipv4.ihl == 5 && std_meta.checksum_error == 0) {
            forwarding.apply(hdr.ethernet, hdr.ipv4, std_meta, meta.port_class);
            // A tagged packet skips the classifier and the per-port shim counters in one test.
            if (meta.shim_status != SHIM_OK) {
                classifier.apply(hdr.ipv4, hdr.udp, std_meta.parser_error, meta);
                stats.apply(meta.shim_status, std_meta.ingress_port);
            }
            queueing.apply(hdr.mlfc.msg_type, meta, std_meta.priority);
            selective_drop.apply(hdr.mlfc.msg_type, meta, std_meta);
        } else {
            mark_to_drop(std_meta);
        }
    }
}

control MlfcEgress(inout headers_t hdr, inout mlfc_meta_t meta, inout standard_metadata_t std_meta) {
    CongestionMonitor() congestion;
    Ecn() ecn;

    apply {
        congestion.apply(std_meta.egress_port, std_meta.deq_qdepth, meta.priority, hdr.mlfc, std_meta.enq_qdepth,
                         meta.port_class);
        ecn.apply(hdr.ipv4, std_meta.egress_port, meta.priority, std_meta.enq_qdepth, meta.job_slot);
    }
}

@pkginfo(name="mlfc", version="0.1.0")
V1Switch(MlfcParser(), MlfcVerifyChecksum(), MlfcIngress(), MlfcEgress(), MlfcComputeChecksum(),
         MlfcDeparser()) main;
