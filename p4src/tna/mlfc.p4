/*
 * mlfc: ML-aware flow control for TNA (Tofino 1), beside p4src/v1model/mlfc.p4 and sharing
 * p4src/shared/. The same tables, actions, counters, action parameters and match-field names
 * (mlfc/contract.py), so one controller drives both; docs/dataplane.md ("On Tofino") lists where the
 * mechanisms differ and docs/tofino.md what the compiler made of it.
 *
 * Ingress: route, classify (shim or 5-tuple), pick the egress queue (qid) by job/iteration/progress,
 * count, bridge what egress needs.
 * Egress: congestion level of the packet's queue, selective drop (drop_ctl), ECN marking, the queue
 * telemetry of a tagged DATA packet (depth in bytes, the port's rate class: docs/wire-format.md).
 */
#include <core.p4>
#include <tna.p4>

#include "include/define_tna.p4"
#include "../shared/define.p4"
#include "../shared/size.p4"
#include "../shared/header.p4"
#include "include/header_tna.p4"
#include "include/parser.p4"
#include "include/control/forwarding.p4"
#include "include/control/classifier.p4"
#include "include/control/queueing.p4"
#include "include/control/stats.p4"
#include "include/control/congestion_monitor.p4"
#include "include/control/selective_drop.p4"
#include "include/control/ecn.p4"
#include "include/control/telemetry.p4"

control MlfcIngress(inout headers_t hdr, inout ingress_meta_t meta,
                    in ingress_intrinsic_metadata_t ig_intr_md,
                    in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                    inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                    inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    Forwarding() forwarding;
    Classifier() classifier;
    Queueing() queueing;
    IngressStats() stats;

    apply {
        // Non-IPv4, IPv4 with options and a bad IPv4 header checksum are dropped before any counter.
        if (!hdr.ipv4.isValid() || hdr.ipv4.ihl != 5 || meta.ipv4_checksum_error == 1) {
            ig_dprsr_md.drop_ctl = DROP_CTL_DROP;
        } else {
            forwarding.apply(hdr.ethernet, hdr.ipv4, ig_tm_md.ucast_egress_port, ig_dprsr_md.drop_ctl,
                             meta.mlfc.port_class);
            classifier.apply(hdr.ipv4, hdr.mlfc, meta.mlfc);
            queueing.apply(hdr.mlfc.msg_type, meta.mlfc, ig_tm_md.qid, ig_tm_md.ingress_cos);
            stats.apply(meta.mlfc.job_id, meta.mlfc.shim_status, ig_intr_md.ingress_port, meta.mlfc.job_slot);
            meta.bridged.setValid();
            meta.bridged.priority = meta.mlfc.priority;
            meta.bridged._pad1 = 0;
            meta.bridged.droppable = 0;
            meta.bridged.telemetry = 0;
            if (meta.mlfc.shim_status == SHIM_OK && hdr.mlfc.msg_type == MSG_DATA) {
                meta.bridged.telemetry = 1;  // egress writes the queue telemetry into its shim
                if (meta.mlfc.importance < IMPORTANCE_PROTECTED) {
                    meta.bridged.droppable = 1;
                }
            }
            meta.bridged.importance = meta.mlfc.importance;
            meta.bridged.job_slot = meta.mlfc.job_slot;
            meta.bridged.rate_class = meta.mlfc.port_class;
        }
    }
}

control MlfcEgress(inout egress_headers_t hdr, inout egress_meta_t meta,
                   in egress_intrinsic_metadata_t eg_intr_md,
                   in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                   inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                   inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    CongestionMonitor() congestion;
    SelectiveDrop() selective_drop;
    Ecn() ecn;
    Telemetry() telemetry;
    bit<1> dropped = 0;

    apply {
        congestion.apply(eg_intr_md.deq_qdepth, meta.level);
        selective_drop.apply(meta.bridged, meta.level, eg_dprsr_md.drop_ctl, dropped);
        if (dropped == 0) {
            ecn.apply(hdr.ipv4, eg_intr_md.egress_port, meta.bridged.priority, eg_intr_md.enq_qdepth,
                      meta.bridged.job_slot);
            telemetry.apply(hdr.mlfc, meta.bridged.rate_class, eg_intr_md.enq_qdepth, hdr.udp.checksum,
                            meta.update_udp_checksum);
        }
    }
}

Pipeline(MlfcIngressParser(), MlfcIngress(), MlfcIngressDeparser(),
         MlfcEgressParser(), MlfcEgress(), MlfcEgressDeparser()) pipe;

@pkginfo(name="mlfc", version="0.1.0")
Switch(pipe) main;
