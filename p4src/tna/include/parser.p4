// Parsers and deparsers. Ingress parses what docs/dataplane.md describes (IPv4 without options, TCP/UDP
// ports, the shim on a shim port, its verdict in shim_status) and verifies the IPv4 checksum; egress
// parses the bridged header, Ethernet and IPv4 (ECN marking rewrites the ToS byte) and recomputes the
// IPv4 checksum, which covers ingress's TTL decrement too.
#ifndef __MLFC_PARSER_TNA__
#define __MLFC_PARSER_TNA__

parser MlfcIngressParser(packet_in pkt, out headers_t hdr, out ingress_meta_t meta,
                         out ingress_intrinsic_metadata_t ig_intr_md) {
    Checksum() ipv4_checksum;

    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        meta.bridged.setInvalid();  // made valid in ingress for packets that go on to egress
        meta.mlfc.shim_status = SHIM_NONE;
        meta.mlfc.job_id = 0;
        meta.mlfc.iteration = 0;
        meta.mlfc.importance = 0;
        meta.mlfc.progress = 0;
        meta.mlfc.l4_src_port = 0;
        meta.mlfc.l4_dst_port = 0;
        meta.mlfc.priority = PRIORITY_DEFAULT;
        meta.mlfc.job_slot = 0;
        meta.mlfc.port_class = 0;
        meta.ipv4_checksum_error = 0;
        transition parse_ethernet;
    }

    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        ipv4_checksum.add(hdr.ipv4);
        // The Tofino compiler maps verify() only when assigned straight to a field, and the parser's
        // checksum unit writes 1 there when the residual is non-zero: a bad checksum (tna.p4's comment
        // says "valid"; the compiler names the destination csum_err, and TNA programs read it so).
        meta.ipv4_checksum_error = (bit<1>) ipv4_checksum.verify();
        // L4 is parsed only for option-less, unfragmented-at-offset-0 IPv4.
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (5, 0, PROTO_TCP): parse_tcp;
            (5, 0, PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_tcp {
        pkt.extract(hdr.tcp);
        meta.mlfc.l4_src_port = hdr.tcp.src_port;
        meta.mlfc.l4_dst_port = hdr.tcp.dst_port;
        transition accept;
    }

    state parse_udp {
        pkt.extract(hdr.udp);
        meta.mlfc.l4_src_port = hdr.udp.src_port;
        meta.mlfc.l4_dst_port = hdr.udp.dst_port;
        transition select(hdr.udp.dst_port) {
            SHIM_PORT_BASE &&& SHIM_PORT_MASK: check_shim;
            default: accept;
        }
    }

    // Truncated when the UDP length leaves fewer than 20 bytes for the shim (0..27 as three masks); that
    // wins over a bad version or type. The UDP length is what says "truncated" on Tofino: a minimum frame
    // (60 bytes) ends 2 bytes short of the shim's end (62), and its padding is not a shim; a frame cut
    // shorter than its own UDP length does not reach a Tofino port.
    state check_shim {
        transition select(hdr.udp.len, pkt.lookahead<bit<8>>()) {
            (16w0x0000 &&& 16w0xFFF0, _): shim_truncated;
            (16w0x0010 &&& 16w0xFFF8, _): shim_truncated;
            (16w0x0018 &&& 16w0xFFFC, _): shim_truncated;
            (_, SHIM_VERSION ++ MSG_DATA): parse_shim;
            (_, SHIM_VERSION ++ MSG_ACK): parse_shim;
            (_, SHIM_VERSION ++ MSG_CNP): parse_shim;
            default: bad_shim;
        }
    }

    state parse_shim {
        pkt.extract(hdr.mlfc);
        meta.mlfc.shim_status = SHIM_OK;
        transition accept;
    }

    state bad_shim {
        meta.mlfc.shim_status = SHIM_BAD_HEADER;
        transition accept;
    }

    state shim_truncated {
        meta.mlfc.shim_status = SHIM_TRUNCATED;
        transition accept;
    }
}

control MlfcIngressDeparser(packet_out pkt, inout headers_t hdr, in ingress_meta_t meta,
                            in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    apply {
        pkt.emit(meta.bridged);
        pkt.emit(hdr);
    }
}

parser MlfcEgressParser(packet_in pkt, out egress_headers_t hdr, out egress_meta_t meta,
                        out egress_intrinsic_metadata_t eg_intr_md) {
    Checksum() udp_checksum;

    state start {
        pkt.extract(eg_intr_md);
        pkt.extract(meta.bridged);
        meta.level = 0;
        meta.udp_residual = 0;
        meta.update_udp_checksum = 0;
        pkt.extract(hdr.ethernet);
        pkt.extract(hdr.ipv4);  // ingress forwards IPv4 only
        transition select(meta.bridged.telemetry) {
            1: parse_shim;
            default: accept;
        }
    }

    // Tagged DATA (ingress parsed a valid shim, so IHL 5 and UDP): the telemetry rewrites the word
    // importance|progress|rate_class and queue_bytes. Their old values and the old checksum leave the
    // residual that the deparser adds the new values to (an incremental update, RFC 1624, as Intel's
    // tna_checksum example does for a rewritten TCP port), so the payload is never summed.
    state parse_shim {
        pkt.extract(hdr.udp);
        pkt.extract(hdr.mlfc);
        udp_checksum.subtract({hdr.udp.checksum});
        udp_checksum.subtract({hdr.mlfc.importance, hdr.mlfc.progress, hdr.mlfc.rate_class, hdr.mlfc.queue_bytes});
        udp_checksum.subtract_all_and_deposit(meta.udp_residual);
        transition accept;
    }
}

control MlfcEgressDeparser(packet_out pkt, inout egress_headers_t hdr, in egress_meta_t meta,
                           in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Checksum() ipv4_checksum;
    Checksum() udp_checksum;

    apply {
        hdr.ipv4.hdr_checksum = ipv4_checksum.update({
            hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn, hdr.ipv4.total_len,
            hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
            hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr });
        // A UDP checksum of 0 (none, in IPv4) stays 0: egress sets the flag only for a non-zero one.
        if (meta.update_udp_checksum == 1) {
            hdr.udp.checksum = udp_checksum.update({
                hdr.mlfc.importance, hdr.mlfc.progress, hdr.mlfc.rate_class, hdr.mlfc.queue_bytes,
                meta.udp_residual });
        }
        pkt.emit(hdr);
    }
}

#endif
