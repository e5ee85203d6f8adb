// Types and constants every target shares. The target's own types (PortId_t, QueueId_t,
// QueueDepth_t, how a packet is dropped) come from v1model/include/define_v1model.p4 or from
// tna.p4 plus tna/include/define_tna.p4. Values mirror mlfc/contract.py and mlfc/wire.py (tests check).
#ifndef __MLFC_DEFINE__
#define __MLFC_DEFINE__

typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;
typedef bit<16> l4_port_t;
typedef bit<16> job_id_t;            // 0 = no job
typedef bit<32> iteration_t;
typedef bit<4>  importance_t;        // 0 = least important
typedef bit<4>  progress_t;          // progress bucket within the iteration's communication
typedef bit<3>  priority_t;          // traffic class = the queue a packet takes, 7 served first
typedef bit<2>  congestion_level_t;  // 0 = uncongested .. 3
typedef bit<2>  ecn_t;
typedef bit<16> mark_threshold_t;    // ECN: marked when a 16-bit random number is below it
typedef bit<12> job_slot_t;          // per-job counter index: job id, or 0 for ids >= MAX_JOBS
typedef bit<8>  rate_class_t;        // telemetry: the egress port's rate class (mlfc/policy/telemetry.py), 0 unknown
typedef bit<32> queue_bytes_t;       // telemetry: a queue's depth in bytes

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<8>  PROTO_TCP = 6;
const bit<8>  PROTO_UDP = 17;

// Shim recognition: UDP destination port in 0x4D00..0x4DFF.
const l4_port_t SHIM_PORT_BASE = 0x4D00;
const l4_port_t SHIM_PORT_MASK = 0xFF00;
const bit<4>  SHIM_VERSION = 2;
const bit<16> UDP_SHIM_MIN_LEN = 8 + 20;  // UDP header + shim: shorter UDP datagrams are truncated shims
const bit<4>  MSG_DATA = 0;
const bit<4>  MSG_ACK = 1;
const bit<4>  MSG_CNP = 2;

// What the parser made of a packet addressed to a shim port.
typedef bit<2> shim_status_t;
const shim_status_t SHIM_NONE = 0;       // not addressed to a shim port
const shim_status_t SHIM_OK = 1;         // valid v1 shim, known message type
const shim_status_t SHIM_BAD_HEADER = 2; // unknown version or message type
const shim_status_t SHIM_TRUNCATED = 3;  // shorter than the 20-byte shim

// Traffic classes (strict priority, 7 served first).
const priority_t PRIORITY_CONTROL = 7;   // CNP (TNA for now: ACK/CNP): reserved, never given to a job
const priority_t PRIORITY_DEFAULT = 1;   // untagged, malformed or unmatched traffic

// Nothing is selectively dropped at level 0 (v1model skips the threshold lookup there).
const congestion_level_t UNCONGESTED_LEVEL = 0;

const importance_t IMPORTANCE_PROTECTED = 8;   // importance >= 8 is never selectively dropped

const ecn_t ECN_NOT_ECT = 0;
const ecn_t ECN_CE = 3;

#endif
