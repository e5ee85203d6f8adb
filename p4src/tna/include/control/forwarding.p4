// IPv4 routing: longest prefix match to a next hop (port and MAC rewrite), TTL decrement. The next hop also
// carries its egress port's rate class for the queue telemetry (control/telemetry.p4), as on v1model.
control Forwarding(inout ethernet_h ethernet, inout ipv4_h ipv4, inout PortId_t egress_port, inout bit<3> drop_ctl,
                   inout rate_class_t port_class) {
    action drop() {
        drop_ctl = DROP_CTL_DROP;
    }

    action set_next_hop(PortId_t port, mac_addr_t src_mac, mac_addr_t dst_mac, rate_class_t rate_class) {
        egress_port = port;
        port_class = rate_class;
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
