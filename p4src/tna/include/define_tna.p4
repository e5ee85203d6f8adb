// What tna.p4 does not name but the mlfc controls use (PortId_t, QueueId_t and the intrinsic metadata
// come from tna.p4 itself).
#ifndef __MLFC_DEFINE_TNA__
#define __MLFC_DEFINE_TNA__

// eg_intr_md.enq_qdepth / deq_qdepth: 80-byte cells on Tofino 1, per egress queue. The controller
// converts its depth thresholds (packets) into cells (mlfc/policy/depth.py).
typedef bit<19> QueueDepth_t;

// Telemetry: a queue of d cells is reported as d * QDEPTH_UNIT_BYTES bytes (mlfc/policy/depth.py: CELLS); Tofino
// multiplies by no constant, so control/telemetry.p4 makes it of shifts (a test holds them to this).
#define QDEPTH_UNIT_BYTES 80

// drop_ctl value that drops the packet at the end of the pipeline (bit 0: drop unicast/multicast).
const bit<3> DROP_CTL_DROP = 1;

#endif
