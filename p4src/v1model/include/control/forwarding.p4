// IPv4 routing: longest prefix match to a next hop (port and MAC rewrite), TTL decrement.
control Forwarding(inout headers_t hdr, inout mlfc_meta_t meta, inout standard_metadata_t std_meta) {
    action drop() {
        mark_to_drop(std_meta);
    }

    action set_next_hop(bit<9> port, mac_addr_t src_mac, mac_addr_t dst_mac) {
        std_meta.egress_spec = port;
        hdr.ethernet.src_addr = src_mac;
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    table routes_v4 {
        key = { hdr.ipv4.dst_addr: lpm; }
        actions = { set_next_hop; drop; }
        const default_action = drop();
        size = ROUTES_V4_SIZE;
    }

    apply {
        if (hdr.ipv4.ttl <= 1) {
            drop();
        } else {
            routes_v4.apply();
        }
    }
}
