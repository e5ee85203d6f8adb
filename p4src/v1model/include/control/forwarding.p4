// IPv4 routing: longest prefix match to a next hop (port and MAC rewrite), TTL decrement.
// With QUEUE_TELEMETRY (mlfc.p4), the next hop also carries its egress port's rate class for the queue
// telemetry (control/telemetry.p4): the route already names the port, so the class costs no lookup of its own.
// l3fwd.p4, the packet-rate baseline, keeps the plain action.
control Forwarding(inout ethernet_h ethernet, inout ipv4_h ipv4, inout standard_metadata_t std_meta,
                   inout rate_class_t port_class) {
    action drop() {
        mark_to_drop(std_meta);
    }

#ifdef QUEUE_TELEMETRY
    action set_next_hop(PortId_t port, mac_addr_t src_mac, mac_addr_t dst_mac, rate_class_t rate_class) {
        port_class = rate_class;
#else
    action set_next_hop(PortId_t port, mac_addr_t src_mac, mac_addr_t dst_mac) {
#endif
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
