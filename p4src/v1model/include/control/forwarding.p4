// IPv4 routing: longest prefix match to a next hop (port and MAC rewrite), TTL decrement.
control Forwarding(inout ethernet_h ethernet, inout ipv4_h ipv4, inout standard_metadata_t std_meta) {
    action drop() {
        mark_to_drop(std_meta);
    }

    action set_next_hop(PortId_t port, mac_addr_t src_mac, mac_addr_t dst_mac) {
        std_meta.egress_spec = port;
        ethernet.src_addr = src_mac;
        ethernet.dst_addr = dst_mac;
        ipv4.ttl = ipv4.ttl - 1;
    }

    table routes_v4 {
        key = { ipv4.dst_addr: lpm @name("ipv4_dst"); }
        actions = { set_next_hop; drop; }
        const default_action = drop();
        size = ROUTES_V4_SIZE;
    }

    apply {
        if (ipv4.ttl <= 1) {
            drop();
        } else {
            routes_v4.apply();
        }
    }
}
