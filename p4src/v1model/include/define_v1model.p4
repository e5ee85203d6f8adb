// v1model (BMv2 simple_switch_grpc --priority-queues 8) spelled with TNA's type names, as
// stratum/fabric-tna's define_v1model.p4 does, so the controls read alike on both targets.
#ifndef __MLFC_DEFINE_V1MODEL__
#define __MLFC_DEFINE_V1MODEL__

typedef bit<9>  PortId_t;      // standard_metadata ingress_port / egress_spec / egress_port
typedef bit<3>  QueueId_t;     // standard_metadata.priority: one of the 8 priority queues, 7 served first
typedef bit<19> QueueDepth_t;  // enq_qdepth / deq_qdepth: packets, per priority queue (BMv2 from 2025)

// Telemetry: a queue of d packets is reported as d * QDEPTH_UNIT_BYTES bytes, each packet taken as the
// deployment's default full-size gradient packet (mlfc/policy/depth.py: packet_unit(), as the ECN step does).
#define QDEPTH_UNIT_BYTES 1500

// egress_spec value that v1model drops (mark_to_drop sets it); the controller never routes to it.
const PortId_t DROP_PORT = 511;

// BMv2 has no qid in egress: the class chosen in ingress travels in mlfc_meta_t.priority, and egress
// records each (port, queue)'s congestion level at port * NUM_QUEUES + priority.
#define NUM_QUEUES 8
#define CONGESTION_SLOTS 4096   // MAX_PORTS * NUM_QUEUES

#endif
