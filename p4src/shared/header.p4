// Headers shared by every target. mlfc_h must match SHIM_FIELDS in mlfc/wire.py (a test checks).
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
    bit<2>      ecn;
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
    bit<16> src_port;
    bit<16> dst_port;
    bit<32> seq_no;
    bit<32> ack_no;
    bit<4>  data_offset;
    bit<4>  res;
    bit<8>  flags;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgent_ptr;
}

header udp_h {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> len;
    bit<16> checksum;
}

// The mlfc shim, 16 bytes after the UDP header (docs/wire-format.md).
header mlfc_h {
    bit<4>  version;
    bit<4>  msg_type;
    bit<8>  flags;
    bit<16> job_id;
    bit<32> iteration;
    bit<16> tensor_id;
    bit<4>  importance;
    bit<4>  progress;
    bit<8>  reserved;
    bit<32> chunk_seq;
}

struct headers_t {
    ethernet_h ethernet;
    ipv4_h     ipv4;
    tcp_h      tcp;
    udp_h      udp;
    mlfc_h     mlfc;
}

// Per-packet state carried from ingress to egress.
struct mlfc_meta_t {
    shim_status_t shim_status;
    bit<1>        tagged;      // a valid shim DATA/ACK/CNP
    job_id_t      job_id;      // from the shim or the 5-tuple classifier; 0 = no job
    bit<4>        importance;
    bit<4>        progress;
    iteration_t   iteration;
    bit<16>       l4_src_port;
    bit<16>       l4_dst_port;
    priority_t    priority;    // the queue chosen in ingress (v1model has no qid in egress)
    congestion_level_t level;  // of the queue the packet is headed for, read in ingress
    bit<32>       counter_index; // per-job counter slot
}

#endif
