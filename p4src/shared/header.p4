// Headers and the ingress metadata every target shares. mlfc_h must match SHIM_FIELDS in
// mlfc/wire.py (a test checks).
#ifndef __MLFC_HEADER__
#define __MLFC_HEADER__

#include "define.p4"

header ethernet_h {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

header ipv4_h {
    bit<4>      version;
    bit<4>      ihl;
    bit<6>      dscp;
    ecn_t       ecn;
    bit<16>     total_len;
    bit<16>     identification;
    bit<3>      flags;
    bit<13>     frag_offset;
    bit<8>      ttl;
    bit<8>      protocol;
    bit<16>     hdr_checksum;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
}

header tcp_h {
    l4_port_t src_port;
    l4_port_t dst_port;
    bit<32>   seq_no;
    bit<32>   ack_no;
    bit<4>    data_offset;
    bit<4>    res;
    bit<8>    flags;
    bit<16>   window;
    bit<16>   checksum;
    bit<16>   urgent_ptr;
}

header udp_h {
    l4_port_t src_port;
    l4_port_t dst_port;
    bit<16>   len;
    bit<16>   checksum;
}

// The mlfc shim, 20 bytes after the UDP header (docs/wire-format.md). On DATA, rate_class and queue_bytes
// are the queue telemetry egress writes (the deepest queue along the path); on an ACK, the receiver's echo.
header mlfc_h {
    bit<4>        version;
    bit<4>        msg_type;
    bit<8>        flags;
    job_id_t      job_id;
    iteration_t   iteration;
    bit<16>       tensor_id;
    importance_t  importance;
    progress_t    progress;
    rate_class_t  rate_class;
    bit<32>       chunk_seq;
    queue_bytes_t queue_bytes;
}

struct headers_t {
    ethernet_h ethernet;
    ipv4_h     ipv4;
    tcp_h      tcp;
    udp_h      udp;
    mlfc_h     mlfc;
}

// What ingress decides about a packet. On v1model the same struct reaches egress; TNA bridges the
// part egress needs (tna/include/header_tna.p4).
struct mlfc_meta_t {
    shim_status_t      shim_status;
    job_id_t           job_id;      // from the shim or the 5-tuple classifier; 0 = no job
    iteration_t        iteration;
    importance_t       importance;
    progress_t         progress;
    l4_port_t          l4_src_port;
    l4_port_t          l4_dst_port;
    priority_t         priority;    // the traffic class chosen in ingress
    job_slot_t         job_slot;    // per-job counter index
    congestion_level_t level;       // of the queue the packet is headed for
    rate_class_t       port_class;  // telemetry: the egress port's rate class, from the route (set_next_hop)
    rate_class_t       old_rate_class;   // v1model: the shim's telemetry as it came (the UDP checksum's update)
    queue_bytes_t      old_queue_bytes;
    bit<16>            udp_partial;      // ~(checksum + old words), the update's first step
}

#endif
