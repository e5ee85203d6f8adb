/*
 * Plain IPv4 forwarding with the same parser and routes_v4 table as mlfc.p4 (less the telemetry's rate
 * class in set_next_hop, and the parser's shim work): the baseline
 * that `make bench` compares mlfc.p4's packet rate against.
 */
#include <core.p4>
#include <v1model.p4>

#include "include/define_v1model.p4"
#include "../shared/define.p4"
#include "../shared/size.p4"
#include "../shared/header.p4"
#include "include/parser.p4"
#include "include/control/forwarding.p4"

control MlfcIngress(inout headers_t hdr, inout mlfc_meta_t meta, inout standard_metadata_t std_meta) {
    Forwarding() forwarding;

    apply {
        if (!hdr.ipv4.isValid() || hdr.ipv4.ihl != 5 || std_meta.checksum_error == 1) {
            mark_to_drop(std_meta);
            return;
        }
        forwarding.apply(hdr.ethernet, hdr.ipv4, std_meta, meta.port_class);
    }
}

control MlfcEgress(inout headers_t hdr, inout mlfc_meta_t meta, inout standard_metadata_t std_meta) {
    apply { }
}

@pkginfo(name="mlfc-l3fwd", version="0.1.0")
V1Switch(MlfcParser(), MlfcVerifyChecksum(), MlfcIngress(), MlfcEgress(), MlfcComputeChecksum(),
         MlfcDeparser()) main;
