// Parser and deparser. A packet addressed to a shim port is checked before it is trusted:
// an unknown version/type or a short payload sets shim_status and the packet is handled as
// plain UDP at the default priority (counted in ingress), never as a tagged gradient.
// mlfc.p4 defines SHIM_TO_META_IN_PARSER: the parser also judges a short UDP length and copies a valid
// shim's tag into the metadata, work its ingress would otherwise do. l3fwd.p4 (the packet-rate baseline)
// leaves it undefined and keeps the plain parser.
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
#ifdef SHIM_TO_META_IN_PARSER
        // A UDP length that leaves less than the 20-byte shim makes a truncated shim (a padded short
        // frame would otherwise yield a shim read from padding): 0..15, 16..23 and 24..27 as three masks
        // are len < 28 (UDP_SHIM_MIN_LEN), and it wins over a bad version or type.
        transition select(hdr.udp.dst_port, hdr.udp.len) {
            (SHIM_PORT_BASE &&& SHIM_PORT_MASK, 16w0 &&& 16w0xFFF0): shim_truncated;
            (SHIM_PORT_BASE &&& SHIM_PORT_MASK, 16w16 &&& 16w0xFFF8): shim_truncated;
            (SHIM_PORT_BASE &&& SHIM_PORT_MASK, 16w24 &&& 16w0xFFFC): shim_truncated;
            (SHIM_PORT_BASE &&& SHIM_PORT_MASK, _): check_shim;
            default: accept;
        }
#else
        transition select(hdr.udp.dst_port) {
            SHIM_PORT_BASE &&& SHIM_PORT_MASK: check_shim;
            default: accept;
        }
#endif
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
#ifdef SHIM_TO_META_IN_PARSER
        // The parser's set operations are cheaper per packet than an action's primitives on BMv2.
        meta.job_id = hdr.mlfc.job_id;
        meta.iteration = hdr.mlfc.iteration;
        meta.importance = hdr.mlfc.importance;
        meta.progress = hdr.mlfc.progress;
#endif
#ifdef QUEUE_TELEMETRY
        // The words the telemetry may rewrite, as the packet came: the UDP checksum's update takes them out
        // (MlfcComputeChecksum).
        meta.old_rate_class = hdr.mlfc.rate_class;
        meta.old_queue_bytes = hdr.mlfc.queue_bytes;
#endif
        transition accept;
    }

#ifdef SHIM_TO_META_IN_PARSER
    state shim_truncated {
        meta.shim_status = SHIM_TRUNCATED;
        transition accept;
    }
#endif

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
#ifdef QUEUE_TELEMETRY
        // The telemetry may have rewritten the shim: HC' = HC + m - m' in ones' complement (RFC 1624), in two
        // csum16 steps over plain fields: partial = ~(HC + m), then HC' = ~(partial + m').
        update_checksum(hdr.mlfc.isValid() && hdr.mlfc.msg_type == MSG_DATA && hdr.udp.checksum != 0,
            { hdr.udp.checksum, hdr.mlfc.importance, hdr.mlfc.progress, meta.old_rate_class, meta.old_queue_bytes },
            meta.udp_partial, HashAlgorithm.csum16);
        update_checksum(hdr.mlfc.isValid() && hdr.mlfc.msg_type == MSG_DATA && hdr.udp.checksum != 0,
            { meta.udp_partial, hdr.mlfc.importance, hdr.mlfc.progress, hdr.mlfc.rate_class, hdr.mlfc.queue_bytes },
            hdr.udp.checksum, HashAlgorithm.csum16);
#endif
    }
}

#endif
