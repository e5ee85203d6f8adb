// Constants and types shared by every target. Values mirror mlfc/wire.py and mlfc/policy/.
#ifndef __MLFC_DEFINE__
#define __MLFC_DEFINE__

typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;
typedef bit<16> job_id_t;
typedef bit<32> iteration_t;
typedef bit<3>  priority_t;

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<8>  PROTO_TCP = 6;
const bit<8>  PROTO_UDP = 17;

// Shim recognition: UDP destination port in 0x4D00..0x4DFF.
const bit<16> SHIM_PORT_BASE = 0x4D00;
const bit<16> SHIM_PORT_MASK = 0xFF00;
const bit<4>  SHIM_VERSION = 1;
const bit<16> UDP_SHIM_MIN_LEN = 8 + 16;  // UDP header + shim: shorter UDP datagrams are truncated shims
const bit<4>  MSG_DATA = 0;
const bit<4>  MSG_ACK = 1;
const bit<4>  MSG_CNP = 2;

// What the parser made of a packet addressed to a shim port.
typedef bit<2> shim_status_t;
const shim_status_t SHIM_NONE = 0;       // not addressed to a shim port
const shim_status_t SHIM_OK = 1;         // valid v1 shim, known message type
const shim_status_t SHIM_BAD_HEADER = 2; // unknown version or message type
const shim_status_t SHIM_TRUNCATED = 3;  // shorter than the 16-byte shim

// Strict priority queues, 7 served first (BMv2: --priority-queues 8).
const priority_t PRIORITY_CONTROL = 7;   // ACK/CNP: reserved, never given to a job
const priority_t PRIORITY_DEFAULT = 1;   // untagged, malformed or unmatched traffic

const bit<4> IMPORTANCE_PROTECTED = 8;   // importance >= 8 is never selectively dropped

const bit<2> ECN_NOT_ECT = 0;
const bit<2> ECN_CE = 3;

typedef bit<2> congestion_level_t;

const bit<9> DROP_PORT = 511;  // v1model's drop port

#endif
