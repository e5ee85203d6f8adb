// Parser and deparser. A packet addressed to a shim port is checked before it is trusted:
// an unknown version/type or a short payload sets shim_status and the packet is handled as
// plain UDP at the default priority (counted in ingress), never as a tagged gradient.
#ifndef __MLFC_PARSER__
#define __MLFC_PARSER__

parser MlfcParser(packet_in packet, out headers_t hdr, inout mlfc_meta_t meta,
                  inout standard_metadata_t std_meta) {
    state start {
        meta.shim_status = SHIM_NONE;
        meta.job_id = 0;
        meta.importance = 0;
        meta.progress = 0;
        meta.iteration = 0;
        meta.l4_src_port = 0;
        meta.l4_dst_port = 0;
        meta.priority = PRIORITY_DEFAULT;
        meta.job_slot = 0;
        transition parse_ethernet;
    }

    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        // L4 is parsed only for option-less, unfragmented-at-offset-0 IPv4.
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (5, 0, PROTO_TCP): parse_tcp;
            (5, 0, PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_tcp {
        packet.extract(hdr.tcp);
        meta.l4_src_port = hdr.tcp.src_port;
        meta.l4_dst_port = hdr.tcp.dst_port;
        transition accept;
    }

    state parse_udp {
        packet.extract(hdr.udp);
        meta.l4_src_port = hdr.udp.src_port;
        meta.l4_dst_port = hdr.udp.dst_port;
        transition select(hdr.udp.dst_port) {
            SHIM_PORT_BASE &&& SHIM_PORT_MASK: check_shim;
            default: accept;
        }
    }

    state check_shim {
        // Pessimistic until the whole shim is extracted: a parser error stops here.
        meta.shim_status = SHIM_TRUNCATED;
        transition select(packet.lookahead<bit<8>>()) {
            (SHIM_VERSION ++ MSG_DATA): parse_shim;
            (SHIM_VERSION ++ MSG_ACK): parse_shim;
            (SHIM_VERSION ++ MSG_CNP): parse_shim;
            default: bad_shim;
        }
    }

    state parse_shim {
        packet.extract(hdr.mlfc);
        meta.shim_status = SHIM_OK;
        transition accept;
    }

    state bad_shim {
        meta.shim_status = SHIM_BAD_HEADER;
        transition accept;
    }
}

control MlfcDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.tcp);
        packet.emit(hdr.udp);
        packet.emit(hdr.mlfc);
    }
}

control MlfcVerifyChecksum(inout headers_t hdr, inout mlfc_meta_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control MlfcComputeChecksum(inout headers_t hdr, inout mlfc_meta_t meta) {
    apply {
        // TTL and ECN change on the way through; L4 checksums do not cover either.
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

#endif
